//! An independent reviewer's repros of the defects in DEFECTS.md (D02, D03, D07, D09–D15 and
//! the smaller items), written from the defect text against the public API only, plus attacks
//! on the code that fixed them: weak handles, the registry's creation outside its locks,
//! caught listener panics, panic-safe messages, bulkhead generations, `failures_within`
//! under contention and keyed families.
//!
//! ManualClock everywhere; no sleeps; counts are exact.

use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, panic_any};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, BreakerMap, Config, Error, Event, ManualClock, Outcome, Reason, RejectReason, State,
    WeakBreaker, registry,
};

const S: Duration = Duration::from_secs(1);

fn clocked(clock: &ManualClock) -> breakerbox_runtime::ConfigBuilder {
    Config::builder().clock(clock.clone())
}

/// An error whose `Display` always panics.
struct PanickyDisplay;
impl fmt::Display for PanickyDisplay {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        panic!("Display panicked on purpose")
    }
}

/// An error whose `Display` runs `f` (which may re-enter the breaker) and writes "reentered".
struct Reentrant<F: Fn()>(F);
impl<F: Fn()> fmt::Display for Reentrant<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.0)();
        f.write_str("reentered")
    }
}

fn fail<E: fmt::Display>(b: &Breaker, e: E) {
    let r: Result<(), Error<E>> = b.call(|| Err(e));
    assert!(matches!(r, Err(Error::Inner(_))), "the call was not run");
}

fn ok(b: &Breaker) {
    let r: Result<(), Error<&str>> = b.call(|| Ok(()));
    assert!(r.is_ok(), "rejected: {:?}", r.err());
}

fn rejected(b: &Breaker) -> RejectReason {
    match b.try_acquire() {
        Ok(p) => {
            p.ignore();
            panic!("admitted, state {:?}", b.state())
        }
        Err(r) => r.reason(),
    }
}

// ---------------------------------------------------------------------------------------------
// D02: an error whose Display panics, during the call that trips.

#[test]
fn d02_rate_breaker_trips_through_a_panicking_display_and_trips_again_after_reset() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d02-rate",
        clocked(&clock)
            .failure_rate(100)
            .window(breakerbox_runtime::Window::Calls(4))
            .min_calls(2)
            .open_for(S)
            .build()
            .unwrap(),
    );
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Closed);
    fail(&b, PanickyDisplay); // the trip: formats the message
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().times_opened, 1);
    assert_eq!(b.metrics().failures, 2);
    let msg = b.last_failure().expect("a last failure is kept");
    assert!(!msg.contains("on purpose"), "{msg}");
    // The window was not left sealed: after a reset, failures trip it again.
    for round in 2..5u64 {
        b.reset();
        assert_eq!(b.state(), State::Closed);
        fail(&b, PanickyDisplay);
        fail(&b, PanickyDisplay);
        assert_eq!(b.state(), State::Open, "round {round}");
        assert_eq!(b.metrics().times_opened, round);
    }
    // Half-open: a probe failing with a panicking Display re-opens, and counts.
    clock.advance(10 * S);
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().failures, 2 * 4 + 1);
    // And a probe after that still closes it.
    clock.advance(100 * S);
    ok(&b);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn d02_panicking_display_in_every_state_never_unwinds_to_the_caller() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d02-states",
        clocked(&clock).failures(2).open_for(S).build().unwrap(),
    );
    // closed, below the limit
    fail(&b, PanickyDisplay);
    // closed, the trip
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Open);
    // open: rejected, the Display is never asked
    let r: Result<(), Error<PanickyDisplay>> = b.call(|| Err(PanickyDisplay));
    assert!(matches!(r, Err(Error::Rejected(_))));
    // the rejection's own message shows the placeholder, not a panic
    let text = match r {
        Err(Error::Rejected(rej)) => rej.to_string(),
        _ => unreachable!(),
    };
    assert!(text.contains("adv-d02-states"), "{text}");
    // half-open probe failure
    clock.advance(S);
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Open);
    // forced open
    b.force_open();
    let r: Result<(), Error<PanickyDisplay>> = b.call(|| Err(PanickyDisplay));
    assert!(matches!(r, Err(Error::Rejected(_))));
    // disabled
    b.disable();
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Disabled);
    // record_with directly, with a TripFor
    b.reset();
    let p = b.try_acquire().unwrap();
    p.record_with(Outcome::TripFor(5 * S), Some(&PanickyDisplay));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().retry_after, Some(5 * S));
    let m = b.metrics();
    assert_eq!(m.failures, 5);
    assert_eq!(m.calls, m.successes + m.failures + m.ignored + m.rejected);
}

#[test]
fn d02_display_that_reenters_the_breaker_does_not_deadlock() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d02-reenter",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    let weak = b.downgrade();
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let reenter = Reentrant(move || {
        c.fetch_add(1, Ordering::SeqCst);
        let b = weak.upgrade().unwrap();
        let _ = b.state();
        let _ = b.metrics();
        let _ = b.last_failure();
        // A call through the breaker from inside the Display.
        let _: Result<(), Error<&str>> = b.call(|| Ok(()));
    });
    fail(&b, reenter);
    assert!(
        calls.load(Ordering::SeqCst) >= 1,
        "the message was not formatted"
    );
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.last_failure().as_deref(), Some("reentered"));
    assert_eq!(b.metrics().times_opened, 1);
}

#[test]
fn d02_display_that_resets_the_breaker_leaves_a_consistent_breaker() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d02-reset-in-display",
        clocked(&clock)
            .failure_rate(100)
            .window(breakerbox_runtime::Window::Calls(2))
            .min_calls(2)
            .open_for(S)
            .build()
            .unwrap(),
    );
    let weak = b.downgrade();
    fail(&b, "first");
    fail(&b, Reentrant(move || weak.upgrade().unwrap().reset()));
    // Whatever the Display's reset did, the breaker is usable and trips again on failures.
    b.reset();
    fail(&b, "a");
    fail(&b, "b");
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!(m.failures, 4);
    // The first two failures: the Display's reset came before their trip, which then found a
    // new generation and opened nothing; the last two opened it once.
    assert_eq!(m.times_opened, 1);
}

// ---------------------------------------------------------------------------------------------
// D03: listeners that panic.

