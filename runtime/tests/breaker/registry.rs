//! The process-wide registry: one breaker per name, configuration, clocks, listeners.

use crate::support::{capture, fail, registry_lock, secs, succeed};
use breakerbox_runtime::{Config, ManualClock, Reason, State, registry};
use std::sync::{Arc, Mutex};

#[test]
fn registry_shares_one_breaker_per_name() {
    let _serial = registry_lock();
    let a = registry().get_or_create("transitions.shared", || {
        Config::builder().failures(2).build().unwrap()
    });
    let b = registry().get_or_create("transitions.shared", || {
        Config::builder().failures(2).build().unwrap()
    });
    assert!(a.ptr_eq(&b));
    assert!(registry().get("transitions.shared").unwrap().ptr_eq(&a));
    assert!(registry().get("transitions.nobody").is_none());
    fail(&a);
    fail(&b);
    assert_eq!(a.state(), State::Open);
    assert!(registry().breakers().iter().any(|x| x.ptr_eq(&a)));
    let snap = registry().snapshot();
    assert!(snap.windows(2).all(|w| w[0].name <= w[1].name));
    assert_eq!(
        snap.iter()
            .find(|m| m.name == "transitions.shared")
            .unwrap()
            .state,
        State::Open
    );
}

#[test]
fn registry_configure_wins_over_the_call_site() {
    let _serial = registry_lock();
    assert!(registry().configure(
        "transitions.preset",
        Config::builder().failures(1).build().unwrap()
    ));
    let seen = capture::run(|| {
        let b = registry().get_or_create("transitions.preset", Config::default);
        assert_eq!(b.config().failures(), Some(1));
        // The preset was chosen on purpose: no warning for call sites that differ from it.
        registry().get_or_create("transitions.preset", Config::default);
    });
    assert!(
        seen.iter().all(|e| e.level != tracing::Level::WARN),
        "{seen:#?}"
    );
    assert!(!registry().configure("transitions.preset", Config::default()));
}

#[test]
fn registry_set_clock_gives_the_breaker_that_clock() {
    let _serial = registry_lock();
    let clock = ManualClock::new();
    assert!(registry().set_clock("transitions.clock", clock.clone()));
    let b = registry().get_or_create("transitions.clock", || {
        Config::builder()
            .failures(1)
            .open_for(secs(5))
            .build()
            .unwrap()
    });
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(5)));
    clock.advance(secs(5));
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    assert!(!registry().set_clock("transitions.clock", ManualClock::new()));
}

#[test]
fn registry_warns_once_when_call_sites_differ() {
    let _serial = registry_lock();
    let seen = capture::run(|| {
        let first = registry().get_or_create("transitions.differ", || {
            Config::builder().failures(2).build().unwrap()
        });
        for _ in 0..3 {
            let other = registry().get_or_create("transitions.differ", || {
                Config::builder().failures(7).build().unwrap()
            });
            assert!(other.ptr_eq(&first));
            assert_eq!(other.config().failures(), Some(2), "the first one wins");
        }
        // The same config, with another clock, is not a difference.
        registry().get_or_create("transitions.differ", || {
            Config::builder()
                .failures(2)
                .clock(ManualClock::new())
                .build()
                .unwrap()
        });
    });
    let warnings: Vec<_> = seen
        .iter()
        .filter(|e| e.level == tracing::Level::WARN && e.target == "breakerbox")
        .collect();
    assert_eq!(warnings.len(), 1, "{seen:#?}");
    assert_eq!(warnings[0].fields["name"], "transitions.differ");
}

#[test]
fn registry_listeners_receive_every_transition() {
    let _serial = registry_lock();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    registry().on_state_change(move |e| {
        if e.name == "transitions.listened" {
            log.lock().unwrap().push((e.from, e.to, e.reason));
        }
    });
    let clock = ManualClock::new();
    registry().set_clock("transitions.listened", clock.clone());
    let b = registry().get_or_create("transitions.listened", || {
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .build()
            .unwrap()
    });
    fail(&b);
    clock.advance(secs(1));
    succeed(&b);
    b.force_open();
    registry().reset_all();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (State::Closed, State::Open, Reason::Failures(1)),
            (State::Open, State::HalfOpen, Reason::OpenElapsed),
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded),
            (State::Closed, State::ForcedOpen, Reason::ForcedOpen),
            (State::ForcedOpen, State::Closed, Reason::Reset),
        ]
    );
}
