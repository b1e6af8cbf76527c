//! loom models of the rate windows and the counter stripes: a count window's clear racing a
//! success, a time window's clear racing an owner's plain-store bump, and stripes claimed,
//! released at thread exit and taken over.
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!   cargo test -p breakerbox-runtime --test loom_windows --release
//! ```
//!
//! Under `cfg(loom)` the counters run their real protocol: each loom thread gets its own seat
//! (a `loom::thread_local!`), claims stripes by compare-and-swap, writes them with plain
//! load-and-store, and gives its seat back when it exits. Each model is a few threads and a
//! handful of calls, explored without a preemption bound.
#![cfg(loom)]

use breakerbox_runtime::{Breaker, Config, ConfigBuilder, ManualClock, State, Window};
use loom::thread;

fn model(f: impl Fn() + Sync + Send + 'static) {
    loom::model::Builder::new().check(f);
}

fn breaker(config: ConfigBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let config = config.clock(clock.clone()).build().unwrap();
    (Breaker::new("loom", config), clock)
}

/// D01. A success that pushes a failure out of a count window clears its bit, then takes one
/// off the failure total; a reset clearing the window between the two used to store 0 in the
/// total, which the success's decrement then wrapped below zero. With `failure_rate = 100` the
/// breaker never tripped again. Now, whatever the order, a window of failures trips it.
#[test]
fn a_count_window_clear_racing_a_success_keeps_its_total() {
    model(|| {
        let (b, _) = breaker(
            Config::builder()
                .failure_rate(100)
                .window(Window::Calls(2))
                .min_calls(2),
        );
        // F S: half failures, closed; the window's next position holds the failure.
        b.try_acquire().unwrap().failure();
        b.try_acquire().unwrap().success();
        let t = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire().unwrap().success())
        };
        b.reset();
        t.join().unwrap();
        assert_eq!(b.state(), State::Closed);
        // Whether the success landed before the reset, after it, or was stale: two failures
        // fill the window.
        b.try_acquire().unwrap().failure();
        if b.state() == State::Closed {
            b.try_acquire().unwrap().failure();
        }
        let m = b.metrics();
        assert_eq!(m.state, State::Open, "{m:?}");
        assert_eq!(m.failure_rate, Some(100.0), "{m:?}");
    });
}
