//! Rate windows under racing threads: every thread's calls counted, resets, the last calls
//! of a count window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, ManualClock, Outcome, State, Window};

use crate::support::Tally;

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

/// Resets racing successes on a count window. A reset that stored 0 in the window's failure
/// total between a success's clearing of its bit and its decrement would leave the total one
/// short (below zero) until the next clear: at `failure_rate = 100` the breaker would never
/// trip again. Each round, two threads record (one failure in four) while a third resets
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

/// Successes admitted before a reset and recorded while resets run are stale: the window
/// each reset starts holds none of them, however their recording interleaves with the clear,
/// and then exactly the calls recorded after it. Each round two threads record thousands of
/// such successes while this one resets for as long as they run; then the window must be
/// empty, and a window's length of failures (four) must trip it at 100%. A window that took
/// a success out twice (counted before a clear, left out after it) would hold three calls
/// after the four failures, and stay closed.
#[test]
fn successes_racing_resets_leave_a_count_window_exactly_its_calls() {
    const WINDOW: u32 = 4;
    const ROUNDS: u64 = 100;
    const EACH: usize = 5_000;
    let config = Config::builder()
        .failure_rate(100)
        .window(Window::Calls(WINDOW))
        .min_calls(WINDOW)
        .build()
        .unwrap();
    let b = Breaker::new("stress.window.count.stale", config);
    for round in 0..ROUNDS {
        let permits: Vec<Vec<_>> = (0..2)
            .map(|_| (0..EACH).map(|_| b.try_acquire_owned().unwrap()).collect())
            .collect();
        let finished = AtomicU64::new(0);
        std::thread::scope(|s| {
            for batch in permits {
                let finished = &finished;
                s.spawn(move || {
                    for p in batch {
                        p.success();
                    }
                    finished.fetch_add(1, Ordering::Relaxed);
                });
            }
            b.reset();
            while finished.load(Ordering::Relaxed) < 2 {
                b.reset();
            }
        });
        let m = b.metrics();
        assert_eq!(
            (m.state, m.window_calls),
            (State::Closed, 0),
            "round {round}: {m:?}"
        );
        for _ in 0..WINDOW {
            b.try_acquire().unwrap().failure();
        }
        let m = b.metrics();
        assert_eq!(
            (m.state, m.window_calls, m.failure_rate),
            (State::Open, u64::from(WINDOW), Some(100.0)),
            "round {round}: four failures did not trip it: {m:?}"
        );
        b.reset();
    }
}