#[test]
fn d03_listener_panicking_during_a_panicking_protected_call_does_not_abort() {
    let b = Breaker::new(
        "adv-d03-unwind",
        Config::builder().failures(1).build().unwrap(),
    );
    let later = Arc::new(AtomicU32::new(0));
    b.on_state_change(|_| panic!("listener panics"));
    let l = later.clone();
    b.on_state_change(move |_| {
        l.fetch_add(1, Ordering::SeqCst);
    });
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _: Result<(), Error<&str>> = b.call(|| panic!("the protected call panics"));
    }));
    let payload = caught.expect_err("the protected call's panic resumes");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the protected call panics"),
        "the caller sees the call's own panic, not the listener's"
    );
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().failures, 1);
    assert_eq!(
        later.load(Ordering::SeqCst),
        1,
        "a later listener still runs"
    );
}

#[test]
fn d03_listener_panics_never_reach_an_unrelated_caller() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d03-caller",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    let told = Arc::new(Mutex::new(Vec::new()));
    b.on_state_change(|_| panic!("string listener panic"));
    b.on_state_change(|_| panic_any(42u32)); // a payload that is not a string
    b.on_state_change(|e| {
        if e.to == State::HalfOpen {
            panic_any(vec![1u8, 2, 3]);
        }
    });
    let t = told.clone();
    b.on_state_change(move |e| t.lock().unwrap().push((e.from, e.to)));
    fail(&b, "x"); // closed -> open
    clock.advance(S);
    ok(&b); // open -> half-open -> closed
    b.force_open();
    b.disable();
    b.trip_for(S);
    b.reset();
    assert_eq!(
        *told.lock().unwrap(),
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed),
            (State::Closed, State::ForcedOpen),
            (State::ForcedOpen, State::Disabled),
            (State::Disabled, State::Open),
            (State::Open, State::Closed),
        ]
    );
    assert_eq!(b.state(), State::Closed);
}

/// A panic payload whose own Drop panics.
struct BombPayload;
impl Drop for BombPayload {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("payload drop panics");
        }
    }
}

#[test]
fn d03_listener_panic_whose_payload_panics_on_drop_is_contained() {
    let b = Breaker::new("adv-d03-bomb", Config::default());
    b.on_state_change(|_| panic_any(BombPayload));
    b.force_open();
    b.reset();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn d03_listener_that_adds_a_listener_while_being_told() {
    let b = Breaker::new("adv-d03-add", Config::default());
    let weak = b.downgrade();
    let added = Arc::new(AtomicU32::new(0));
    let a = added.clone();
    b.on_state_change(move |_| {
        let b = weak.upgrade().unwrap();
        let a = a.clone();
        b.on_state_change(move |_| {
            a.fetch_add(1, Ordering::SeqCst);
        });
    });
    b.force_open(); // adds listener #2 (not told this event, or told: either is fine)
    let after_first = added.load(Ordering::SeqCst);
    assert!(after_first <= 1);
    b.reset(); // listener #2 told; #3 added
    // A listener added while an event is told is told the later events.
    assert!(added.load(Ordering::SeqCst) > after_first);
    b.force_open();
    assert!(added.load(Ordering::SeqCst) >= after_first + 3);
}

#[test]
fn d03_listener_that_changes_the_state_and_panics() {
    let b = Breaker::new("adv-d03-act", Config::default());
    let weak = b.downgrade();
    let seen = Arc::new(Mutex::new(Vec::new()));
    b.on_state_change(move |e| {
        if e.to == State::ForcedOpen {
            weak.upgrade().unwrap().reset();
            panic!("after acting");
        }
    });
    let s = seen.clone();
    b.on_state_change(move |e| s.lock().unwrap().push(e.to));
    b.force_open();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(*seen.lock().unwrap(), [State::ForcedOpen, State::Closed]);
}

#[test]
fn d03_registry_listener_that_panics_is_contained() {
    let name = "adv-d03-registry-listener";
    let told = Arc::new(AtomicU32::new(0));
    registry().on_state_change(move |e| {
        if e.name == name {
            panic_any(7i64);
        }
    });
    let t = told.clone();
    registry().on_state_change(move |e| {
        if e.name == name {
            t.fetch_add(1, Ordering::SeqCst);
        }
    });
    let b = registry().get_or_create(name, || Config::builder().failures(1).build().unwrap());
    b.on_state_change(|_| panic!("own listener too"));
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _: Result<(), Error<&str>> = b.call(|| panic!("call panics"));
    }));
    assert!(caught.is_err());
    assert_eq!(b.state(), State::Open);
    b.reset();
    assert_eq!(told.load(Ordering::SeqCst), 2);
}

#[test]
fn d03_registry_listener_may_use_the_registry() {
    let name = "adv-d03-registry-reenter";
    let made = Arc::new(AtomicBool::new(false));
    let m = made.clone();
    registry().on_state_change(move |e| {
        if e.name == name {
            let other = registry().get_or_create("adv-d03-registry-reenter-other", Config::default);
            other.force_open();
            let _ = registry().snapshot();
            m.store(true, Ordering::SeqCst);
        }
    });
    let b = registry().get_or_create(name, Config::default);
    b.force_open();
    assert!(made.load(Ordering::SeqCst));
    assert_eq!(
        registry()
            .get("adv-d03-registry-reenter-other")
            .unwrap()
            .state(),
        State::ForcedOpen
    );
}

// ---------------------------------------------------------------------------------------------
// D07: failures_within.

#[test]
fn d07_two_failures_at_the_same_instant_trip_failures_2() {
    let clock = ManualClock::new();
    clock.advance(100 * S);
    let b = Breaker::new(
        "adv-d07",
        clocked(&clock)
            .failures(2)
            .failures_within(S)
            .build()
            .unwrap(),
    );
    fail(&b, "a");
    fail(&b, "b");
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().times_opened, 1);
}

#[test]
fn d07_a_new_streak_after_an_expired_one_at_one_instant_trips() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d07-expired",
        clocked(&clock)
            .failures(2)
            .failures_within(S)
            .build()
            .unwrap(),
    );
    fail(&b, "old");
    clock.advance(5 * S); // the old streak expired
    fail(&b, "a");
    assert_eq!(b.state(), State::Closed);
    fail(&b, "b"); // same instant as "a"
    assert_eq!(b.state(), State::Open);
    // Spread out: not within, no trip.
    b.reset();
    fail(&b, "c");
    clock.advance(S + Duration::from_nanos(1));
    fail(&b, "d");
    assert_eq!(b.state(), State::Closed);
    // Exactly at the edge: within.
    clock.advance(S);
    fail(&b, "e");
    assert_eq!(b.state(), State::Open);
}

