//! `failures_within` at one instant and under contention.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Error, ManualClock, State};

use crate::calls::{S, clocked, fail};

#[test]
fn two_failures_at_the_same_instant_trip_failures_2() {
    let clock = ManualClock::new();
    clock.advance(100 * S);
    let b = Breaker::new(
        "failures-within",
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
fn a_new_streak_after_an_expired_one_at_one_instant_trips() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "failures-within-expired",
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
fn many_threads_failing_at_one_instant_trip_exactly_once() {
    const THREADS: usize = 8;
    for round in 0..50 {
        let clock = ManualClock::new();
        clock.advance(S * round);
        let b = Breaker::new(
            "failures-within-threads",
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
fn many_threads_failures_2_trip_exactly_once() {
    const THREADS: usize = 8;
    for _ in 0..50 {
        let clock = ManualClock::new();
        let b = Breaker::new(
            "failures-within-threads-2",
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

#[test]
fn threads_failing_at_one_instant_after_an_expired_streak_trip() {
    const THREADS: usize = 4;
    let mut missed = 0;
    for round in 0..3_000u64 {
        let clock = ManualClock::new();
        let b = Breaker::new(
            "failures-within-expired-threads",
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
