//! Two threads × a million mixed calls on one breaker, with trips and recoveries driven by a
//! shared `ManualClock` that one of them advances. Afterwards every count must be exact
//! (`calls == successes + failures + ignored + rejected`, and each total what the threads
//! counted themselves), and the breaker must be in a legal state and not stuck.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, ManualClock, Outcome, Permit, State, Window};

const CALLS_PER_THREAD: u64 = 1_000_000;

/// What one thread did, by its own count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    successes: u64,
    failures: u64,
    ignored: u64,
    rejected: u64,
}

impl Tally {
    fn record(&mut self, permit: Permit<'_>, outcome: Outcome) {
        match outcome {
            Outcome::Success => self.successes += 1,
            Outcome::Ignored => self.ignored += 1,
            _ => self.failures += 1,
        }
        permit.record(outcome);
    }

    fn add(self, o: Tally) -> Tally {
        Tally {
            successes: self.successes + o.successes,
            failures: self.failures + o.failures,
            ignored: self.ignored + o.ignored,
            rejected: self.rejected + o.rejected,
        }
    }
}

/// xorshift64*: a deterministic, cheap mix of outcomes per thread.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

const PANIC: &str = "stress: a call panicked";

fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&PANIC) {
                default(info);
            }
        }));
    });
}

fn hammer(b: &Breaker, clock: &ManualClock, seed: u64, advances: bool) -> Tally {
    let mut rng = Rng(seed);
    let mut t = Tally::default();
    // Permits held across later calls, so that some results arrive after a transition.
    let mut held: VecDeque<Permit<'_>> = VecDeque::new();
    for i in 0..CALLS_PER_THREAD {
        if advances && i.is_multiple_of(64) {
            clock.advance(Duration::from_millis(1));
        }
        let r = rng.next() % 1000;
        // Finish the oldest held call now and then.
        if r < 20
            && let Some(p) = held.pop_front()
        {
            let outcome = if r < 12 {
                Outcome::Success
            } else {
                Outcome::Failure
            };
            t.record(p, outcome);
        }
        let permit = match b.try_acquire() {
            Ok(p) => p,
            Err(_) => {
                t.rejected += 1;
                continue;
            }
        };
        match r {
            0..=599 => t.record(permit, Outcome::Success),
            600..=849 => t.record(permit, Outcome::Failure),
            850..=929 => t.record(permit, Outcome::Ignored),
            930..=959 => {
                // Dropped without a verdict: a cancelled call.
                drop(permit);
                t.ignored += 1;
            }
            960..=989 if held.len() < 4 => held.push_back(permit),
            960..=989 => t.record(permit, Outcome::Success),
            990..=997 => {
                if rng.next().is_multiple_of(64) {
                    t.record(permit, Outcome::TripFor(Duration::from_millis(3)));
                } else {
                    t.record(permit, Outcome::Failure);
                }
            }
            _ => {
                if rng.next().is_multiple_of(32) {
                    // Dropped while panicking: a failure.
                    let r = catch_unwind(AssertUnwindSafe(move || {
                        let _permit = permit;
                        std::panic::panic_any(PANIC);
                    }));
                    assert!(r.is_err());
                    t.failures += 1;
                } else {
                    t.record(permit, Outcome::Success);
                }
            }
        }
    }
    for p in held {
        t.record(p, Outcome::Ignored);
    }
    t
}

