//! What a breaker reports and when: metrics while disabled, probe timeouts from entering
//! half-open, retry-after, reopen counts, rate trips, slow calls, exported state.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Config, Event, ManualClock, Outcome, Reason, RejectReason, State, Window,
};

use crate::calls::{S, clocked, fail, ok, rejected};
use crate::support::{NS, breaker, rejected as rejection, secs};

// Calls while disabled.
#[test]
fn metrics_while_disabled_add_up() {
    let b = Breaker::new(
        "reports-disabled",
        Config::builder().failures(1).build().unwrap(),
    );
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

// The probe timeout, from entering half-open.
#[test]
fn hung_probe_and_a_second_probe_9s_later_reopen_at_10s() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "reports-hung-probe",
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
fn single_probe_slot_times_out_from_entering_half_open() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "reports-single-probe",
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

// Smaller items.
#[test]
fn retry_after_is_some_even_for_the_longest_open() {
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
fn reopens_count_from_zero() {
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
fn rate_trip_by_a_success_names_the_failures_behind_it() {
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
fn slow_counts_only_what_its_doc_says() {
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

/// `Metrics::calls` is "every call asked for": calls made while disabled were counted nowhere.
#[test]
fn calls_while_disabled_are_counted() {
    let (b, _) = breaker(Config::builder().failures(1).slow(secs(1)));
    b.disable();
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().failure();
    drop(b.try_acquire().unwrap());
    let m = b.metrics();
    assert_eq!(
        (m.calls, m.successes, m.failures, m.ignored, m.rejected),
        (4, 2, 1, 1, 0)
    );
    assert_eq!((m.state, m.times_opened), (State::Disabled, 0));
}

/// Two probe slots, a 10 s probe timeout: a hung first probe and a second probe 9 s later.
/// The docs promise a re-open 10 s after entering half-open, not 10 s after the last
/// admission (19 s here).
#[test]
fn the_probe_timeout_runs_from_entering_half_open() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .half_open_calls(2)
            .successes(2)
            .probe_timeout(secs(10)),
    );
    b.try_acquire().unwrap().failure();
    clock.advance(secs(1));
    let hung = b.try_acquire().unwrap();
    assert!(hung.is_probe());
    clock.advance(secs(9));
    let late = b.try_acquire().unwrap();
    assert!(late.is_probe());
    clock.advance(secs(1) - NS);
    assert_eq!(rejection(&b).reason(), RejectReason::HalfOpenFull);
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(NS);
    let r = rejection(&b);
    assert_eq!(r.reason(), RejectReason::Open);
    assert_eq!(
        b.state(),
        State::Open,
        "not re-opened 10 s after entering half-open"
    );
    std::mem::forget((hung, late));
}

/// `open_until - now == u64::MAX` is the "no retry time" sentinel; an open breaker's
/// rejection always has a retry time.
#[test]
fn an_open_breaker_always_says_when_to_retry() {
    let (b, _) = breaker(Config::builder());
    b.trip_for(Duration::MAX);
    let r = rejection(&b);
    assert_eq!(r.reason(), RejectReason::Open);
    let after = r.retry_after().expect("an open rejection has a retry time");
    assert!(after > Duration::from_secs(500 * 365 * 86_400), "{after:?}");
    assert!(r.to_string().contains("; retry in "), "{r}");
    assert!(b.metrics().retry_after.is_some());
}

/// `SharedState::reopens` is the re-opens since the last close: 0 at the first opening.
#[test]
fn exported_reopens_are_reopens_since_the_last_close() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)).backoff(2.0));
    let mut seen = vec![b.export_state().reopens];
    b.try_acquire().unwrap().failure();
    seen.push(b.export_state().reopens);
    for _ in 0..3 {
        clock.advance(b.metrics().retry_after.unwrap());
        b.try_acquire().unwrap().failure();
        seen.push(b.export_state().reopens);
    }
    clock.advance(b.metrics().retry_after.unwrap());
    let probe = b.try_acquire().unwrap();
    seen.push(b.export_state().reopens); // half-open in the fourth opening
    probe.success();
    seen.push(b.export_state().reopens);
    assert_eq!(seen, [0, 0, 1, 2, 3, 3, 0]);
}

/// The documented meaning of `slow`: successes and failures that took at least the threshold;
/// ignored calls and calls while disabled are not timed. (A doc fix: this held before.)
#[test]
fn slow_counts_timed_successes_and_failures_only() {
    let (b, clock) = breaker(Config::builder().failures(5).slow(secs(1)));
    for outcome in [Outcome::Success, Outcome::Failure, Outcome::Ignored] {
        let p = b.try_acquire().unwrap();
        clock.advance(secs(2));
        p.record(outcome);
    }
    b.disable();
    let p = b.try_acquire().unwrap();
    clock.advance(secs(2));
    p.success();
    assert_eq!(b.metrics().slow, 2);
}

/// A failure-rate trip caused by a success (the window reaching `min_calls`) stored no last
/// failure: its rejections said nothing of the failures behind it.
#[test]
fn a_rate_trip_by_a_success_names_the_last_failure_behind_it() {
    let (b, _) = breaker(
        Config::builder()
            .failure_rate(50)
            .window(Window::Calls(10))
            .min_calls(4),
    );
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().failure_with(&"connection refused");
    b.try_acquire().unwrap().failure_with(&"timed out");
    assert_eq!(b.state(), State::Closed);
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::Open, "2 of 4 failed");
    let r = rejection(&b);
    assert_eq!(r.last_failure().as_deref(), Some("timed out"));
    // A later trip of another generation does not reuse it.
    b.reset();
    for _ in 0..2 {
        b.try_acquire().unwrap().success();
    }
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.last_failure(), None);
}
