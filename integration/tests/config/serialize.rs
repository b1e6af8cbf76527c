//! `serde`: configs, snapshots and events serialize and come back; a config file loads.

use std::time::Duration;

use breakerbox::{Breaker, Config, Event, Metrics, Reason, State, Window, registry};

fn configs() -> Vec<Config> {
    vec![
        Config::default(),
        Config::builder()
            .failures(3)
            .failures_within(Duration::from_secs(10))
            .open_for(Duration::from_millis(1500))
            .backoff(2.0)
            .jitter(0.1)
            .max_concurrent(8)
            .build()
            .unwrap(),
        Config::builder()
            .failure_rate(50)
            .window(Window::Time(Duration::from_secs(10)))
            .min_calls(20)
            .slow(Duration::from_millis(250))
            .slow_rate(80)
            .half_open_calls(3)
            .successes(2)
            .probe_timeout(Duration::from_secs(5))
            .timeout(Duration::from_millis(750))
            .build()
            .unwrap(),
    ]
}

#[test]
fn configs_round_trip_through_toml_and_json() {
    for config in configs() {
        let toml = toml::to_string(&config).unwrap();
        assert_eq!(toml::from_str::<Config>(&toml).unwrap(), config, "{toml}");
        let json = serde_json::to_string(&config).unwrap();
        assert_eq!(
            serde_json::from_str::<Config>(&json).unwrap(),
            config,
            "{json}"
        );
    }
}

#[test]
fn configs_read_as_the_attribute_writes_them() {
    let json = serde_json::to_value(&configs()[2]).unwrap();
    assert_eq!(json["window"], "10s");
    assert_eq!(json["slow"], "250ms");
    assert_eq!(json["failure_rate"], 50);
    assert!(
        json.get("failures").is_none(),
        "a rate config has no `failures`"
    );

    let config: Config = toml::from_str("failures = 2\nopen_for = \"250ms\"\n").unwrap();
    assert_eq!(config.failures(), Some(2));
    assert_eq!(config.open_for(), Duration::from_millis(250));
}

#[test]
fn deserialized_configs_are_validated() {
    let err = serde_json::from_str::<Config>(r#"{"failures": 0}"#).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`failures` must be at least 1, got 0"),
        "{err}"
    );
    let err = serde_json::from_str::<Config>(r#"{"open_for": 5}"#).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`open_for` must be a duration with a unit"),
        "{err}"
    );
    let err = serde_json::from_str::<Config>(r#"{"retries": 5}"#).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`retries` unknown key; valid keys: failures,"),
        "{err}"
    );
}