#[test]
fn d07_many_threads_failing_at_one_instant_trip_exactly_once() {
    const THREADS: usize = 8;
    for round in 0..50 {
        let clock = ManualClock::new();
        clock.advance(S * round);
        let b = Breaker::new(
            "adv-d07-threads",
            clocked(&clock)
                .failures(THREADS as u32)
                .failures_within(S)
                .open_for(1000 * S)
                .build()
                .unwrap(),
        );
        let opened = Arc::new(AtomicU32::new(0));
        let o = opened.clone();
        b.on_state_change(move |e| {
            if e.to == State::Open {
                o.fetch_add(1, Ordering::SeqCst);
            }
        });
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    barrier.wait();
                    fail(&b, "down");
                });
            }
        });
        assert_eq!(
            b.state(),
            State::Open,
            "round {round}: {THREADS} failures within 0 s"
        );
        assert_eq!(b.metrics().times_opened, 1, "round {round}");
        assert_eq!(opened.load(Ordering::SeqCst), 1, "round {round}");
        assert_eq!(b.metrics().failures, THREADS as u64);
    }
}

#[test]
fn d07_many_threads_failures_2_trip_exactly_once() {
    const THREADS: usize = 8;
    for _ in 0..50 {
        let clock = ManualClock::new();
        let b = Breaker::new(
            "adv-d07-threads-2",
            clocked(&clock)
                .failures(2)
                .failures_within(S)
                .open_for(1000 * S)
                .build()
                .unwrap(),
        );
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    barrier.wait();
                    let _: Result<(), Error<&str>> = b.call(|| Err("down"));
                });
            }
        });
        let m = b.metrics();
        assert_eq!(m.state, State::Open);
        assert_eq!(m.times_opened, 1);
        assert_eq!(m.failures + m.rejected, THREADS as u64);
        assert!(m.failures >= 2);
    }
}

// ---------------------------------------------------------------------------------------------
// D09: config closures.

#[test]
fn d09_config_closure_reads_registry_while_another_thread_creates() {
    for i in 0..50 {
        let name = format!("adv-d09-{i}");
        let barrier = Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                barrier.wait();
                for j in 0..20 {
                    registry().get_or_create(&format!("adv-d09-other-{i}-{j}"), Config::default);
                }
            });
            let b = registry().get_or_create(&name, || {
                barrier.wait();
                // Reads and creates through the registry from inside the closure.
                let _ = registry().breakers();
                let _ = registry().get(&format!("adv-d09-other-{i}-0"));
                registry().get_or_create(&format!("adv-d09-inner-{i}"), Config::default);
                Config::builder().failures(9).build().unwrap()
            });
            assert_eq!(b.config().failures(), Some(9));
        });
    }
}

#[test]
fn d09_config_closure_configures_its_own_name_first() {
    let name = "adv-d09-self-configure";
    let b = registry().get_or_create(name, || {
        assert!(registry().configure(name, Config::builder().failures(7).build().unwrap()));
        Config::builder().failures(3).build().unwrap()
    });
    // configure returned true before the breaker existed: its config applies.
    assert_eq!(b.config().failures(), Some(7));
}

#[test]
fn registry_two_threads_creating_one_name_get_one_breaker() {
    for i in 0..100 {
        let name = format!("adv-race-{i}");
        let closures = AtomicU32::new(0);
        let barrier = Barrier::new(4);
        let got: Vec<Breaker> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        registry().get_or_create(&name, || {
                            closures.fetch_add(1, Ordering::SeqCst);
                            Config::default()
                        })
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for b in &got {
            assert!(b.same(&got[0]));
            assert!(b.same(&registry().get(&name).unwrap()));
        }
        assert_eq!(
            registry()
                .breakers()
                .iter()
                .filter(|b| b.name() == name)
                .count(),
            1
        );
        let n = closures.load(Ordering::SeqCst);
        assert!((1..=4).contains(&n));
    }
}

