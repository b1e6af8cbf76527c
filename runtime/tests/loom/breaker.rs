//! loom models of the breaker's atomic protocols: half-open admission, the trip, reset, the
//! generation that keeps stale results out, and the streak.
//!
//! Each model is two threads and a handful of operations, so that loom explores every
//! interleaving, without a preemption bound, in about a second for the whole file.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, ConfigBuilder, Event, ManualClock, State, Window};
use loom::thread;

/// Explores every interleaving: no preemption bound (set `LOOM_MAX_PREEMPTIONS` to bound
/// it). Each model is small enough that the whole file runs in about a second.
fn model(f: impl Fn() + Sync + Send + 'static) {
    loom::model::Builder::new().check(f);
}

fn breaker(config: ConfigBuilder) -> (Breaker, ManualClock) {
    // The path without timers, as before they came (tests/loom/timers.rs models the timers):
    // arming one adds a step to every trip, and these models' interleavings with it.
    let clock = ManualClock::without_timers();
    let config = config.clock(clock.clone()).build().unwrap();
    (Breaker::new("loom", config), clock)
}

/// Counts the events a breaker emits (std atomics: the count is read after the joins).
fn count_events(b: &Breaker) -> Arc<AtomicUsize> {
    let n = Arc::new(AtomicUsize::new(0));
    let seen = n.clone();
    b.on_state_change(move |_: &Event| {
        seen.fetch_add(1, Ordering::Relaxed);
    });
    n
}

#[test]
fn half_open_admission_never_exceeds_the_limit() {
    model(|| {
        let (b, clock) = breaker(
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1)),
        );
        b.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(1));
        // Both threads race to move the breaker to half-open and to take its one probe slot.
        // A taken slot is kept (forgotten), so every admission counts against the limit.
        let admitted = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (b, admitted) = (b.clone(), admitted.clone());
                thread::spawn(move || {
                    if let Ok(p) = b.try_acquire_owned() {
                        assert!(p.is_probe());
                        admitted.fetch_add(1, Ordering::Relaxed);
                        std::mem::forget(p);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(admitted.load(Ordering::Relaxed), 1);
        assert_eq!(b.state(), State::HalfOpen);
    });
}

#[test]
fn half_open_admission_of_two_among_three_threads() {
    // Three threads are many more interleavings: bounded, to stay within seconds.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(1);
    builder.check(|| {
        let (b, clock) = breaker(
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .half_open_calls(2)
                .successes(2),
        );
        b.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(1));
        let admitted = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (b, admitted) = (b.clone(), admitted.clone());
                thread::spawn(move || {
                    if let Ok(p) = b.try_acquire_owned() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                        std::mem::forget(p);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(admitted.load(Ordering::Relaxed), 2);
    });
}

#[test]
fn half_open_admission_with_a_slot_freed_meanwhile() {
    model(|| {
        let (b, clock) = breaker(
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .half_open_calls(2)
                .successes(2),
        );
        b.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(1));
        let first = b.try_acquire_owned().unwrap();
        let inside = Arc::new(AtomicUsize::new(1));
        let max = Arc::new(AtomicUsize::new(1));
        // One thread frees its slot (Ignored) while the other takes slots; at no time may
        // more than two probes be out.
        let t = {
            let (inside, max) = (inside.clone(), max.clone());
            thread::spawn(move || {
                inside.fetch_sub(1, Ordering::SeqCst);
                first.record(breakerbox_runtime::Outcome::Ignored);
                let _ = &max;
            })
        };
        let mut held = vec![];
        for _ in 0..2 {
            if let Ok(p) = b.try_acquire_owned() {
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                held.push(p);
            }
        }
        t.join().unwrap();
        assert!(max.load(Ordering::SeqCst) <= 2);
        assert!(!held.is_empty());
        std::mem::forget(held);
    });
}

