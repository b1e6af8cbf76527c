//! What serializes deserializes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox::{Breaker, Config, Event, ManualClock, Metrics, Reason, State};

#[test]
fn config_with_duration_max_round_trips() {
    let config = Config::builder()
        .open_for(Duration::MAX)
        .max_open_for(Duration::MAX)
        .probe_timeout(Duration::MAX)
        .failures_within(Duration::MAX)
        .build()
        .expect("Duration::MAX is a valid open time");
    let json = serde_json::to_string(&config).unwrap();
    let back: Config = serde_json::from_str(&json).expect("what serializes deserializes");
    assert_eq!(back, config);
    #[derive(serde::Serialize, serde::Deserialize)]
    struct File {
        config: Config,
    }
    let toml_text = toml::to_string(&File {
        config: config.clone(),
    })
    .unwrap();
    let back: File = toml::from_str(&toml_text).expect("TOML too");
    assert_eq!(back.config, config);
}

#[test]
fn event_of_a_huge_trip_for_round_trips() {
    let clock = ManualClock::new();
    clock.advance(Duration::from_secs(u64::MAX / 2_000_000_000));
    let breaker = Breaker::new(
        "round-trip-event",
        Config::builder().clock(clock.clone()).build().unwrap(),
    );
    let seen: Arc<Mutex<Vec<Event>>> = Arc::default();
    let s = seen.clone();
    breaker.on_state_change(move |e| s.lock().unwrap().push(e.clone()));
    breaker.trip_for(Duration::MAX);
    breaker.trip_for(Duration::new(u64::MAX, 999_999_999));
    breaker.reset();
    let events = seen.lock().unwrap().clone();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].reason, Reason::TripFor(Duration::MAX));
    for e in &events {
        let json = serde_json::to_string(e).unwrap();
        let back: Event = serde_json::from_str(&json).expect("an event round trips");
        assert_eq!(&back, e);
    }
    let m = breaker.metrics();
    let back: Metrics = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
    assert_eq!(back, m);
    breaker.trip_for(Duration::MAX);
    let m = breaker.metrics();
    let back: Metrics = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
    assert_eq!(back, m);
}

#[test]
fn shared_state_and_huge_durations() {
    let s = breakerbox::SharedState::new(State::Open, Some(Duration::MAX), u32::MAX);
    let back: breakerbox::SharedState =
        serde_json::from_str(&serde_json::to_string(&s).unwrap()).expect("round trips");
    assert_eq!(back, s);
    // Too long for a Duration: an error, not a panic or a wrap.
    let r: Result<Config, _> = serde_json::from_str(r#"{"open_for": "18446744073709551616s"}"#);
    assert!(r.is_err());
    let r: Result<Config, _> =
        serde_json::from_str(r#"{"open_for": "999999999999999999999999999999h"}"#);
    assert!(r.is_err());
    // The longest one there is, written as it serializes.
    let r: Config = serde_json::from_str(r#"{"open_for": "18446744073709551615.999999999s", "max_open_for": "18446744073709551615.999999999s"}"#)
        .expect("Duration::MAX reads back");
    assert_eq!(r.open_for(), Duration::MAX);
}