#[test]
fn registry_configure_racing_creation_is_never_lost() {
    for i in 0..200 {
        let name = format!("adv-configure-race-{i}");
        let barrier = Barrier::new(2);
        let (configured, b) = std::thread::scope(|s| {
            let c = s.spawn(|| {
                barrier.wait();
                registry().configure(&name, Config::builder().failures(11).build().unwrap())
            });
            let b = s.spawn(|| {
                barrier.wait();
                registry().get_or_create(&name, || Config::builder().failures(22).build().unwrap())
            });
            (c.join().unwrap(), b.join().unwrap())
        });
        let want = if configured { 11 } else { 22 };
        assert_eq!(
            b.config().failures(),
            Some(want),
            "round {i}, configure said {configured}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// D10, D11: memory and weak handles.

/// Held by the tests that count live breakers, so that neither counts the other's.
static MEMORY: Mutex<()> = Mutex::new(());

#[test]
fn d10_distinct_named_breakers_are_freed() {
    const N: usize = 50_000;
    let _memory = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let held: Vec<Breaker> = (0..N)
        .map(|i| Breaker::new(format!("adv-d10-{i}-{}", "x".repeat(40)), Config::default()))
        .collect();
    let peak = breakerbox_runtime::live_breakers();
    assert!(peak >= N);
    let weak: Vec<WeakBreaker> = held.iter().map(Breaker::downgrade).collect();
    drop(held);
    // Other tests run alongside and make a few hundred breakers at most.
    let after = breakerbox_runtime::live_breakers();
    assert!(after + N - 5_000 <= peak, "peak {peak}, after {after}");
    assert!(weak.iter().all(|w| w.upgrade().is_none()));
}

#[test]
fn d10_a_rejection_outlives_its_breaker() {
    let b = Breaker::new("adv-d10-rejected", Config::default());
    b.force_open();
    let r = b.try_acquire().unwrap_err();
    let weak = b.downgrade();
    drop(b);
    assert!(weak.upgrade().is_some(), "the Rejected holds a handle");
    assert_eq!(r.name(), "adv-d10-rejected");
    assert!(r.to_string().contains("adv-d10-rejected"));
    drop(r);
    assert!(weak.upgrade().is_none());
}

#[test]
fn d11_listener_with_a_weak_handle_does_not_keep_the_breaker_alive() {
    let b = Breaker::new("adv-d11", Config::builder().failures(1).build().unwrap());
    let weak = b.downgrade();
    let w = weak.clone();
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = Flag(dropped.clone());
    b.on_state_change(move |e| {
        let _keep = &flag;
        if e.to == State::Open {
            w.upgrade().unwrap().reset();
        }
    });
    fail(&b, "x");
    assert_eq!(b.state(), State::Closed, "the listener reset it");
    drop(b);
    assert!(weak.upgrade().is_none());
    assert!(
        dropped.load(Ordering::SeqCst),
        "the listener was freed with the breaker"
    );
}

#[test]
fn weak_upgrade_racing_the_last_drop() {
    for i in 0..300 {
        let b = Breaker::new(format!("adv-weak-race-{i}"), Config::default());
        let weak = b.downgrade();
        let barrier = Barrier::new(2);
        let upgraded = std::thread::scope(|s| {
            let w = s.spawn(|| {
                barrier.wait();
                let mut got = 0u32;
                for _ in 0..200 {
                    match weak.upgrade() {
                        Some(b) => {
                            // A handle from upgrade is a whole breaker.
                            assert!(b.name().starts_with("adv-weak-race-"));
                            ok(&b);
                            got += 1;
                        }
                        None => break,
                    }
                }
                got
            });
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                drop(b);
            });
            w.join().unwrap()
        });
        let _ = upgraded;
        assert!(
            weak.upgrade().is_none(),
            "round {i}: the last handle is gone"
        );
        let w2 = weak.clone();
        drop(weak);
        assert!(w2.upgrade().is_none());
    }
}

#[test]
fn weak_handles_to_registry_breakers_always_upgrade() {
    let b = registry().get_or_create("adv-weak-registry", Config::default);
    let w = b.downgrade();
    drop(b);
    let again = w
        .upgrade()
        .expect("a registry breaker lives for the process");
    assert!(again.same(&registry().get("adv-weak-registry").unwrap()));
    let w2 = w.clone();
    drop(w);
    assert!(w2.upgrade().is_some());
}

#[test]
fn owned_permit_keeps_a_breaker_alive_for_its_weak_handles() {
    let b = Breaker::new("adv-owned", Config::builder().failures(1).build().unwrap());
    let weak = b.downgrade();
    let p = b.try_acquire_owned().unwrap();
    drop(b);
    let up = weak.upgrade().expect("the owned permit holds a handle");
    drop(up);
    p.record(Outcome::Failure);
    assert!(weak.upgrade().is_none());
}

// ---------------------------------------------------------------------------------------------
// D12: bulkhead places tied to the generation.

#[test]
fn d12_forgotten_permits_are_freed_by_reset() {
    let b = Breaker::new(
        "adv-d12",
        Config::builder().max_concurrent(3).build().unwrap(),
    );
    for _ in 0..3 {
        std::mem::forget(b.try_acquire().unwrap());
    }
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    b.reset();
    let held: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(held);
    ok(&b);
}

#[test]
fn d12_old_generation_permits_recording_after_reset_free_no_new_place() {
    let b = Breaker::new(
        "adv-d12-old",
        Config::builder().max_concurrent(2).build().unwrap(),
    );
    let old: Vec<_> = (0..2).map(|_| b.try_acquire().unwrap()).collect();
    b.reset();
    let new: Vec<_> = (0..2).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    for (i, p) in old.into_iter().enumerate() {
        if i == 0 {
            p.success();
        } else {
            p.failure();
        }
    }
    assert_eq!(
        rejected(&b),
        RejectReason::BulkheadFull,
        "an old permit freed a place of the new generation"
    );
    let mut new = new.into_iter();
    new.next().unwrap().success();
    let p = b.try_acquire().unwrap();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop((p, new));
    // Places free again, exactly two.
    let two: Vec<_> = (0..2).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(two);
}

#[test]
fn d12_old_permit_dropped_after_a_trip_and_close_frees_nothing() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d12-trip",
        clocked(&clock)
            .max_concurrent(2)
            .failures(1)
            .open_for(S)
            .build()
            .unwrap(),
    );
    let old = b.try_acquire().unwrap();
    fail(&b, "x"); // trips: a transition
    assert_eq!(b.state(), State::Open);
    clock.advance(S);
    ok(&b); // probe closes
    assert_eq!(b.state(), State::Closed);
    let new: Vec<_> = (0..2).map(|_| b.try_acquire().unwrap()).collect();
    drop(old); // ignored, stale
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(new);
}

#[test]
fn d12_stress_max_concurrent_holds_exactly() {
    const MAX: u32 = 3;
    const THREADS: usize = 8;
    const ITERS: usize = 20_000;
    let b = Breaker::new(
        "adv-d12-stress",
        Config::builder().max_concurrent(MAX).build().unwrap(),
    );
    let in_flight = AtomicU32::new(0);
    let peak = AtomicU32::new(0);
    let admitted = AtomicU64::new(0);
    let refused = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (b, in_flight, peak, admitted, refused) =
                (&b, &in_flight, &peak, &admitted, &refused);
            s.spawn(move || {
                for i in 0..ITERS {
                    match b.try_acquire() {
                        Ok(p) => {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            std::hint::spin_loop();
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            admitted.fetch_add(1, Ordering::Relaxed);
                            match (t + i) % 3 {
                                0 => p.success(),
                                1 => p.ignore(),
                                _ => drop(p),
                            }
                        }
                        Err(r) => {
                            assert_eq!(r.reason(), RejectReason::BulkheadFull);
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    assert!(
        peak.load(Ordering::SeqCst) <= MAX,
        "peak {}",
        peak.load(Ordering::SeqCst)
    );
    let m = b.metrics();
    let (a, r) = (
        admitted.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
    );
    assert_eq!(a + r, (THREADS * ITERS) as u64);
    assert_eq!(m.successes + m.ignored, a);
    assert_eq!(m.rejected, r);
    assert_eq!(m.calls, (THREADS * ITERS) as u64);
    // Every place is back.
    let all: Vec<_> = (0..MAX).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(all);
}

#[test]
fn d12_stress_with_resets_never_exceeds_max_per_generation_and_never_sticks() {
    const MAX: u32 = 2;
    let b = Breaker::new(
        "adv-d12-resets",
        Config::builder().max_concurrent(MAX).build().unwrap(),
    );
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(p) = b.try_acquire() {
                        if rand_bit() {
                            std::mem::forget(p);
                        } else {
                            p.success();
                        }
                    }
                }
            });
        }
        for _ in 0..2_000 {
            b.reset();
        }
        stop.store(true, Ordering::Relaxed);
    });
    b.reset();
    let all: Vec<_> = (0..MAX).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(all);
}

