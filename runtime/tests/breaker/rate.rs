//! Failure rates over a window of calls or of time: when they are judged, how the windows slide.

use crate::support::{
    NS, breaker, events, fail, rate_config, rejected, secs, succeed, transitions,
};
use breakerbox_runtime::{Reason, RejectReason, State, Window};
use std::time::Duration;

#[test]
fn failure_rate_over_calls_is_judged_only_from_min_calls() {
    let (b, _) = breaker(rate_config(Window::Calls(10), 4, 50));
    for _ in 0..3 {
        fail(&b); // 100% but only 3 calls
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failures, 3);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn failure_rate_over_calls_trips_when_a_success_crosses_min_calls() {
    let (b, _) = breaker(rate_config(Window::Calls(10), 4, 50));
    fail(&b);
    fail(&b);
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    let seen = events(&b);
    succeed(&b); // 4 calls, 2 failed: 50%
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::FailureRate(50))]
    );
}

#[test]
fn a_failure_rate_of_exactly_the_limit_trips() {
    let (b, _) = breaker(rate_config(Window::Calls(10), 4, 50));
    for _ in 0..3 {
        succeed(&b);
    }
    fail(&b); // 25%
    for _ in 0..20 {
        succeed(&b);
        fail(&b);
        if b.state() == State::Open {
            break;
        }
    }
    // Alternating calls reach exactly 5 of 10 once the window is full of them.
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!(m.window_calls, 10);
    assert_eq!(m.failure_rate, Some(50.0));
}

#[test]
fn failure_rate_over_calls_slides() {
    // A cumulative count would never reach 75% here; the last 4 calls do.
    let (b, _) = breaker(rate_config(Window::Calls(4), 4, 75));
    for _ in 0..8 {
        succeed(&b);
    }
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failure_rate, Some(50.0));
    fail(&b); // S F F F
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().window_calls, 4);
}

#[test]
fn repro_count_window_trip_opens_from_time_zero() {
    // A count window records without reading the clock, and the trip it judged used that
    // missing time (0) as "now": the deadline was `open_for` after the clock's origin, so on
    // the system clock the breaker was past it at once and let the next call probe.
    let (b, clock) = breaker(rate_config(Window::Calls(4), 2, 50).open_for(secs(30)));
    let seen = events(&b);
    clock.advance(secs(3600));
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!(m.retry_after, Some(secs(30)));
    assert_eq!(m.time_in_state, Duration::ZERO);
    assert_eq!(seen.lock().unwrap()[0].at, secs(3600));
    assert_eq!(rejected(&b).reason(), RejectReason::Open);
}

#[test]
fn old_failures_slide_out_of_a_call_window() {
    let (b, _) = breaker(rate_config(Window::Calls(4), 4, 75));
    fail(&b);
    fail(&b);
    succeed(&b);
    succeed(&b); // F F S S: 50%
    succeed(&b);
    succeed(&b); // S S S S: the failures slid out
    assert_eq!(b.metrics().failure_rate, Some(0.0));
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn failure_rate_over_time_is_judged_only_from_min_calls() {
    let (b, _) = breaker(rate_config(Window::Time(secs(10)), 4, 50));
    for _ in 0..3 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn repro_time_window_success_crossing_min_calls_never_judged() {
    // A count window judges the call that brings it to `min_calls`; a time window did not when
    // that call was a success, so 50% failures stayed closed until the next failure.
    let (b, _) = breaker(rate_config(Window::Time(secs(10)), 4, 50));
    fail(&b);
    fail(&b);
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    succeed(&b); // 4 calls in the window, 2 failed: 50%
    assert_eq!(b.state(), State::Open);
    // After a close, the next crossing is judged again.
    b.reset();
    fail(&b);
    for _ in 0..2 {
        succeed(&b);
    }
    assert_eq!(b.state(), State::Closed);
    fail(&b); // 2 of 4
    assert_eq!(b.state(), State::Open);
    // And once a judgment had enough calls, successes alone are not judged (nothing to trip).
    b.reset();
    for _ in 0..4 {
        succeed(&b);
    }
    fail(&b);
    for _ in 0..10 {
        succeed(&b);
    }
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn old_buckets_slide_out_of_a_time_window() {
    // Ten buckets of one second each.
    let (b, clock) = breaker(rate_config(Window::Time(secs(10)), 2, 60));
    for _ in 0..4 {
        succeed(&b); // t = 0
    }
    clock.advance(secs(5));
    fail(&b);
    fail(&b); // 2 of 6: 33%
    assert_eq!(b.state(), State::Closed);
    clock.advance(secs(5) - NS); // t = 10 s - 1 ns: the first bucket is still in
    assert_eq!(b.metrics().window_calls, 6);
    clock.advance(NS); // t = 10 s: it slid out
    assert_eq!(b.metrics().window_calls, 2);
    succeed(&b); // 2 of 3: 66%
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_time_window_forgets_everything_after_its_span() {
    let (b, clock) = breaker(rate_config(Window::Time(secs(10)), 3, 50));
    fail(&b);
    fail(&b);
    clock.advance(secs(10));
    assert_eq!(b.metrics().window_calls, 0);
    assert_eq!(b.metrics().failure_rate, None);
    succeed(&b);
    succeed(&b);
    fail(&b); // 1 of 3
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn the_window_is_cleared_when_the_breaker_closes() {
    let (b, clock) = breaker(rate_config(Window::Calls(10), 2, 50).open_for(secs(1)));
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    clock.advance(secs(1));
    succeed(&b); // the probe closes it
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().window_calls, 0);
    succeed(&b);
    fail(&b); // 1 of 2: 50% trips again, judged on the new window only
    assert_eq!(b.state(), State::Open);
}

/// A time window's bucket stamps are 32 bits wide. Where the bucket number crosses 2^32 (every
/// 49.7 days of uptime for a 10 ms window), ten consecutive buckets must still be ten distinct
/// slots: none written over while still in the window.
#[test]
fn a_success_admitted_before_a_reset_stays_out_of_the_new_count_window() {
    let (b, _) = breaker(rate_config(Window::Calls(10), 2, 50));
    succeed(&b);
    succeed(&b); // judged at `min_calls`: later successes are only counted
    let before = b.try_acquire().expect("closed");
    b.reset();
    succeed(&b);
    succeed(&b); // the new window past `min_calls` too
    before.success();
    assert_eq!(
        b.metrics().window_calls,
        2,
        "a success admitted before the reset landed in the new window"
    );
}

#[test]
fn a_time_window_keeps_every_bucket_where_its_stamps_wrap() {
    let (b, clock) = breaker(rate_config(
        Window::Time(Duration::from_millis(10)),
        100,
        50,
    ));
    // Buckets are 1 ms wide; the middle of bucket k is at k ms + 0.5 ms.
    let first = (1u64 << 32) - 6;
    for k in first..first + 10 {
        clock.set(Duration::from_nanos(k * 1_000_000 + 500_000));
        succeed(&b);
        fail(&b);
    }
    let m = b.metrics();
    assert_eq!(m.window_calls, 20);
    assert_eq!(m.failure_rate, Some(50.0));
    // One bucket later the oldest has slid out, and only it.
    clock.set(Duration::from_nanos((first + 10) * 1_000_000 + 500_000));
    assert_eq!(b.metrics().window_calls, 18);
}