/// Runs both threads on a breaker built from `config`, checks every count, and shows the
/// breaker is not stuck. `trip` is how many failures in a row trip it when closed (for a count
/// window, its size: that many always fill it).
fn stress(config: breakerbox_runtime::ConfigBuilder, trip: usize) {
    quiet_panics();
    let clock = ManualClock::new();
    let b = Breaker::new("stress", config.clock(clock.clone()).build().unwrap());
    let closes = Arc::new(AtomicU64::new(0));
    let opens = Arc::new(AtomicU64::new(0));
    {
        let (closes, opens) = (closes.clone(), opens.clone());
        b.on_state_change(move |e| {
            match e.to {
                State::Closed => closes.fetch_add(1, Ordering::Relaxed),
                State::Open => opens.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
        });
    }

    let (t1, t2) = std::thread::scope(|s| {
        let a = s.spawn(|| hammer(&b, &clock, 0x9E37_79B9_7F4A_7C15, true));
        let c = s.spawn(|| hammer(&b, &clock, 0xD1B5_4A32_D192_ED03, false));
        (a.join().unwrap(), c.join().unwrap())
    });
    let want = t1.add(t2);

    let m = b.metrics();
    let got = Tally {
        successes: m.successes,
        failures: m.failures,
        ignored: m.ignored,
        rejected: m.rejected,
    };
    assert_eq!(got, want, "metrics vs what the threads counted");
    assert_eq!(m.calls, m.successes + m.failures + m.ignored + m.rejected);
    // Every loop iteration of each thread asks exactly once.
    assert_eq!(m.calls, 2 * CALLS_PER_THREAD);
    // It tripped and recovered many times, and the events agree with the metrics.
    assert!(m.times_opened > 100, "{m:?}");
    assert!(closes.load(Ordering::Relaxed) > 100, "{m:?}");
    assert_eq!(opens.load(Ordering::Relaxed), m.times_opened);
    assert!(m.rejected > 1000, "{m:?}");
    assert!(
        matches!(m.state, State::Closed | State::Open | State::HalfOpen),
        "{m:?}"
    );

    // Not stuck: past every deadline (a probe round that timed out reopens first), a
    // success closes it.
    for _ in 0..3 {
        if b.state() == State::Closed {
            break;
        }
        clock.advance(Duration::from_secs(1));
        if let Ok(p) = b.try_acquire() {
            p.success();
        }
        if let Ok(p) = b.try_acquire() {
            p.success();
        }
    }
    assert_eq!(b.state(), State::Closed, "{:?}", b.metrics());
    // And it still trips as configured (on a window emptied by time). A consecutive streak is
    // not emptied by time: the threads may have left one in the closed state, so only the
    // failures it lacks are needed (this test was flaky before, tripping "early"). Nor is a
    // count window: `trip` failures fill it, but those it already holds may trip it sooner.
    clock.advance(Duration::from_secs(1));
    if matches!(b.config().window(), Window::Calls(_)) && b.config().failure_rate().is_some() {
        for _ in 0..trip {
            if let Ok(p) = b.try_acquire() {
                p.failure();
            }
        }
        assert_eq!(b.state(), State::Open, "{:?}", b.metrics());
        return;
    }
    let streak = usize::try_from(b.metrics().consecutive_failures).unwrap();
    assert!(
        streak < trip,
        "a closed breaker holds a streak below the threshold"
    );
    for _ in 0..trip - streak {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), State::Open, "{:?}", b.metrics());
}

#[test]
fn consecutive_policy_two_threads_a_million_calls_each() {
    stress(
        Config::builder()
            .failures(4)
            .open_for(Duration::from_millis(5))
            .backoff(2.0)
            .max_open_for(Duration::from_millis(40))
            .half_open_calls(3)
            .successes(2)
            .probe_timeout(Duration::from_millis(20))
            .max_concurrent(8),
        4,
    );
}

#[test]
fn count_window_rate_policy_two_threads_a_million_calls_each() {
    stress(
        Config::builder()
            .failure_rate(40)
            .window(Window::Calls(20))
            .min_calls(10)
            .open_for(Duration::from_millis(5))
            .half_open_calls(2)
            .successes(2)
            .probe_timeout(Duration::from_millis(20)),
        20,
    );
}

#[test]
fn time_window_rate_policy_two_threads_a_million_calls_each() {
    stress(
        Config::builder()
            .failure_rate(40)
            .window(Window::Time(Duration::from_millis(20)))
            .min_calls(20)
            .open_for(Duration::from_millis(5))
            .half_open_calls(2)
            .successes(2)
            .probe_timeout(Duration::from_millis(20)),
        20,
    );
}

/// A breaker tripping at 50% failures over 10 s, from 10 calls, on a manual clock.
fn time_window_breaker(name: &str) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failure_rate(50)
        .window(Window::Time(Duration::from_secs(10)))
        .min_calls(10)
        .clock(clock.clone())
        .build()
        .unwrap();
    (Breaker::new(name, config), clock)
}

