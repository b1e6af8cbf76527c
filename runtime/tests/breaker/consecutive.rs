//! Consecutive failures: the streak, what breaks it, and `failures_within`.

use crate::support::{NS, breaker, events, fail, secs, succeed, transitions};
use breakerbox_runtime::{Config, Reason, State};

#[test]
fn consecutive_failures_trip_at_exactly_n() {
    let (b, _) = breaker(Config::builder().failures(3));
    let seen = events(&b);
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().consecutive_failures, 2);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::Failures(3))]
    );
    let m = b.metrics();
    assert_eq!((m.failures, m.times_opened), (3, 1));
}

#[test]
fn default_config_trips_after_five() {
    let (b, _) = breaker(Config::builder());
    for _ in 0..4 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().retry_after, Some(secs(60)));
}

#[test]
fn a_success_breaks_the_streak() {
    let (b, _) = breaker(Config::builder().failures(3));
    fail(&b);
    fail(&b);
    succeed(&b);
    assert_eq!(b.metrics().consecutive_failures, 0);
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn an_ignored_call_neither_breaks_nor_extends_the_streak() {
    let (b, _) = breaker(Config::builder().failures(2));
    fail(&b);
    b.try_acquire().unwrap().ignore();
    assert_eq!(b.metrics().consecutive_failures, 1);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn failures_within_restarts_a_streak_older_than_the_span() {
    let (b, clock) = breaker(Config::builder().failures(3).failures_within(secs(10)));
    fail(&b); // t = 0: the streak starts
    clock.advance(secs(5));
    fail(&b);
    clock.advance(secs(5) + NS); // 10 s + 1 ns after the first: too old
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().consecutive_failures, 1, "a new streak started");
    clock.advance(secs(4));
    fail(&b);
    clock.advance(secs(6)); // exactly 10 s after this streak's first failure: still inside
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn repro_stale_probe_moves_the_start_of_a_failures_within_streak() {
    // One word holds both the start of a closed streak and the half-open round's last
    // progress. A probe reporting after its round closed the breaker wrote its progress there,
    // restarting the `failures_within` span of a streak it had nothing to do with.
    let (b, clock) = breaker(
        Config::builder()
            .failures(3)
            .failures_within(secs(10))
            .open_for(secs(1))
            .half_open_calls(2),
    );
    b.trip_for(secs(1));
    clock.advance(secs(1));
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    p1.success(); // closes: the round is over, p2 is stale
    assert_eq!(b.state(), State::Closed);
    fail(&b); // t = 1 s: a streak starts
    clock.advance(secs(9));
    p2.success(); // t = 10 s: stale, must not touch the streak
    clock.advance(secs(3));
    fail(&b); // t = 13 s: 12 s after the streak began: a new streak
    fail(&b);
    assert_eq!(b.metrics().consecutive_failures, 2);
    assert_eq!(b.state(), State::Closed);
}
