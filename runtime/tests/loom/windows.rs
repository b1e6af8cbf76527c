//! loom models of the rate windows and the counter stripes: a count window's clear racing a
//! success and its judgment, a time window's clear racing an owner's plain-store bump, and
//! stripes claimed, released at thread exit and taken over.
//!
//! Under `cfg(loom)` the counters run their real protocol: each loom thread gets its own seat
//! (a `loom::thread_local!`), claims stripes by compare-and-swap, writes them with plain
//! load-and-store, and gives its seat back when it exits. Each model is a few threads and a
//! handful of calls, explored without a preemption bound except the three-thread one (bound 2).

use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, ConfigBuilder, ManualClock, Outcome, State, Window};
use loom::thread;

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

/// A success that pushes a failure out of a count window clears its bit, then takes one off
/// the failure total; a reset may clear the window between the two. Were the reset to store
/// 0 in the total, the success's decrement would wrap it below zero and a breaker with
/// `failure_rate = 100` would never trip again. Whatever the order, a window of failures
/// trips it.
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

/// Counter stripes with real claims: the first thread to count owns the first stripe, a
/// second claims a spill stripe (or, its stripe taken, counts on the shared path), each adding
/// with a plain load and store. Every count lands.
#[test]
fn stripes_claimed_by_two_threads_lose_no_count() {
    model(|| {
        let (b, _) = breaker(Config::builder().failures(5));
        let t = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_acquire().unwrap().success();
                b.try_acquire().unwrap().failure();
            })
        };
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().record(Outcome::Ignored);
        t.join().unwrap();
        let m = b.metrics();
        assert_eq!((m.successes, m.failures, m.ignored), (2, 1, 1), "{m:?}");
    });
}

/// A thread that exits gives its seat back, and the thread after it takes its stripe
/// over, possibly while the first is still exiting. The taker's plain load must see every
/// count the exited thread stored: its exit's Release and the taker's Acquire order them.
/// Weaken either and loom finds a lost count.
#[test]
fn a_stripe_passes_to_a_new_thread_when_its_owner_exits() {
    // Three threads, one of them exiting meanwhile: bounded, to stay within seconds.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let (b, _) = breaker(Config::builder().failures(5));
        let first = {
            let b = b.clone();
            thread::spawn(move || b.try_acquire().unwrap().success())
        };
        let second = {
            let b = b.clone();
            thread::spawn(move || {
                b.try_acquire().unwrap().success();
                b.try_acquire().unwrap().failure();
            })
        };
        first.join().unwrap();
        second.join().unwrap();
        let m = b.metrics();
        assert_eq!((m.successes, m.failures), (2, 1), "{m:?}");
    });
}

/// A time window's owner counts its calls with a plain load and store; a clear racing it
/// moves the epoch offset on instead of zeroing words, so the owner's store of a count it read
/// before the clear lands in an expired word. A zeroing clear would be overwritten by that
/// store and bring the cleared calls back. Whatever the order, the cleared window holds at
/// most the one racing success (counted once, like any success admitted before a reset).
#[test]
fn a_time_window_clear_racing_an_owners_bump_stays_clear() {
    // A time window is some eighty words, and a judgment reads them all: more branches than
    // loom's default allows, though few of them race.
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(|| {
        // All successes, judged only when a bucket turns over (`min_calls` 1 is met at once).
        let (b, _) = breaker(
            Config::builder()
                .failure_rate(50)
                .window(Window::Time(Duration::from_secs(10)))
                .min_calls(1),
        );
        // This thread counts first: it owns the first stripe and its window words.
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().success();
        let t = {
            let b = b.clone();
            thread::spawn(move || b.reset())
        };
        b.try_acquire().unwrap().success();
        t.join().unwrap();
        let m = b.metrics();
        assert!(
            m.window_calls <= 1,
            "the cleared window got calls back: {m:?}"
        );
        assert_eq!(m.successes, 3);
        // And the owner goes on counting in the new window.
        b.try_acquire().unwrap().success();
        let m = b.metrics();
        assert!((1..=2).contains(&m.window_calls), "{m:?}");
    });
}

/// A success admitted before a reset and recorded while the reset runs belongs to the window
/// it was admitted in, whatever the order: the window the reset starts holds exactly the calls
/// recorded after it. Neither counted in it (two calls after one failure), nor taken out of it
/// though it was never in it (counted among the breaker's calls before the clear, left out as
/// stale after it): one failure would read as no call, and a window's length of failures would
/// not trip it.
#[test]
fn a_success_racing_a_reset_leaves_the_count_window_exact() {
    model(|| {
        let (b, _) = breaker(
            Config::builder()
                .failure_rate(100)
                .window(Window::Calls(2))
                .min_calls(2),
        );
        // Calls before the reset, so that a call taken out twice cannot hide below zero.
        b.try_acquire().unwrap().success();
        b.try_acquire().unwrap().success();
        let permit = b.try_acquire_owned().unwrap();
        let t = thread::spawn(move || permit.success());
        b.reset();
        t.join().unwrap();
        b.try_acquire().unwrap().failure();
        let m = b.metrics();
        assert_eq!((m.window_calls, m.state), (1, State::Closed), "{m:?}");
        b.try_acquire().unwrap().failure();
        let m = b.metrics();
        assert_eq!(m.state, State::Open, "{m:?}");
        assert_eq!((m.window_calls, m.failure_rate), (2, Some(100.0)), "{m:?}");
    });
}

/// A success admitted before a reset may be judged while the reset clears the count window,
/// and find the old window full. Its judgment must not mark the cleared window as holding
/// `min_calls`: then the new window's successes go unjudged, and one failure and one success
/// (50%) would not trip `failure_rate = 50` until another failure came.
#[test]
fn a_stale_judgment_racing_a_reset_leaves_the_new_window_judged() {
    model(|| {
        let (b, _) = breaker(
            Config::builder()
                .failure_rate(50)
                .window(Window::Calls(2))
                .min_calls(2),
        );
        b.try_acquire().unwrap().success();
        let permit = b.try_acquire_owned().unwrap();
        let t = thread::spawn(move || permit.success());
        b.reset();
        b.try_acquire().unwrap().failure();
        t.join().unwrap();
        assert_eq!(b.state(), State::Closed);
        b.try_acquire().unwrap().success();
        let m = b.metrics();
        assert_eq!(m.state, State::Open, "{m:?}");
    });
}