#[test]
fn a_trip_happens_exactly_once() {
    model(|| {
        let (b, _) = breaker(Config::builder().failures(2));
        let events = count_events(&b);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || {
                    b.try_acquire_owned()
                        .unwrap()
                        .record(breakerbox_runtime::Outcome::Failure)
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(b.state(), State::Open);
        let m = b.metrics();
        assert_eq!((m.times_opened, m.failures), (1, 2));
        assert_eq!(events.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn two_failures_past_the_threshold_trip_once() {
    model(|| {
        let (b, _) = breaker(Config::builder().failures(1));
        let events = count_events(&b);
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let b = b.clone();
                thread::spawn(move || {
                    if let Ok(p) = b.try_acquire_owned() {
                        p.record(breakerbox_runtime::Outcome::Failure);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.metrics().times_opened, 1);
        assert_eq!(events.load(Ordering::Relaxed), 1);
    });
}

#[test]
fn a_reset_racing_a_trip_is_not_lost() {
    model(|| {
        let (b, _) = breaker(Config::builder().failures(1));
        let tripper = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_acquire_owned()
                    .unwrap()
                    .record(breakerbox_runtime::Outcome::Failure)
            })
        };
        b.reset();
        tripper.join().unwrap();
        // Trip then reset: closed, opened once. Admitted before the reset but recorded after:
        // stale, closed, never opened. Admitted after the reset: open.
        let m = b.metrics();
        match m.state {
            State::Closed => assert!(m.times_opened <= 1),
            State::Open => assert_eq!(m.times_opened, 1),
            other => panic!("illegal state {other:?}"),
        }
        assert_eq!(m.failures, 1);
        // Never stuck: a reset always closes it.
        b.reset();
        assert_eq!(b.state(), State::Closed);
    });
}

#[test]
fn a_stale_failure_is_not_counted_against_the_new_state() {
    model(|| {
        let (b, _) = breaker(Config::builder().failures(1));
        let stale = b.try_acquire_owned().unwrap();
        let t = thread::spawn(move || stale.record(breakerbox_runtime::Outcome::Failure));
        b.reset();
        t.join().unwrap();
        // Recorded before the reset: it tripped, and the reset closed it. After: stale.
        // Either way the breaker the reset made is closed with no failure in its streak.
        let m = b.metrics();
        assert_eq!(m.state, State::Closed);
        assert_eq!(m.consecutive_failures, 0);
        assert_eq!(m.failures, 1);
    });
}

#[test]
fn repro_stale_failure_lands_in_the_window_a_reset_cleared() {
    model(|| {
        let (b, _) = breaker(
            Config::builder()
                .failure_rate(100)
                .window(Window::Calls(2))
                .min_calls(1),
        );
        let stale = b.try_acquire_owned().unwrap();
        let t = thread::spawn(move || stale.record(breakerbox_runtime::Outcome::Failure));
        b.reset();
        t.join().unwrap();
        let m = b.metrics();
        assert_eq!(m.state, State::Closed);
        assert_eq!(
            m.window_calls, 0,
            "a stale failure landed in the new window"
        );
    });
}

#[test]
fn a_stale_probe_is_not_counted_against_the_new_round() {
    model(|| {
        let (b, clock) = breaker(
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .half_open_calls(2),
        );
        b.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(1));
        let old = b.try_acquire_owned().unwrap();
        assert!(old.is_probe());
        let t = thread::spawn(move || old.record(breakerbox_runtime::Outcome::Failure));
        // Meanwhile another probe succeeds and closes the breaker.
        b.try_acquire().unwrap().success();
        t.join().unwrap();
        // Failure first: reopened, and the success is stale. Success first: closed, and the
        // failure is stale.
        let m = b.metrics();
        match m.state {
            State::Closed => assert_eq!(m.times_opened, 1),
            State::Open => assert_eq!(m.times_opened, 2),
            other => panic!("illegal state {other:?}"),
        }
    });
}

#[test]
fn repro_success_racing_a_failure_keeps_the_streak() {
    model(|| {
        let (b, _) = breaker(Config::builder().failures(3));
        b.try_acquire().unwrap().failure();
        let t = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_acquire_owned()
                    .unwrap()
                    .record(breakerbox_runtime::Outcome::Failure)
            })
        };
        b.try_acquire().unwrap().success();
        t.join().unwrap();
        // F, then F S (0) or F S F (1): never 2, which no order gives.
        let streak = b.metrics().consecutive_failures;
        assert!(streak <= 1, "streak {streak} after F, F ∥ S");
    });
}

