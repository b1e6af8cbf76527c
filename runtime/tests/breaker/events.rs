//! Listeners and the `tracing` events of every transition.

use crate::support::{breaker, capture, events, fail, secs, succeed, transitions};
use breakerbox_runtime::{Breaker, Config, Reason, State};
use std::time::Duration;

#[test]
fn listeners_receive_every_transition() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)));
    let a = events(&b);
    let c = events(&b);
    fail(&b);
    clock.advance(secs(1));
    fail(&b);
    clock.advance(secs(1));
    succeed(&b);
    b.force_open();
    b.disable();
    b.trip_for(secs(2));
    b.reset();
    let want = [
        (State::Closed, State::Open, Reason::Failures(1)),
        (State::Open, State::HalfOpen, Reason::OpenElapsed),
        (State::HalfOpen, State::Open, Reason::ProbeFailed),
        (State::Open, State::HalfOpen, Reason::OpenElapsed),
        (State::HalfOpen, State::Closed, Reason::ProbesSucceeded),
        (State::Closed, State::ForcedOpen, Reason::ForcedOpen),
        (State::ForcedOpen, State::Disabled, Reason::Disabled),
        (State::Disabled, State::Open, Reason::TripFor(secs(2))),
        (State::Open, State::Closed, Reason::Reset),
    ];
    assert_eq!(transitions(&a), want);
    assert_eq!(transitions(&c), want);
    let at: Vec<_> = a.lock().unwrap().iter().map(|e| e.at).collect();
    assert_eq!(at[0], Duration::ZERO);
    assert_eq!(at[1], secs(1));
    assert_eq!(at[4], secs(2));
    assert!(a.lock().unwrap().iter().all(|e| e.name == "b"));
}

#[test]
fn a_listener_may_change_the_state_itself() {
    // Events are delivered one at a time, in order; a listener's own transition is queued
    // behind the one it is told, not delivered inside it, and nothing deadlocks.
    let (b, _) = breaker(Config::builder().failures(1));
    let seen = events(&b);
    // A weak handle: a strong one in the breaker's own listener would keep it alive for ever.
    let handle = b.downgrade();
    b.on_state_change(move |e| {
        if e.to == State::Open
            && let Some(b) = handle.upgrade()
        {
            b.reset();
        }
    });
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        transitions(&seen),
        [
            (State::Closed, State::Open, Reason::Failures(1)),
            (State::Open, State::Closed, Reason::Reset),
        ]
    );
}

#[test]
fn a_panicking_listener_reaches_no_caller_and_stops_nothing() {
    // The listener's panic is caught and logged; the caller's call returns as usual, the
    // listener after it hears the event, and later events are told.
    let (b, _) = breaker(Config::builder().failures(1));
    b.on_state_change(|e| {
        if e.to == State::Open {
            panic!("listener: boom");
        }
    });
    let seen = events(&b);
    let logged = capture::run(|| fail(&b));
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::Failures(1))]
    );
    let errors: Vec<_> = logged
        .iter()
        .filter(|e| e.level == tracing::Level::ERROR)
        .collect();
    assert_eq!(errors.len(), 1, "{logged:#?}");
    assert_eq!(errors[0].target, "breakerbox");
    assert_eq!(errors[0].fields["name"], "b");
    assert_eq!(errors[0].fields["panic"], "listener: boom");
    b.reset();
    assert_eq!(
        transitions(&seen).last(),
        Some(&(State::Open, State::Closed, Reason::Reset))
    );
}

#[test]
fn every_transition_is_a_tracing_event() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)));
    let b = Breaker::new("traced", b.config().clone());
    let seen = capture::run(|| {
        b.call(|| Err::<(), _>("connection refused")).unwrap_err();
        clock.advance(secs(1));
        succeed(&b);
    });
    let changes: Vec<_> = seen
        .iter()
        .filter(|e| {
            e.fields.get("message").map(String::as_str) == Some("circuit breaker state changed")
        })
        .collect();
    assert_eq!(changes.len(), 3, "{seen:#?}");
    let fields = |i: usize, k: &str| changes[i].fields[k].clone();
    assert!(changes.iter().all(|e| e.target == "breakerbox"));
    assert!(
        changes
            .iter()
            .all(|e| fields(0, "name") == "traced" && e.fields["name"] == "traced")
    );
    assert_eq!(
        (fields(0, "from"), fields(0, "to"), fields(0, "reason")),
        (
            "closed".into(),
            "open".into(),
            "1 consecutive failure".into()
        )
    );
    assert_eq!(changes[0].level, tracing::Level::WARN);
    assert_eq!(
        (fields(1, "from"), fields(1, "to"), fields(1, "reason")),
        (
            "open".into(),
            "half-open".into(),
            "open time elapsed".into()
        )
    );
    assert_eq!(
        (fields(2, "from"), fields(2, "to"), fields(2, "reason")),
        (
            "half-open".into(),
            "closed".into(),
            "probes succeeded".into()
        )
    );
    assert_eq!(changes[2].level, tracing::Level::INFO);
    // Failures are logged at debug, with their cause.
    let failed: Vec<_> = seen
        .iter()
        .filter(|e| e.fields.get("message").map(String::as_str) == Some("call failed"))
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].level, tracing::Level::DEBUG);
    assert_eq!(failed[0].fields["cause"], "connection refused");
}

/// The `tracing` event of an opening carries the short explanation in its `why` field.
#[test]
fn the_opening_event_says_why() {
    let (b, _) = breaker(Config::builder().failures(2));
    fail(&b);
    let logged = capture::run(|| {
        b.call(|| Err::<(), _>("server answered 500")).unwrap_err();
    });
    let open: Vec<_> = logged
        .iter()
        .filter(|e| e.fields.get("to").map(String::as_str) == Some("open"))
        .collect();
    assert_eq!(open.len(), 1, "{logged:#?}");
    assert_eq!(open[0].level, tracing::Level::WARN);
    assert_eq!(
        open[0].fields["why"],
        "2 calls failed in a row (threshold 2); last failure: 'server answered 500'"
    );
}
