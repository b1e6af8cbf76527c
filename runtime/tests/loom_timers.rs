//! loom models of the open timer (src/timer.rs): a timer firing races calls, a reset and a
//! shutdown, through the real code (`ManualClock::advance` fires the timers).
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!   cargo test -p breakerbox-runtime --test loom_timers --release
//! ```
#![cfg(loom)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Clock, Config, Event, ManualClock, Reason, State};
use loom::thread;

fn opened() -> (Breaker, ManualClock, Arc<AtomicUsize>) {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    let b = Breaker::new("loom-timer", config);
    b.try_acquire().unwrap().failure();
    let elapsed = Arc::new(AtomicUsize::new(0));
    let n = elapsed.clone();
    b.on_state_change(move |e: &Event| {
        if e.reason == Reason::OpenElapsed {
            n.fetch_add(1, Ordering::Relaxed);
        }
    });
    (b, clock, elapsed)
}

/// The timer fires while a call arrives: the call is rejected (the timer has not moved it yet)
/// or admitted as the probe; the breaker half-opens exactly once.
#[test]
fn a_timer_firing_races_a_call() {
    loom::model(|| {
        let (b, clock, elapsed) = opened();
        let t = thread::spawn(move || clock.advance(Duration::from_secs(1)));
        let probe = b.try_acquire_owned();
        t.join().unwrap();
        match probe {
            Ok(p) => {
                assert!(p.is_probe());
                std::mem::forget(p);
            }
            Err(r) => assert!(r.retry_after().is_some()),
        }
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(elapsed.load(Ordering::Relaxed), 1);
    });
}

/// A reset races the timer: closed either way, and never half-opened after the reset.
#[test]
fn a_timer_firing_races_a_reset() {
    loom::model(|| {
        let (b, clock, elapsed) = opened();
        let c = b.clone();
        let t = thread::spawn(move || c.reset());
        clock.advance(Duration::from_secs(1));
        t.join().unwrap();
        assert_eq!(b.state(), State::Closed);
        assert!(elapsed.load(Ordering::Relaxed) <= 1);
    });
}

/// The timers shut down while one fires: half-open, or open without a timer, and then the
/// first call (the time being up) is admitted as the probe. Never open for good.
#[test]
fn a_shutdown_races_a_firing() {
    loom::model(|| {
        let (b, clock, _) = opened();
        let timers = clock.timers().unwrap();
        let t = thread::spawn(move || timers.shutdown());
        clock.advance(Duration::from_secs(1));
        t.join().unwrap();
        let p = b.try_acquire_owned().unwrap();
        assert!(p.is_probe());
        std::mem::forget(p);
        assert_eq!(b.state(), State::HalfOpen);
    });
}