/// Listeners run after the transition lock is released (so that a listener may itself act on
/// the breaker), yet two racing transitions reach them in the order they happened: events are
/// queued under the transition lock and one thread at a time delivers them. Before that,
/// loom found `[Open, ForcedOpen]` for a breaker that ends open.
#[test]
fn listeners_see_transitions_in_the_order_they_happened() {
    model(|| {
        let (b, _) = breaker(Config::builder().failures(1));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        {
            let seen = seen.clone();
            b.on_state_change(move |e| seen.lock().unwrap().push(e.to));
        }
        let t = {
            let b = b.clone();
            thread::spawn(move || b.trip_for(Duration::from_secs(1)))
        };
        b.force_open();
        t.join().unwrap();
        let last = *seen.lock().unwrap().last().unwrap();
        assert_eq!(last, b.state(), "events {:?}", seen.lock().unwrap());
    });
}

#[test]
fn repro_bulkhead_refuses_while_a_place_is_free() {
    model(|| {
        let (b, _) = breaker(Config::builder().max_concurrent(1));
        let a = b.try_acquire_owned().unwrap();
        let t = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire_owned().ok())
        };
        a.record(breakerbox_runtime::Outcome::Success);
        let c = b.try_acquire_owned().ok();
        let other = t.join().unwrap();
        // The place `a` freed goes to whichever of the two asked first after it was freed.
        // Admission never increments to undo on refusal: a passing increment of the other's
        // would refuse `c` although `a`'s place was free, and both would be refused.
        let admitted = usize::from(c.is_some()) + usize::from(other.is_some());
        assert_eq!(
            admitted,
            1,
            "c {:?}, other {:?}",
            c.is_some(),
            other.is_some()
        );
    });
}

#[test]
fn the_last_handle_frees_the_breaker_once() {
    model(|| {
        let (b, _clock) = breaker(Config::builder().failures(1));
        // The listener, and so this sentinel, lives as long as the breaker does.
        let alive = Arc::new(());
        let held = alive.clone();
        b.on_state_change(move |_: &Event| {
            let _ = &held;
        });
        let other = b.clone();
        let t = thread::spawn(move || {
            other.try_acquire().unwrap().failure();
            drop(other);
        });
        let _ = b.try_acquire();
        drop(b);
        t.join().unwrap();
        assert_eq!(Arc::strong_count(&alive), 1, "the breaker was not freed");
    });
}

/// A weak handle upgrading while the last handle goes: it gets a live breaker or nothing, and
/// the breaker (its listener with it) is dropped once, by whichever handle goes last; its
/// memory is freed once, by whichever of the last handle and the weak handle goes last.
#[test]
fn a_weak_handle_upgrades_or_not_while_the_last_handle_goes() {
    model(|| {
        let (b, _clock) = breaker(Config::builder());
        let alive = Arc::new(());
        let held = alive.clone();
        b.on_state_change(move |_: &Event| {
            let _ = &held;
        });
        let weak = b.downgrade();
        let t = thread::spawn(move || {
            if let Some(b) = weak.upgrade() {
                assert_eq!(b.state(), State::Closed);
            }
            drop(weak);
        });
        drop(b);
        t.join().unwrap();
        assert_eq!(Arc::strong_count(&alive), 1, "the breaker was not dropped");
    });
}

// ============================================================================================
// `failures_within` streak starts, and bulkhead places across a reset.
// ============================================================================================

/// Two failures at the same moment, on a `failures_within` breaker whose last streak start
/// is older than the span. The second must count into the streak the first started: were the
/// start stored after the streak is published, the second could read the old start, find the
/// streak expired and start over, and `failures = 2` would not trip.
#[test]
fn two_failures_at_once_within_the_span_trip() {
    model(|| {
        let (b, clock) = breaker(
            Config::builder()
                .failures(2)
                .failures_within(Duration::from_secs(10)),
        );
        clock.advance(Duration::from_secs(60));
        let t = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_acquire_owned()
                    .unwrap()
                    .record(breakerbox_runtime::Outcome::Failure)
            })
        };
        b.try_acquire().unwrap().failure();
        t.join().unwrap();
        let m = b.metrics();
        assert_eq!((m.state, m.times_opened), (State::Open, 1));
    });
}