/// A time window's calls are counted per thread (in words each thread writes alone) and summed
/// when judged: with more threads than counter stripes, the window still holds every call,
/// lets them expire bucket by bucket, and judges the rate over all of them. The same twelve
/// threads make both batches, so the threads that own stripes use them in both.
#[test]
fn a_time_window_counts_every_threads_calls() {
    const THREADS: u64 = 12;
    const EACH: u64 = 10_000;
    let (b, clock) = time_window_breaker("stress.window.threads");
    let batch = |fail_every: u64| {
        for i in 1..=EACH {
            let outcome = if i % fail_every == 0 {
                Outcome::Failure
            } else {
                Outcome::Success
            };
            b.try_acquire().unwrap().record(outcome);
        }
    };
    let (done, next) = (
        std::sync::Barrier::new(THREADS as usize + 1),
        std::sync::Barrier::new(THREADS as usize + 1),
    );
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                batch(10);
                done.wait();
                next.wait();
                batch(4);
            });
        }
        // 10% failures: never trips; the window holds them all.
        done.wait();
        let m = b.metrics();
        assert_eq!(m.state, State::Closed);
        assert_eq!(m.window_calls, THREADS * EACH);
        assert_eq!(m.failure_rate, Some(10.0));
        // Five seconds on, 25% failures.
        clock.advance(Duration::from_secs(5));
        next.wait();
    });
    // Both batches are in the window.
    let m = b.metrics();
    assert_eq!(m.window_calls, 2 * THREADS * EACH);
    assert_eq!(m.failure_rate, Some(17.5));
    // Another six seconds: the first batch has slid out, the second is all there is.
    clock.advance(Duration::from_secs(6));
    let m = b.metrics();
    assert_eq!(m.window_calls, THREADS * EACH);
    assert_eq!(m.failure_rate, Some(25.0));
    assert_eq!(m.calls, 2 * THREADS * EACH);
}

/// A reset empties the window of the calls a thread counted in words of its own: they do not
/// come back when that thread records again. (Sequential: it shows the per-thread words are
/// cleared, not the race with a clear, which the epoch offset in window.rs is for.)
#[test]
fn a_reset_window_stays_empty_of_a_threads_earlier_calls() {
    let (b, _clock) = time_window_breaker("stress.window.reset");
    let (to_worker, work) = std::sync::mpsc::channel::<u64>();
    let (to_main, done) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        // One thread makes every call, so it owns the first stripe and its window words.
        s.spawn(|| {
            for n in work {
                for _ in 0..n {
                    b.try_acquire().unwrap().success();
                }
                to_main.send(()).unwrap();
            }
        });
        to_worker.send(1000).unwrap();
        done.recv().unwrap();
        assert_eq!(b.metrics().window_calls, 1000);
        b.reset();
        assert_eq!(b.metrics().window_calls, 0);
        to_worker.send(1).unwrap();
        done.recv().unwrap();
        assert_eq!(
            b.metrics().window_calls,
            1,
            "the reset window got old calls back"
        );
        drop(to_worker);
    });
}