fn rand_bit() -> bool {
    static X: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    let x = X.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 63 == 1
}

// ---------------------------------------------------------------------------------------------
// D13: calls while disabled.

#[test]
fn d13_metrics_while_disabled_add_up() {
    let b = Breaker::new("adv-d13", Config::builder().failures(1).build().unwrap());
    b.disable();
    for _ in 0..3 {
        ok(&b);
    }
    fail(&b, "x");
    fail(&b, "y");
    b.try_acquire().unwrap().ignore();
    drop(b.try_acquire().unwrap()); // cancelled: ignored
    b.try_acquire().unwrap().record(Outcome::TripFor(S));
    let m = b.metrics();
    assert_eq!(m.state, State::Disabled);
    assert_eq!(
        (m.successes, m.failures, m.ignored, m.rejected),
        (3, 3, 2, 0)
    );
    assert_eq!(m.calls, 8);
    assert_eq!(m.times_opened, 0);
}

// ---------------------------------------------------------------------------------------------
// D15: probe timeout from entering half-open.

#[test]
fn d15_hung_probe_and_a_second_probe_9s_later_reopen_at_10s() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d15",
        clocked(&clock)
            .failures(1)
            .open_for(S)
            .half_open_calls(2)
            .successes(2)
            .probe_timeout(10 * S)
            .build()
            .unwrap(),
    );
    fail(&b, "x");
    clock.advance(S);
    let hung = b.try_acquire().unwrap(); // enters half-open at t = 1 s
    assert!(hung.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(9 * S);
    let second = b.try_acquire().unwrap();
    assert!(second.is_probe());
    clock.advance(S - Duration::from_nanos(1));
    assert_eq!(rejected(&b), RejectReason::HalfOpenFull);
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(Duration::from_nanos(1)); // 10 s after entering half-open
    assert_eq!(rejected(&b), RejectReason::Open);
    assert_eq!(b.state(), State::Open);
    // The stale probes record into nothing.
    second.success();
    hung.success();
    assert_eq!(b.state(), State::Open);
}

#[test]
fn d15_single_probe_slot_times_out_from_entering_half_open() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d15-one",
        clocked(&clock)
            .failures(1)
            .open_for(S)
            .probe_timeout(10 * S)
            .build()
            .unwrap(),
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    b.on_state_change(move |e: &Event| s.lock().unwrap().push(e.reason));
    fail(&b, "x");
    clock.advance(S);
    std::mem::forget(b.try_acquire().unwrap()); // a probe that never records
    clock.advance(10 * S);
    assert_eq!(rejected(&b), RejectReason::Open);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            Reason::Failures(1),
            Reason::OpenElapsed,
            Reason::ProbeTimeout
        ]
    );
    clock.advance(100 * S);
    ok(&b);
    assert_eq!(b.state(), State::Closed);
}

// ---------------------------------------------------------------------------------------------
// Smaller items.

#[test]
fn small_retry_after_is_some_even_for_the_longest_open() {
    let clock = ManualClock::new(); // at zero: open_until - now is then the whole span
    let b = Breaker::new("adv-retry-max", clocked(&clock).build().unwrap());
    b.trip_for(Duration::MAX);
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.reason(), RejectReason::Open);
    assert!(
        r.retry_after().is_some(),
        "an open breaker always says when to retry"
    );
    assert!(b.metrics().retry_after.is_some());
    let text = r.to_string();
    assert!(text.contains("retry in"), "{text}");
}

#[test]
fn small_reopens_count_from_zero() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-reopens",
        clocked(&clock)
            .failures(1)
            .open_for(S)
            .backoff(2.0)
            .max_open_for(1000 * S)
            .build()
            .unwrap(),
    );
    assert_eq!(b.export_state().reopens, 0);
    fail(&b, "x");
    assert_eq!(
        b.export_state().reopens,
        0,
        "the first opening is not a re-open"
    );
    let mut wait = S;
    for n in 1..5u32 {
        clock.advance(wait);
        fail(&b, "probe fails");
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.export_state().reopens, n);
        wait *= 2;
        assert_eq!(
            b.metrics().retry_after,
            Some(wait),
            "backoff at re-open {n}"
        );
    }
    clock.advance(wait);
    ok(&b);
    assert_eq!(b.export_state().reopens, 0);
}

#[test]
fn small_rate_trip_by_a_success_names_the_failures_behind_it() {
    let b = Breaker::new(
        "adv-behind",
        Config::builder()
            .failure_rate(50)
            .window(breakerbox_runtime::Window::Calls(4))
            .min_calls(4)
            .build()
            .unwrap(),
    );
    fail(&b, "db timeout");
    fail(&b, "db refused");
    ok(&b);
    assert_eq!(b.state(), State::Closed);
    ok(&b); // 4 calls, 50 %: trips on a success
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.last_failure().as_deref(), Some("db refused"));
    let r = b.try_acquire().unwrap_err();
    assert!(r.to_string().contains("db refused"), "{r}");
}

#[test]
fn small_slow_counts_only_what_its_doc_says() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-slow",
        clocked(&clock)
            .slow(S)
            .slow_rate(100)
            .min_calls(100)
            .build()
            .unwrap(),
    );
    for outcome in [Outcome::Success, Outcome::Failure, Outcome::Ignored] {
        let p = b.try_acquire().unwrap();
        clock.advance(2 * S);
        p.record(outcome);
    }
    // The doc of Metrics: successes and failures that took at least `slow`.
    assert_eq!(b.metrics().slow, 2);
}

// ---------------------------------------------------------------------------------------------
// Keyed families.

#[test]
fn keyed_open_keys_are_never_evicted() {
    let clock = ManualClock::new();
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed",
        clocked(&clock)
            .failures(1)
            .open_for(1000 * S)
            .max_keys(4)
            .idle_for(S)
            .build()
            .unwrap(),
    );
    let _ = hosts.call("down", || Err::<(), _>("refused"));
    assert_eq!(hosts.get("down").unwrap().state(), State::Open);
    for i in 0..200 {
        clock.advance(S);
        let key = format!("up-{i}");
        assert_eq!(hosts.call(key.as_str(), || Ok::<_, &str>(i)).unwrap(), i);
        hosts.sweep();
    }
    let down = hosts.get("down").expect("an open key is kept");
    assert_eq!(down.state(), State::Open);
    assert!(matches!(
        hosts.call("down", || Ok::<_, &str>(0)),
        Err(Error::Rejected(_))
    ));
    assert!(hosts.len() <= 4, "len {}", hosts.len());
}