#[test]
fn windows_and_states() {
    assert_eq!(serde_json::to_string(&Window::Calls(100)).unwrap(), "100");
    assert_eq!(
        serde_json::to_string(&Window::Time(Duration::from_secs(10))).unwrap(),
        r#""10s""#
    );
    assert_eq!(
        serde_json::from_str::<Window>(r#""10s""#).unwrap(),
        Window::Time(Duration::from_secs(10))
    );
    for state in [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ] {
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(json, format!("\"{state}\""));
        assert_eq!(serde_json::from_str::<State>(&json).unwrap(), state);
    }
    assert!(serde_json::from_str::<State>(r#""ajar""#).is_err());
}

#[test]
fn metrics_and_registry_snapshots_serialize() {
    let clock = breakerbox::ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let breaker = Breaker::new("serde-metrics", config);
    let _ = breaker.call(|| Err::<(), _>("down"));
    let json = serde_json::to_value(breaker.metrics()).unwrap();
    assert_eq!(json["name"], "serde-metrics");
    assert_eq!(json["state"], "open");
    assert_eq!(json["failures"], 1);
    clock.advance(Duration::from_millis(1500));
    let json = serde_json::to_value(breaker.metrics()).unwrap();
    assert_eq!(json["retry_after"], "58.5s");
    assert_eq!(json["time_in_state"], "1.5s");
    let back: Metrics = serde_json::from_value(json).unwrap();
    assert_eq!(back, breaker.metrics());

    let _ = registry().get_or_create("serde-snapshot", Config::default);
    let all = serde_json::to_value(registry().snapshot()).unwrap();
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|m| m["name"] == "serde-snapshot")
    );
}

#[test]
fn events_serialize_for_notifications() {
    let breaker = Breaker::new("serde-events", Config::default());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    breaker.on_state_change(move |e| log.lock().unwrap().push(serde_json::to_value(e).unwrap()));
    breaker.trip_for(Duration::from_secs(30));
    let events = seen.lock().unwrap();
    assert_eq!(events[0]["name"], "serde-events");
    assert_eq!(events[0]["from"], "closed");
    assert_eq!(events[0]["to"], "open");
    assert_eq!(
        events[0]["reason"],
        serde_json::json!({ "trip_for": "30s" })
    );
    let back: Event = serde_json::from_value(events[0].clone()).unwrap();
    assert_eq!(back.reason, Reason::TripFor(Duration::from_secs(30)));
}

#[test]
fn load_toml_configures_breakers_from_a_file() {
    let path = std::env::temp_dir().join(format!("breakerbox-serde-{}.toml", std::process::id()));
    std::fs::write(
        &path,
        "[breakers.serde-file]\ndynamic = true\nfailures = 2\nopen_for = \"5s\"\n\n[breakers.serde-bad]\ndynamic = true\nfailures = 0\n",
    )
    .unwrap();
    let err = registry().load_toml(&path).unwrap_err();
    assert_eq!(err.line(), Some(8));
    assert_eq!(err.key(), Some("failures"));
    assert!(err.to_string().starts_with(&format!(
        "{}:8: [breakers.serde-bad] `failures`",
        path.display()
    )));

    std::fs::write(
        &path,
        "[breakers.serde-file]\ndynamic = true\nfailures = 2\nopen_for = \"5s\"\n",
    )
    .unwrap();
    assert_eq!(registry().load_toml(&path).unwrap(), ["serde-file"]);
    let breaker = registry().get_or_create("serde-file", Config::default);
    assert_eq!(breaker.config().failures(), Some(2));
    assert_eq!(breaker.config().open_for(), Duration::from_secs(5));

    // A table must name a known breaker (or say `dynamic = true`).
    std::fs::write(&path, "[breakers.serde-fil]\nfailures = 2\n").unwrap();
    let err = registry().load_toml(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(
        err.to_string().starts_with(&format!(
            "{}:1: no breaker named `serde-fil`; did you mean `serde-file`?",
            path.display()
        )),
        "{err}"
    );
}

/// What serializes deserializes, durations past `u64::MAX` nanoseconds included.
#[test]
fn durations_past_u64_nanoseconds_round_trip() {
    let config = Config::builder()
        .open_for(Duration::MAX)
        .failures_within(Duration::new(u64::MAX, 1))
        .build()
        .unwrap();
    let toml = toml::to_string(&config).unwrap();
    assert!(
        toml.contains("open_for = \"18446744073709551615.999999999s\""),
        "{toml}"
    );
    assert_eq!(toml::from_str::<Config>(&toml).unwrap(), config, "{toml}");
    let json = serde_json::to_string(&config).unwrap();
    assert_eq!(serde_json::from_str::<Config>(&json).unwrap(), config);

    let breaker = Breaker::new("serde-huge", Config::default());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    breaker.on_state_change(move |e| log.lock().unwrap().push(e.clone()));
    breaker.trip_for(Duration::MAX);
    let event = seen.lock().unwrap()[0].clone();
    assert_eq!(event.reason, Reason::TripFor(Duration::MAX));
    let json = serde_json::to_string(&event).unwrap();
    assert_eq!(
        serde_json::from_str::<Event>(&json).unwrap(),
        event,
        "{json}"
    );
    let metrics = breaker.metrics();
    let json = serde_json::to_string(&metrics).unwrap();
    assert_eq!(serde_json::from_str::<Metrics>(&json).unwrap(), metrics);
}

/// Serialized durations are zero or more; a `Config`'s keys take the attribute's text.
#[test]
fn serialized_durations_read_as_the_attribute_writes_them() {
    let zero: Window = serde_json::from_str(r#""0s""#).unwrap();
    assert_eq!(zero, Window::Time(Duration::ZERO));
    let err = serde_json::from_str::<Config>(r#"{"open_for": "2 sec"}"#).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "`open_for` unexpected space in duration \"2 sec\": write it without spaces, like \"2s\""
        ),
        "{err}"
    );
    let err = serde_json::from_str::<Config>(r#"{"failure": 5}"#).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("`failure` unknown key; did you mean `failures`? valid keys: failures,"),
        "{err}"
    );
    let err = serde_json::from_str::<Config>(r#"{"fallback": "cached"}"#).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "`fallback` belongs to the function's `#[circuit_breaker(...)]` attribute"
        ),
        "{err}"
    );
    assert_eq!(
        Reason::TripFor(Duration::from_secs(120)).to_string(),
        "tripped for 2m"
    );
}

#[test]
fn shared_state_travels_as_json() {
    let clock = breakerbox::ManualClock::new();
    let config = || Config::builder().clock(clock.clone()).build().unwrap();
    let here = Breaker::new("serde-shared-here", config());
    here.trip_for(Duration::from_secs(30));
    clock.advance(Duration::from_millis(2500));
    let json = serde_json::to_string(&here.export_state()).unwrap();
    assert_eq!(
        json,
        r#"{"state":"open","open_remaining":"27.5s","reopens":0}"#
    );

    let there = Breaker::new("serde-shared-there", config());
    there.import_state(&serde_json::from_str(&json).unwrap());
    assert_eq!(there.state(), State::Open);
    assert_eq!(
        there.metrics().retry_after,
        Some(Duration::from_millis(27_500))
    );
}