/// A count window is the last `n` calls whichever threads made them: a failure stays in it
/// until `n` later calls push it out, even when other threads made those calls.
#[test]
fn a_count_window_holds_the_last_calls_of_every_thread() {
    let config = |n, min, rate| {
        Config::builder()
            .failure_rate(rate)
            .window(Window::Calls(n))
            .min_calls(min)
            .build()
            .unwrap()
    };
    let on_a_thread = |b: &Breaker, outcome: Outcome| {
        std::thread::scope(|s| {
            s.spawn(|| b.try_acquire().unwrap().record(outcome));
        });
    };
    // One failure on one thread, then seven successes on another: one in eight.
    let b = Breaker::new("stress.window.count.a", config(8, 8, 12));
    on_a_thread(&b, Outcome::Failure);
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..7 {
                b.try_acquire().unwrap().success();
            }
        });
    });
    assert_eq!(b.state(), State::Open, "{:?}", b.metrics());
    // Five threads, one call each, the first a failure: one in five.
    let b = Breaker::new("stress.window.count.b", config(100, 5, 20));
    on_a_thread(&b, Outcome::Failure);
    for _ in 0..4 {
        assert_eq!(b.state(), State::Closed);
        on_a_thread(&b, Outcome::Success);
    }
    assert_eq!(b.state(), State::Open, "{:?}", b.metrics());
    // Twelve threads at once, a tenth of their calls failing: it stays closed, and holds
    // exactly its hundred calls; once they all fail, it trips.
    let b = Breaker::new("stress.window.count.c", config(100, 10, 50));
    let run = |calls: u64, fail_every: u64| {
        std::thread::scope(|s| {
            for _ in 0..12 {
                s.spawn(|| {
                    for i in 1..=calls {
                        if let Ok(p) = b.try_acquire() {
                            p.record(if i % fail_every == 0 {
                                Outcome::Failure
                            } else {
                                Outcome::Success
                            });
                        }
                    }
                });
            }
        });
    };
    run(5_000, 10);
    let m = b.metrics();
    assert_eq!(m.state, State::Closed, "tripped at 10% failures");
    assert_eq!((m.window_calls, m.calls), (100, 60_000));
    run(50, 1);
    assert_eq!(
        b.state(),
        State::Open,
        "every thread failing did not trip it"
    );
}

/// D01: resets racing successes on a count window. A reset used to store 0 in the window's
/// failure total between a success's clearing of its bit and its decrement, leaving the total
/// one short (below zero) until the next clear: at `failure_rate = 100` the breaker then never
/// tripped again. Each round, two threads record (one failure in four) while a third resets
/// for as long as they do; the recorders go on past the last reset, so no later clear repairs
/// the total. Then a window of failures must trip it. Every count adds up at the end.
/// (loom's `a_count_window_clear_racing_a_success_keeps_its_total` is the exact proof; on a
/// loaded machine a round hits the race only now and then.)
#[test]
fn resets_racing_successes_keep_a_count_window_exact() {
    const WINDOW: u32 = 16;
    const ROUNDS: u64 = 20;
    const CALLS: u64 = 50_000;
    let config = Config::builder()
        .failure_rate(100)
        .window(Window::Calls(WINDOW))
        .min_calls(WINDOW)
        .build()
        .unwrap();
    let b = Breaker::new("stress.window.count.reset", config);
    let mut want = Tally::default();
    for round in 0..ROUNDS {
        let (finished, resets_done) =
            (AtomicU64::new(0), std::sync::atomic::AtomicBool::new(false));
        let tally = std::thread::scope(|s| {
            let recorders: Vec<_> = (0..2u64)
                .map(|t| {
                    let (b, finished, resets_done) = (&b, &finished, &resets_done);
                    s.spawn(move || {
                        let mut tally = Tally::default();
                        let mut i = 0u64;
                        let mut after = u64::from(WINDOW);
                        while after > 0 {
                            match b.try_acquire() {
                                Ok(p) if (i + t).is_multiple_of(4) => {
                                    tally.record(p, Outcome::Failure)
                                }
                                Ok(p) => tally.record(p, Outcome::Success),
                                Err(_) => tally.rejected += 1,
                            }
                            i += 1;
                            if i == CALLS {
                                finished.fetch_add(1, Ordering::Relaxed);
                            }
                            if resets_done.load(Ordering::Relaxed) {
                                after -= 1;
                            }
                        }
                        tally
                    })
                })
                .collect();
            while finished.load(Ordering::Relaxed) < 2 {
                b.reset();
            }
            resets_done.store(true, Ordering::Relaxed);
            recorders
                .into_iter()
                .map(|r| r.join().unwrap())
                .fold(Tally::default(), Tally::add)
        });
        want = want.add(tally);
        // One in four of the last calls failed: closed, unless they happened to fill the
        // window with failures. Either way a window of failures leaves it open at 100%.
        for _ in 0..WINDOW {
            match b.try_acquire() {
                Ok(p) => want.record(p, Outcome::Failure),
                Err(_) => want.rejected += 1,
            }
        }
        let m = b.metrics();
        assert_eq!(
            m.state,
            State::Open,
            "round {round}: a window of failures did not trip it: {m:?}"
        );
        assert_eq!(m.failure_rate, Some(100.0), "round {round}: {m:?}");
        b.reset();
    }
    let m = b.metrics();
    assert_eq!(
        (m.successes, m.failures, m.rejected),
        (want.successes, want.failures, want.rejected)
    );
}

