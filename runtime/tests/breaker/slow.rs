//! Slow calls: counted as failures, tripping by their own rate.

use crate::support::{
    NS, breaker, events, ms, rate_config, secs, succeed, to_half_open, transitions,
};
use breakerbox_runtime::{Config, Reason, State, Window};

#[test]
fn slow_calls_count_as_failures() {
    let (b, clock) = breaker(Config::builder().failures(2).slow(ms(100)));
    let p = b.try_acquire().unwrap();
    clock.advance(ms(100) - NS);
    p.success(); // just fast enough
    assert_eq!(b.metrics().consecutive_failures, 0);
    for _ in 0..2 {
        let p = b.try_acquire().unwrap();
        clock.advance(ms(100));
        p.success();
    }
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!((m.successes, m.failures, m.slow), (3, 0, 2));
}

#[test]
fn slow_calls_trip_by_their_own_rate() {
    let (b, clock) = breaker(
        Config::builder()
            .slow(ms(100))
            .slow_rate(50)
            .window(Window::Calls(10))
            .min_calls(4),
    );
    let seen = events(&b);
    for _ in 0..3 {
        let p = b.try_acquire().unwrap();
        clock.advance(ms(150));
        p.success();
    }
    // With their own rate, slow calls do not count as consecutive failures.
    assert_eq!(b.metrics().consecutive_failures, 0);
    assert_eq!(b.state(), State::Closed, "3 calls are fewer than min_calls");
    succeed(&b); // 3 slow of 4
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::SlowRate(75))]
    );
}

#[test]
fn slow_calls_count_into_a_failure_rate() {
    let (b, clock) = breaker(rate_config(Window::Calls(4), 2, 100).slow(ms(10)));
    for _ in 0..2 {
        let p = b.try_acquire().unwrap();
        clock.advance(ms(10));
        p.success();
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_slow_probe_reopens() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .slow(ms(100))
            .open_for(secs(1)),
    );
    to_half_open(&b, &clock);
    let p = b.try_acquire().unwrap();
    clock.advance(ms(100));
    p.success();
    assert_eq!(b.state(), State::Open);
}