#[test]
fn keyed_max_keys_bounds_the_family_and_counts_add_up() {
    let clock = ManualClock::new();
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-bound",
        clocked(&clock)
            .max_keys(16)
            .idle_for(1000 * S)
            .build()
            .unwrap(),
    );
    let mut max_len = 0;
    for i in 0..5_000u64 {
        let key = format!("k{i}");
        hosts.call(key.as_str(), || Ok::<_, &str>(())).unwrap();
        max_len = max_len.max(hosts.len());
    }
    assert!(
        max_len <= 32,
        "the family grew to {max_len} with max_keys 16"
    );
    hosts.sweep();
    assert!(hosts.len() <= 16, "after a sweep: {}", hosts.len());
    let mut live = 0;
    hosts.for_each(|_, b| live += b.metrics().successes);
    let gone = hosts.evicted();
    assert_eq!(live + gone.successes, 5_000);
    assert_eq!(gone.calls, gone.successes);
    assert_eq!(gone.keys as usize + hosts.len(), 5_000);
}

#[test]
fn keyed_lookup_by_str_finds_the_string_key() {
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-str",
        Config::builder().failures(2).build().unwrap(),
    );
    let owned = String::from("a.example");
    let _ = hosts.call(&owned, || Err::<(), _>("x"));
    let _ = hosts.call("a.example", || Err::<(), _>("y"));
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts.get("a.example").unwrap().state(), State::Open);
    assert!(hosts.get("b.example").is_none());
    assert!(hosts.breaker("a.example").same(&hosts.get(&owned).unwrap()));
    let p = hosts.try_acquire("c.example").unwrap();
    p.success();
    assert_eq!(hosts.len(), 2);
}

#[test]
fn keyed_panicking_call_counts_and_listener_panics_are_contained() {
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-panic",
        Config::builder().failures(1).build().unwrap(),
    );
    hosts
        .breaker("p")
        .on_state_change(|_| panic!("keyed listener"));
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _ = hosts.call("p", || -> Result<(), &str> { panic!("call") });
    }));
    let payload: Box<dyn Any + Send> = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>().copied(), Some("call"));
    assert_eq!(hosts.get("p").unwrap().state(), State::Open);
}

// Keep an unused import from tripping warnings when a test above is edited.
#[allow(dead_code)]
fn _unused(_: OnceLock<()>, _: AtomicUsize) {}

// ---------------------------------------------------------------------------------------------
// A clock that panics while the protected call is itself panicking. An abort would kill the
// test binary, so each case runs in a child process of this binary.

/// A manual clock that panics when read while the thread is unwinding.
struct UnwindPanicClock(ManualClock);
impl breakerbox_runtime::Clock for UnwindPanicClock {
    fn now(&self) -> Duration {
        if std::thread::panicking() {
            panic!("clock read while unwinding panics");
        }
        self.0.now()
    }
}

fn unwind_clock_case(shape: &str) {
    let clock = ManualClock::new();
    let base = Config::builder()
        .clock(UnwindPanicClock(clock.clone()))
        .open_for(S);
    let config = match shape {
        "slow" => base.failures(1).slow(S),
        "failures_within" => base.failures(1).failures_within(S),
        "time_window" => base
            .failure_rate(50)
            .window(breakerbox_runtime::Window::Time(10 * S))
            .min_calls(1),
        "probe" => base.failures(1),
        other => panic!("no shape {other}"),
    }
    .build()
    .unwrap();
    let b = Breaker::new("adv-unwind-clock", config);
    if shape == "probe" {
        b.trip_for(S);
        clock.advance(S);
    }
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _: Result<(), Error<&str>> = b.call(|| panic!("the protected call panics"));
    }));
    let payload = caught.expect_err("the call's panic resumes");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the protected call panics")
    );
    if shape == "probe" {
        // The probe's failure could not be dated: its slot is held until probe_timeout (60 s
        // by default) from entering half-open, then the round re-opens.
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(rejected(&b), RejectReason::HalfOpenFull);
        clock.advance(60 * S);
        assert_eq!(rejected(&b), RejectReason::Open);
    }
    // The breaker still works afterwards.
    b.reset();
    ok(&b);
}

#[test]
fn clock_panicking_during_a_panicking_protected_call_does_not_abort() {
    if let Ok(shape) = std::env::var("ADV_UNWIND_CLOCK_SHAPE") {
        unwind_clock_case(&shape);
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut failed = Vec::new();
    for shape in ["slow", "failures_within", "time_window", "probe"] {
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "clock_panicking_during_a_panicking_protected_call_does_not_abort",
                "--test-threads=1",
            ])
            .env("ADV_UNWIND_CLOCK_SHAPE", shape)
            .output()
            .unwrap();
        if !out.status.success() {
            failed.push(format!(
                "{shape}: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .filter(|l| l.contains("panicked") || l.contains("abort"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// User code whose panic payload panics when dropped, and a family clock that re-enters.

/// A Display that panics with a payload whose own Drop panics.
struct BombDisplay;
impl fmt::Display for BombDisplay {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        panic_any(BombPayload)
    }
}

#[test]
fn display_panicking_with_a_payload_that_panics_on_drop_is_contained() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-bomb-display",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    let r = catch_unwind(AssertUnwindSafe(|| fail(&b, BombDisplay)));
    assert!(r.is_ok(), "a panic got out of the breaker");
    assert_eq!(
        b.state(),
        State::Open,
        "the failure that trips it opened it"
    );
    assert_eq!(b.metrics().times_opened, 1);
    // A rate trip, whose message is kept while the window is short.
    let w = Breaker::new(
        "adv-bomb-display-rate",
        clocked(&clock)
            .failure_rate(100)
            .window(breakerbox_runtime::Window::Calls(2))
            .min_calls(2)
            .build()
            .unwrap(),
    );
    let r = catch_unwind(AssertUnwindSafe(|| {
        fail(&w, BombDisplay);
        fail(&w, BombDisplay);
    }));
    assert!(r.is_ok(), "a panic got out of the breaker");
    assert_eq!(w.state(), State::Open);
}

/// Runs `f` on a thread of its own; a deadlock fails the test instead of hanging it (the limit
/// detects a failure; it times nothing).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => match t.join().unwrap() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(_) => panic!("{what}: deadlocked"),
    }
}