/// Calls `b` `calls` times with a mix of outcomes, counting what it did.
fn churn_calls(b: &Breaker, clock: Option<&ManualClock>, rng: &mut Rng, calls: u64) -> Tally {
    let mut t = Tally::default();
    for i in 0..calls {
        if let Some(clock) = clock
            && i.is_multiple_of(16)
        {
            clock.advance(Duration::from_millis(1));
        }
        let Ok(p) = b.try_acquire() else {
            t.rejected += 1;
            continue;
        };
        match rng.next() % 8 {
            0..=4 => t.record(p, Outcome::Success),
            5 | 6 => t.record(p, Outcome::Failure),
            _ => t.record(p, Outcome::Ignored),
        }
    }
    t
}

fn counted(b: &Breaker) -> Tally {
    let m = b.metrics();
    Tally {
        successes: m.successes,
        failures: m.failures,
        ignored: m.ignored,
        rejected: m.rejected,
    }
}

/// D16: threads that come and go. Round after round, new threads call one long-lived breaker
/// (counting in stripes that pass from exited threads to new ones) and a breaker of the round,
/// which is dropped while they still run: a thread's exit must not touch a breaker freed
/// before it. Every count of every breaker is exact.
#[test]
fn threads_that_come_and_go_lose_no_count() {
    const ROUNDS: u64 = 100;
    const THREADS: u64 = 3;
    const CALLS: u64 = 2_000;
    let clock = ManualClock::new();
    let build = |window: Window| {
        Config::builder()
            .failure_rate(30)
            .window(window)
            .min_calls(10)
            .open_for(Duration::from_millis(2))
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let b = Breaker::new(
        "stress.churn",
        build(Window::Time(Duration::from_millis(50))),
    );
    let mut want = Tally::default();
    for round in 0..ROUNDS {
        let rb = Breaker::new("stress.churn.round", build(Window::Calls(20)));
        let (used, dropped) = (
            std::sync::Barrier::new(THREADS as usize + 1),
            std::sync::Barrier::new(THREADS as usize + 1),
        );
        let tally = std::thread::scope(|s| {
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (b, rb, clock) = (&b, rb.clone(), &clock);
                    let (used, dropped) = (&used, &dropped);
                    s.spawn(move || {
                        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (round << 8 | t));
                        let advances = (t == 0).then_some(clock);
                        let mut mine = churn_calls(b, advances, &mut rng, CALLS / 2);
                        let on_round = churn_calls(&rb, None, &mut rng, CALLS / 4);
                        drop(rb);
                        used.wait();
                        // The round's breaker is freed now; this thread goes on, then exits.
                        dropped.wait();
                        mine = mine.add(churn_calls(b, advances, &mut rng, CALLS / 2));
                        (mine, on_round)
                    })
                })
                .collect();
            used.wait();
            assert_eq!(rb.metrics().calls, THREADS * (CALLS / 4), "round {round}");
            let rb_counted = counted(&rb);
            drop(rb);
            dropped.wait();
            let (mut all, mut on_round) = (Tally::default(), Tally::default());
            for t in threads {
                let (mine, r) = t.join().unwrap();
                all = all.add(mine);
                on_round = on_round.add(r);
            }
            assert_eq!(rb_counted, on_round, "round {round}: the round's breaker");
            all
        });
        want = want.add(tally);
        assert_eq!(counted(&b), want, "round {round}");
    }
    let m = b.metrics();
    assert_eq!(m.calls, ROUNDS * THREADS * CALLS);
    assert!(m.times_opened > 0 && m.rejected > 0, "{m:?}");
}