/// An expired streak: one failure, the span passes, then two failures at once. Both
/// belong to the new streak, whichever ends the old one: it trips.
#[test]
fn two_failures_at_once_after_an_expired_streak_trip() {
    model(|| {
        let (b, clock) = breaker(
            Config::builder()
                .failures(2)
                .failures_within(Duration::from_secs(10)),
        );
        b.try_acquire().unwrap().failure();
        clock.advance(Duration::from_secs(11));
        let t = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_acquire_owned()
                    .unwrap()
                    .record(breakerbox_runtime::Outcome::Failure)
            })
        };
        b.try_acquire().unwrap().failure();
        t.join().unwrap();
        assert_eq!(b.state(), State::Open);
    });
}

/// A success racing a failure that starts a streak: the streak is 0 or 1, never more,
/// and a following failure within the span counts from there.
#[test]
fn a_success_racing_a_streak_start() {
    model(|| {
        let (b, clock) = breaker(
            Config::builder()
                .failures(3)
                .failures_within(Duration::from_secs(10)),
        );
        clock.advance(Duration::from_secs(60));
        let t = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_acquire_owned()
                    .unwrap()
                    .record(breakerbox_runtime::Outcome::Failure)
            })
        };
        b.try_acquire().unwrap().success();
        t.join().unwrap();
        let streak = b.metrics().consecutive_failures;
        assert!(streak <= 1, "streak {streak}");
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().failure();
        let want = if streak == 1 {
            State::Open
        } else {
            State::Closed
        };
        assert_eq!(b.state(), want);
    });
}

/// A forgotten permit's bulkhead place is freed by a reset that races another
/// admission; afterwards exactly one place is free again, whatever the order.
#[test]
fn a_reset_frees_a_forgotten_place() {
    model(|| {
        let (b, _) = breaker(Config::builder().max_concurrent(1));
        std::mem::forget(b.try_acquire_owned().unwrap());
        let t = {
            let b = b.clone();
            thread::spawn(move || b.reset())
        };
        // Before the reset: refused. After: admitted, in the new generation.
        let racing = b.try_acquire_owned().ok();
        t.join().unwrap();
        if let Some(p) = racing {
            assert!(b.try_acquire().is_err(), "two places of one");
            p.record(breakerbox_runtime::Outcome::Success);
        }
        let p = b.try_acquire().expect("the reset freed the place");
        assert!(b.try_acquire().is_err(), "two places of one");
        p.success();
    });
}

/// A permit admitted before a reset records while the reset runs and another call is
/// admitted after it. The stale verdict gives back nothing of the new generation's places:
/// exactly the new call holds the one place.
#[test]
fn a_stale_verdict_across_a_reset_frees_no_new_place() {
    model(|| {
        let (b, _) = breaker(Config::builder().max_concurrent(1));
        let old = b.try_acquire_owned().unwrap();
        let t = thread::spawn(move || old.record(breakerbox_runtime::Outcome::Success));
        b.reset();
        let new = b.try_acquire().expect("the reset freed the place");
        t.join().unwrap();
        assert!(
            b.try_acquire().is_err(),
            "a stale verdict freed the new place"
        );
        new.success();
        b.try_acquire().expect("free again").success();
    });
}

/// A reconfigure (the config swapped under the transition lock) racing a failure: the failure
/// is counted once, judged by the old threshold or the new; and after both, the breaker is
/// judged by the new one. From a streak of one under `failures = 3`, to `failures = 2`: the
/// racing failure trips if it read the new threshold, and otherwise the next failure does.
#[test]
fn a_reconfigure_racing_a_failure_loses_no_count() {
    model(|| {
        let (b, clock) = breaker(Config::builder().failures(3));
        b.try_acquire().unwrap().failure();
        let t = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire().unwrap().failure())
        };
        let lower = Config::builder().failures(2).clock(clock.clone());
        assert_eq!(b.reconfigure(lower.build().unwrap()), Ok(true));
        t.join().unwrap();
        assert_eq!(b.config().failures(), Some(2));
        assert_eq!(b.metrics().failures, 2, "both failures counted");
        if b.state() == State::Closed {
            b.try_acquire().unwrap().failure();
        }
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.metrics().times_opened, 1);
    });
}