thread_local!(static IN_CLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });

/// Runs `f` unless this thread is already in it: a clock that lists families reads the clocks
/// of every family, its own included, and must not recurse for ever.
fn once_per_thread(f: impl FnOnce()) {
    if !IN_CLOCK.with(|c| c.replace(true)) {
        let r = catch_unwind(AssertUnwindSafe(f));
        IN_CLOCK.with(|c| c.set(false));
        if let Err(p) = r {
            std::panic::resume_unwind(p);
        }
    }
}

/// A clock that lists the registry's families when read.
struct FamiliesClock(ManualClock);
impl breakerbox_runtime::Clock for FamiliesClock {
    fn now(&self) -> Duration {
        once_per_thread(|| {
            let _ = registry().families();
        });
        self.0.now()
    }
}

#[test]
fn family_clock_may_use_the_registry_while_the_family_is_made() {
    within("a family's clock lists families at creation", || {
        let config = Config::builder()
            .clock(FamiliesClock(ManualClock::new()))
            .build()
            .unwrap();
        let fam = registry()
            .family::<String>("adv-family-clock", move || config)
            .unwrap();
        fam.call("k", || Ok::<_, &str>(())).unwrap();
        assert_eq!(fam.len(), 1);
    });
}

/// A manual clock that lists the registry's families when read, once armed.
struct ArmedFamiliesClock(ManualClock, Arc<AtomicBool>);
impl breakerbox_runtime::Clock for ArmedFamiliesClock {
    fn now(&self) -> Duration {
        if self.1.load(Ordering::SeqCst) {
            once_per_thread(|| {
                let _ = registry().families();
            });
        }
        self.0.now()
    }
}

#[test]
fn family_clock_may_list_families_while_an_evicted_key_still_records() {
    within(
        "a family's clock lists families while a key is evicted",
        || {
            let time = ManualClock::new();
            let armed = Arc::new(AtomicBool::new(false));
            let config = Config::builder()
                .clock(ArmedFamiliesClock(time.clone(), armed.clone()))
                .idle_for(S)
                .build()
                .unwrap();
            let fam = registry()
                .family::<String>("adv-family-clock-evicted", move || config)
                .unwrap();
            // A call admitted before its key is evicted, still running: its breaker is evicted
            // but not yet freed.
            let running = fam.try_acquire("slow").unwrap();
            time.advance(2 * S);
            assert_eq!(fam.sweep(), 1);
            armed.store(true, Ordering::SeqCst);
            let listed = registry().families();
            let me = listed
                .iter()
                .find(|f| f.name == "adv-family-clock-evicted")
                .unwrap();
            assert_eq!(me.evicted.keys, 1);
            armed.store(false, Ordering::SeqCst);
            running.success();
            let gone = fam.evicted();
            assert_eq!((gone.keys, gone.calls, gone.successes), (1, 1, 1));
        },
    );
}

// ---------------------------------------------------------------------------------------------
// D04's shape for call_async: a panic in the awaited future, caught around the poll, the
// future dropped afterwards.

fn poll_catching<F: std::future::Future>(
    fut: &mut std::pin::Pin<Box<F>>,
) -> Result<std::task::Poll<F::Output>, ()> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))).map_err(|_| ())
}

#[test]
fn call_async_panic_behind_a_catcher_counts_as_failure() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-async-panic",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    let mut fut = Box::pin(b.call_async(async {
        if true {
            panic!("awaited future panics");
        }
        Ok::<(), &str>(())
    }));
    assert!(poll_catching(&mut fut).is_err());
    drop(fut);
    assert_eq!(b.metrics().failures, 1);
    assert_eq!(b.state(), State::Open);
    // A keyed family's, as a probe.
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-async-keyed",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    hosts.breaker("h").trip_for(S);
    clock.advance(S);
    let mut fut = Box::pin(hosts.call_async("h", async {
        if true {
            panic!("probe panics");
        }
        Ok::<(), &str>(())
    }));
    assert!(poll_catching(&mut fut).is_err());
    drop(fut);
    assert_eq!(
        hosts.get("h").unwrap().state(),
        State::Open,
        "the panicking probe re-opened it"
    );
}

#[test]
fn keyed_a_call_admitted_before_eviction_that_opens_carries_over() {
    let clock = ManualClock::new();
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-carry",
        clocked(&clock)
            .failures(1)
            .open_for(100 * S)
            .idle_for(S)
            .build()
            .unwrap(),
    );
    let running = hosts.try_acquire("a").unwrap();
    clock.advance(2 * S);
    assert_eq!(hosts.sweep(), 1, "the idle closed key is evicted");
    running.failure(); // opens the evicted breaker
    // The host is failing: the key's next breaker must not be a fresh closed one.
    let r = hosts.call("a", || Ok::<_, &str>(()));
    assert!(
        matches!(r, Err(Error::Rejected(_))),
        "a failing host got a fresh closed breaker after its key was evicted"
    );
}

#[test]
fn keyed_open_keys_fill_the_family_then_overflow_shares_one_breaker() {
    let clock = ManualClock::new();
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-overflow",
        clocked(&clock)
            .failures(1)
            .open_for(1000 * S)
            .max_keys(4)
            .idle_for(S)
            .build()
            .unwrap(),
    );
    for i in 0..8 {
        let _ = hosts.call(format!("down-{i}").as_str(), || Err::<(), _>("refused"));
        clock.advance(S);
    }
    assert!(hosts.len() <= 8, "len {}", hosts.len());
    // All open, none evicted: every one still rejects.
    for i in 0..8 {
        let key = format!("down-{i}");
        if let Some(b) = hosts.get(key.as_str()) {
            assert_eq!(b.state(), State::Open, "{key}");
        }
    }
    assert_eq!(hosts.open_keys(), hosts.len());
    // New keys beyond twice max_keys share the overflow breaker.
    for i in 0..20 {
        let _ = hosts.call(format!("new-{i}").as_str(), || Ok::<_, &str>(()));
    }
    assert!(hosts.len() <= 8, "len {}", hosts.len());
    let overflow = hosts.overflow().expect("the overflow breaker was needed");
    assert_eq!(overflow.name(), "adv-keyed-overflow");
    let m = overflow.metrics();
    assert_eq!(m.successes + m.failures + m.ignored + m.rejected, m.calls);
    assert!(m.calls >= 1);
}

