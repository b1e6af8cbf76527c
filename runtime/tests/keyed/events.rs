//! A keyed family's breaker names its key in everything that tells of it: its events (to its
//! own listeners and the registry's), the `tracing` events, `explain()` and a rejection's text,
//! whichever path changed its state (a call through the family, an owned permit recorded later,
//! a handle).

use crate::breaker_support as support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, BreakerMap, Config, Error, Event, ManualClock, Outcome, State, registry,
};

fn family(name: &str) -> (BreakerMap<String>, ManualClock) {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(60))
        .clock(clock.clone())
        .build()
        .unwrap();
    (BreakerMap::new(name, config), clock)
}

fn log(b: &Breaker) -> Arc<Mutex<Vec<Event>>> {
    support::events(b)
}

#[test]
fn a_keys_events_name_the_key_on_every_path() {
    let _serial = crate::support::serial();
    let (hosts, clock) = family("hosts");
    // Made first, so a listener can be added before anything happens.
    let a = hosts.breaker("a.example");
    let b = hosts.breaker("b.example");
    let (seen_a, seen_b) = (log(&a), log(&b));

    // A failure through the family trips `a`; its half-open and close follow.
    let _ = hosts.call("a.example", || Err::<(), _>("refused"));
    clock.advance(Duration::from_secs(60));
    hosts.call("a.example", || Ok::<_, &str>(())).unwrap();
    // An owned permit, recorded after the family's call returned, trips `b`.
    let permit = hosts.try_acquire("b.example").unwrap();
    permit.record(Outcome::Failure);
    // A handle forces it, and resets it.
    b.force_open();
    b.reset();

    let keys = |seen: &Mutex<Vec<Event>>| {
        seen.lock()
            .unwrap()
            .iter()
            .map(|e| (e.name.clone(), e.key.clone(), e.to))
            .collect::<Vec<_>>()
    };
    let a_key = Some("a.example".to_owned());
    assert_eq!(
        keys(&seen_a),
        [
            ("hosts".into(), a_key.clone(), State::Open),
            ("hosts".into(), a_key.clone(), State::HalfOpen),
            ("hosts".into(), a_key, State::Closed),
        ]
    );
    let b_key = Some("b.example".to_owned());
    assert_eq!(
        keys(&seen_b),
        [
            ("hosts".into(), b_key.clone(), State::Open),
            ("hosts".into(), b_key.clone(), State::ForcedOpen),
            ("hosts".into(), b_key, State::Closed),
        ]
    );
}

#[test]
fn a_breaker_of_no_family_has_no_key() {
    let _serial = crate::support::serial();
    let breaker = Breaker::new("single", Config::default());
    let seen = log(&breaker);
    breaker.force_open();
    assert_eq!(seen.lock().unwrap()[0].key, None);
    assert_eq!(breaker.explain().key, None);
    assert!(
        support::rejected(&breaker)
            .to_string()
            .starts_with("circuit breaker 'single' is forced open")
    );
}

#[test]
fn registry_listeners_are_told_the_key() {
    let _serial = crate::support::serial();
    let _lock = support::registry_lock();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    registry().on_state_change(move |e| {
        if e.name == "keyed_events.registry" {
            log.lock().unwrap().push(e.key.clone());
        }
    });
    let tenants = registry()
        .family::<u64>("keyed_events.registry", || {
            Config::builder().failures(1).build().unwrap()
        })
        .unwrap();
    let _ = tenants.call(&42, || Err::<(), _>("down"));
    assert_eq!(*seen.lock().unwrap(), [Some("42".to_owned())]);
}

#[test]
fn the_tracing_event_of_a_change_has_a_key_field() {
    let _serial = crate::support::serial();
    let (hosts, _clock) = family("traced");
    let seen = support::capture::run(|| {
        let _ = hosts.call("down.example", || Err::<(), _>("refused"));
    });
    let change = seen
        .iter()
        .find(|s| {
            s.fields.get("message").map(String::as_str) == Some("circuit breaker state changed")
        })
        .expect("a state change was traced");
    assert_eq!(change.fields["name"], "traced");
    assert_eq!(change.fields["key"], "down.example");
    let failed = seen
        .iter()
        .find(|s| s.fields.get("message").map(String::as_str) == Some("call failed"))
        .expect("the failure was traced");
    assert_eq!(failed.fields["key"], "down.example");
    // A breaker of no family has no key field at all.
    let single = Breaker::new(
        "untraced-key",
        Config::builder().failures(1).build().unwrap(),
    );
    let seen = support::capture::run(|| single.force_open());
    assert!(seen.iter().all(|s| !s.fields.contains_key("key")));
}

#[test]
fn explain_and_a_rejection_name_the_key() {
    let _serial = crate::support::serial();
    let (hosts, _clock) = family("explained");
    // Tripped through an owned permit: the family never saw the failure.
    hosts
        .try_acquire("down.example")
        .unwrap()
        .record(Outcome::Failure);
    let why = hosts.get("down.example").unwrap().explain();
    assert_eq!(why.name, "explained");
    assert_eq!(why.key.as_deref(), Some("down.example"));
    assert!(
        why.to_string()
            .starts_with("key 'down.example': open since ")
    );
    // A rejection through a handle (not the family's methods) names it too.
    let rejected = hosts
        .get("down.example")
        .unwrap()
        .try_acquire()
        .unwrap_err();
    assert_eq!(rejected.key(), Some("down.example"));
    assert!(
        rejected
            .to_string()
            .starts_with("circuit breaker 'explained' for key 'down.example' is open")
    );
    match hosts.call("down.example", || Ok::<_, &str>(())) {
        Err(Error::Rejected(r)) => assert_eq!(r.key(), Some("down.example")),
        other => panic!("not rejected: {other:?}"),
    }
}

/// A key whose `Display` panics is named `<Display panicked>`, as the family's listings name
/// it, and its breaker still works.
#[test]
fn a_key_whose_display_panics_is_named_display_panicked() {
    let _serial = crate::support::serial();
    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Bad;
    impl std::fmt::Display for Bad {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            panic!("no display")
        }
    }
    let clock = ManualClock::new();
    let config = Config::builder().failures(1).clock(clock).build().unwrap();
    let map: BreakerMap<Bad> = BreakerMap::new("bad-keys", config);
    let breaker = map.breaker(&Bad);
    let seen = log(&breaker);
    let _ = map.call(&Bad, || Err::<(), _>("down"));
    assert_eq!(
        seen.lock().unwrap()[0].key.as_deref(),
        Some("<Display panicked>")
    );
}

#[cfg(feature = "serde")]
mod wire {
    use super::*;

    #[test]
    fn an_event_without_a_key_keeps_its_form_and_one_with_a_key_adds_a_field() {
        let _serial = crate::support::serial();
        let single = Breaker::new("wire", Config::default());
        let seen = log(&single);
        single.force_open();
        let event = seen.lock().unwrap()[0].clone();
        let json = serde_json::to_value(&event).unwrap();
        assert!(json.get("key").is_none(), "{json}");
        // The form of earlier releases, with no key, reads back as no key.
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);

        let (hosts, _clock) = family("wire-keyed");
        let b = hosts.breaker("a b/c");
        let seen = log(&b);
        b.force_open();
        let event = seen.lock().unwrap()[0].clone();
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["key"], "a b/c");
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), event);
    }
}