// ---------------------------------------------------------------------------------------------
// D02 with a debug `tracing` subscriber that formats every field (the user's Display included).

struct FormatAll;
struct Visit;
impl tracing::field::Visit for Visit {
    fn record_debug(&mut self, _: &tracing::field::Field, value: &dyn fmt::Debug) {
        let _ = format!("{value:?}");
    }
}
impl tracing::Subscriber for FormatAll {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        event.record(&mut Visit);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn d02_with_a_debug_subscriber_a_panicking_display_is_counted_and_a_probe_reopens() {
    tracing::subscriber::with_default(FormatAll, || {
        let clock = ManualClock::new();
        let b = Breaker::new(
            "adv-d02-tracing",
            clocked(&clock).failures(2).open_for(S).build().unwrap(),
        );
        let r = catch_unwind(AssertUnwindSafe(|| {
            fail(&b, PanickyDisplay);
            fail(&b, PanickyDisplay);
        }));
        assert!(r.is_ok(), "a panic got out");
        assert_eq!(b.metrics().failures, 2);
        assert_eq!(b.state(), State::Open);
        clock.advance(S);
        let r = catch_unwind(AssertUnwindSafe(|| fail(&b, PanickyDisplay)));
        assert!(r.is_ok(), "a panic got out of the probe");
        assert_eq!(b.state(), State::Open, "the failed probe re-opened it");
        assert_eq!(b.metrics().failures, 3);
        // With a bomb payload too.
        b.reset();
        let r = catch_unwind(AssertUnwindSafe(|| {
            fail(&b, BombDisplay);
            fail(&b, BombDisplay);
        }));
        assert!(r.is_ok(), "a panic got out");
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.metrics().failures, 5);
    });
}

#[test]
fn d10_evicted_keys_are_freed() {
    const N: usize = 40_000;
    let _memory = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let before = breakerbox_runtime::live_breakers();
    let hosts: BreakerMap<u64> = BreakerMap::new(
        "adv-d10-keyed",
        Config::builder().max_keys(16).build().unwrap(),
    );
    for k in 0..N as u64 {
        hosts.call(&k, || Ok::<_, &str>(())).unwrap();
    }
    assert!(hosts.len() <= 32);
    // Evicted keys' breakers are freed (memory reclamation may lag by a batch). Other tests run
    // alongside and hold a few hundred breakers at most.
    let grown = breakerbox_runtime::live_breakers().saturating_sub(before);
    assert!(
        grown < 5_000,
        "{grown} breakers alive after {N} keys with max_keys 16"
    );
    assert_eq!(hosts.evicted().keys as usize + hosts.len(), N);
    drop(hosts);
}

#[test]
fn shared_state_round_trips_through_export_and_import() {
    let clock = ManualClock::new();
    let config = || {
        clocked(&clock)
            .failures(1)
            .open_for(S)
            .backoff(2.0)
            .max_open_for(1000 * S)
            .build()
            .unwrap()
    };
    let here = Breaker::new("adv-shared-here", config());
    fail(&here, "x");
    for _ in 0..3 {
        clock.advance(here.metrics().retry_after.unwrap());
        fail(&here, "probe fails");
    }
    let exported = here.export_state();
    assert_eq!(exported.state, State::Open);
    assert_eq!(exported.reopens, 3);
    assert_eq!(exported.open_remaining, Some(8 * S));
    let there = Breaker::new("adv-shared-there", config());
    there.import_state(&exported);
    assert_eq!(there.export_state(), exported);
    // The next re-open there backs off from the same level as here.
    clock.advance(8 * S);
    fail(&here, "probe fails");
    fail(&there, "probe fails");
    assert_eq!(here.export_state(), there.export_state());
    assert_eq!(there.metrics().retry_after, Some(16 * S));
}

#[test]
fn events_from_racing_threads_are_told_once_each_in_order_despite_panicking_listeners() {
    let b = Breaker::new("adv-events-race", Config::default());
    let seen: Arc<Mutex<Vec<(State, State)>>> = Arc::default();
    let n = Arc::new(AtomicU64::new(0));
    let n2 = n.clone();
    b.on_state_change(move |_| {
        if n2.fetch_add(1, Ordering::Relaxed) % 7 == 3 {
            panic!("every seventh event");
        }
    });
    let s = seen.clone();
    b.on_state_change(move |e| s.lock().unwrap().push((e.from, e.to)));
    std::thread::scope(|scope| {
        for t in 0..4 {
            let b = &b;
            scope.spawn(move || {
                for i in 0..2_000 {
                    match (t + i) % 3 {
                        0 => b.trip_for(S),
                        1 => b.disable(),
                        _ => b.reset(),
                    }
                }
            });
        }
    });
    // Quiet now: a last change is told on this thread, after any left queued.
    b.force_open();
    let seen = seen.lock().unwrap();
    assert_eq!(
        n.load(Ordering::Relaxed) as usize,
        seen.len(),
        "each event told to each listener once"
    );
    assert_eq!(seen[0].0, State::Closed);
    for w in seen.windows(2) {
        assert_eq!(w[0].1, w[1].0, "events out of order or lost: {w:?}");
    }
    assert_eq!(seen.last().unwrap().1, State::ForcedOpen);
    assert_eq!(b.state(), State::ForcedOpen);
    let opened = seen.iter().filter(|(_, to)| *to == State::Open).count();
    assert_eq!(opened as u64, b.metrics().times_opened);
}

#[test]
fn d07_threads_failing_at_one_instant_after_an_expired_streak_trip() {
    const THREADS: usize = 4;
    let mut missed = 0;
    for round in 0..3_000u64 {
        let clock = ManualClock::new();
        let b = Breaker::new(
            "adv-d07-expired-threads",
            clocked(&clock)
                .failures(THREADS as u32)
                .failures_within(S)
                .open_for(1000 * S)
                .build()
                .unwrap(),
        );
        fail(&b, "an old streak");
        clock.advance(10 * S); // expired
        let barrier = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    barrier.wait();
                    fail(&b, "down");
                });
            }
        });
        if b.state() != State::Open {
            missed += 1;
            eprintln!("round {round}: {THREADS} failures at one instant did not trip");
        }
    }
    assert_eq!(missed, 0, "{missed} rounds missed the trip");
}
