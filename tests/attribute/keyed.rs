//! `#[circuit_breaker(key = …)]`: a breaker per distinct key, end to end.
//!
//! Every test uses its own family name (tests run in parallel in one process) and a
//! `ManualClock` registered for that name before the first call, so nothing sleeps.

use std::cell::Cell;
use std::fmt;
use std::time::Duration;

use crate::support::manual_clock;
use breakerbox::{
    BreakerMap, Config, FallbackReason, Outcome, Rejected, State, circuit_breaker, registry,
};

/// Unlike `support::ApiError`, comparable: a rejection is kept as its message.
#[derive(Debug, PartialEq)]
enum ApiError {
    Down,
    NotFound,
    Rejected(String),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Down => f.write_str("service down"),
            ApiError::NotFound => f.write_str("not found"),
            ApiError::Rejected(r) => f.write_str(r),
        }
    }
}

impl From<Rejected> for ApiError {
    fn from(rejected: Rejected) -> Self {
        ApiError::Rejected(rejected.to_string())
    }
}

thread_local! {
    static RAN: Cell<u32> = const { Cell::new(0) };
}

fn ran() -> u32 {
    RAN.with(Cell::get)
}

fn count_run() {
    RAN.with(|r| r.set(r.get() + 1));
}

fn family(name: &str) -> BreakerMap<String> {
    registry()
        .family::<String>(name, Config::default)
        .expect("a family of `String` keys")
}

fn state(name: &str, key: &str) -> State {
    family(name).get(key).expect("the key is held").state()
}

struct Url {
    host: String,
}

impl Url {
    fn host_str(&self) -> Option<&str> {
        Some(self.host.as_str()).filter(|h| !h.is_empty())
    }
}

#[circuit_breaker(
    name = "keyed_hosts",
    key = url.host_str().unwrap_or(""),
    failures = 2,
    open_for = "10s"
)]
fn fetch(url: &Url, up: bool) -> Result<String, ApiError> {
    count_run();
    if up {
        Ok(format!("body of {}", url.host))
    } else {
        Err(ApiError::Down)
    }
}

fn url(host: &str) -> Url {
    Url {
        host: host.to_owned(),
    }
}

#[test]
fn two_keys_trip_independently() {
    let clock = manual_clock("keyed_hosts");
    let (down, up) = (url("down.example"), url("up.example"));
    for _ in 0..2 {
        assert_eq!(fetch(&down, false), Err(ApiError::Down));
    }
    assert_eq!(state("keyed_hosts", "down.example"), State::Open);
    // The other host has its own closed breaker.
    assert_eq!(fetch(&up, true).unwrap(), "body of up.example");
    assert_eq!(fetch(&up, false), Err(ApiError::Down));
    assert_eq!(state("keyed_hosts", "up.example"), State::Closed);
    // The open key rejects without running the body, and names the family and the key.
    let before = ran();
    match fetch(&down, true) {
        Err(ApiError::Rejected(message)) => assert_eq!(
            message,
            "circuit breaker 'keyed_hosts' for key 'down.example' is open; retry in 10.0s \
             (last failure: service down)"
        ),
        other => panic!("expected a rejection, got {other:?}"),
    }
    assert_eq!(ran(), before);
    // After `open_for`, a probe closes it again.
    clock.advance(Duration::from_secs(10));
    assert_eq!(fetch(&down, true).unwrap(), "body of down.example");
    assert_eq!(state("keyed_hosts", "down.example"), State::Closed);
    let listed = registry().families();
    let hosts = listed.iter().find(|f| f.name == "keyed_hosts").unwrap();
    let keys: Vec<&str> = hosts.keys.iter().map(|k| k.key.as_str()).collect();
    assert_eq!(keys, ["down.example", "up.example"]);
}

#[circuit_breaker(
    name = "keyed_fallback",
    key = tenant,
    failures = 1,
    open_for = "1m",
    fallback = cached
)]
fn quota(tenant: String, amount: u32) -> Result<u32, ApiError> {
    let _moved: String = tenant; // the body may move what the key borrowed
    if amount == 0 {
        Err(ApiError::Down)
    } else {
        Ok(amount)
    }
}

fn cached(tenant: String, amount: u32) -> Result<u32, ApiError> {
    Ok(u32::try_from(tenant.len()).unwrap() * 1000 + amount)
}

#[test]
fn fallback_gets_the_arguments_of_the_rejected_call() {
    let _clock = manual_clock("keyed_fallback");
    assert_eq!(quota("acme".to_owned(), 0), Err(ApiError::Down));
    // "acme" is open: the fallback answers with this call's arguments.
    assert_eq!(quota("acme".to_owned(), 7), Ok(4007));
    // Another tenant is served by the body.
    assert_eq!(quota("initech".to_owned(), 7), Ok(7));
}

#[circuit_breaker(
    name = "keyed_reason",
    key = shard,
    failures = 1,
    fallback_with_reason = with_reason
)]
fn read_shard(shard: &str) -> Result<String, ApiError> {
    Err(ApiError::Down).map(|()| shard.to_owned())
}

fn with_reason(shard: &str, reason: FallbackReason) -> Result<String, ApiError> {
    let why = match reason {
        FallbackReason::Rejected(r) => format!("rejected by {} for {:?}", r.name(), r.key()),
        _ => "other".to_owned(),
    };
    Ok(format!("{shard}: {why}"))
}

#[test]
fn fallback_with_reason_gets_the_rejection() {
    let _clock = manual_clock("keyed_reason");
    assert_eq!(read_shard("s1"), Err(ApiError::Down));
    assert_eq!(
        read_shard("s1").unwrap(),
        "s1: rejected by keyed_reason for Some(\"s1\")"
    );
    assert_eq!(read_shard("s2"), Err(ApiError::Down));
}

fn not_found_is_fine(result: &Result<u32, ApiError>) -> Outcome {
    match result {
        Ok(_) | Err(ApiError::NotFound) => Outcome::Success,
        Err(_) => Outcome::Failure,
    }
}

#[circuit_breaker(
    name = "keyed_classify",
    key = user,
    failures = 1,
    classify = not_found_is_fine,
    max_keys = 50,
    idle_for = "1m"
)]
fn lookup(user: &str, found: bool) -> Result<u32, ApiError> {
    let _ = user;
    if found {
        Ok(1)
    } else {
        Err(ApiError::NotFound)
    }
}

#[test]
fn classify_judges_each_key_and_family_keys_configure_the_family() {
    let _clock = manual_clock("keyed_classify");
    for _ in 0..3 {
        assert_eq!(lookup("ann", false), Err(ApiError::NotFound));
    }
    assert_eq!(state("keyed_classify", "ann"), State::Closed);
    let f = family("keyed_classify");
    assert_eq!(f.config().max_keys(), 50);
    assert_eq!(f.config().idle_for(), Duration::from_secs(60));
    assert_eq!(f.config().failures(), Some(1));
}

struct Client {
    region: String,
}

impl Client {
    #[circuit_breaker(
        name = "keyed_async",
        key = format!("{}/{tenant_id}", self.region),
        failures = 1,
        open_for = "5s"
    )]
    async fn bill(&self, tenant_id: u64, ok: bool) -> Result<u64, ApiError> {
        std::future::ready(()).await;
        if ok {
            Ok(tenant_id)
        } else {
            Err(ApiError::Down)
        }
    }
}

#[tokio::test]
async fn async_keys_trip_independently() {
    let clock = manual_clock("keyed_async");
    let client = Client {
        region: "eu".to_owned(),
    };
    assert_eq!(client.bill(1, false).await, Err(ApiError::Down));
    assert!(matches!(
        client.bill(1, true).await,
        Err(ApiError::Rejected(_))
    ));
    assert_eq!(client.bill(2, true).await, Ok(2));
    assert_eq!(state("keyed_async", "eu/1"), State::Open);
    assert_eq!(state("keyed_async", "eu/2"), State::Closed);
    clock.advance(Duration::from_secs(5));
    assert_eq!(client.bill(1, true).await, Ok(1));
}

/// A keyed function's timeout counts against its key: a failure there, and a timeout in the
/// key's and the family's counts, timed as its timeout.
#[cfg(feature = "tokio")]
mod keyed_timeout {
    use super::family;
    use crate::support::ApiError;
    use breakerbox::{State, circuit_breaker};

    #[circuit_breaker(name = "keyed_timeout", key = host, failures = 2, timeout = "500ms", latency = true)]
    async fn fetch(host: &str, hang: bool) -> Result<(), ApiError> {
        if hang {
            std::future::pending::<()>().await;
        }
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn a_keys_timeouts_count_against_that_key() {
        fetch("slow.example", false).await.unwrap();
        for _ in 0..2 {
            assert!(matches!(
                fetch("slow.example", true).await,
                Err(ApiError::Timeout(_))
            ));
        }
        fetch("fast.example", false).await.unwrap();
        let hosts = family("keyed_timeout");
        let slow = hosts.get("slow.example").unwrap();
        assert_eq!(slow.state(), State::Open);
        let m = slow.metrics();
        assert_eq!((m.successes, m.failures, m.timeouts), (1, 2, 2));
        assert_eq!(hosts.get("fast.example").unwrap().metrics().timeouts, 0);
        let s = hosts.snapshot(10);
        assert_eq!((s.totals.failures, s.totals.timeouts), (2, 2));
        // Over the family's 4 calls, p99 is a 500 ms timeout (within 6.25%).
        let l = s.latency.unwrap();
        assert_eq!(l.recent_calls, 4);
        let p99 = l.p99.unwrap().as_secs_f64();
        assert!((p99 - 0.5).abs() <= 0.5 / 16.0, "{l:?}");
    }
}

// --- Conflicts: `registry().check()` knows keyed attributes from the start.

/// This file, to find the line of each attribute.
const SOURCE: &str = include_str!("keyed.rs");

/// `#[circuit_breaker(key = …)] at <this file>:<line>` for the only line that is `text`.
fn keyed_attribute_at(text: &str) -> String {
    let lines: Vec<usize> = SOURCE
        .lines()
        .enumerate()
        .filter(|(_, line)| line.trim() == text)
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "{text:?} is on lines {lines:?}");
    format!("#[circuit_breaker(key = …)] at {}:{}", file!(), lines[0])
}

#[circuit_breaker(name = "keyed_twice", key = host, failures = 2)]
fn keyed_twice_a(host: &str) -> Result<(), ApiError> {
    let _ = host;
    Ok(())
}

#[circuit_breaker(name = "keyed_twice", key = host, failures = 5)]
fn keyed_twice_b(host: &str) -> Result<(), ApiError> {
    let _ = host;
    Ok(())
}

#[circuit_breaker(name = "keyed_and_plain", key = host)]
fn keyed_and_plain_keyed(host: &str) -> Result<(), ApiError> {
    let _ = host;
    Ok(())
}

#[circuit_breaker(name = "keyed_and_plain")]
fn keyed_and_plain_single() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn two_keyed_attributes_with_different_configs_are_reported() {
    let conflicts = registry().check().unwrap_err();
    let twice = conflicts
        .conflicts()
        .iter()
        .find(|c| c.name() == "keyed_twice")
        .expect("keyed_twice reported");
    assert!(!twice.keyed_and_unkeyed());
    assert_eq!(twice.differences(), ["failures"]);
    let a =
        keyed_attribute_at(r#"#[circuit_breaker(name = "keyed_twice", key = host, failures = 2)]"#);
    let b =
        keyed_attribute_at(r#"#[circuit_breaker(name = "keyed_twice", key = host, failures = 5)]"#);
    assert_eq!(
        twice.to_string(),
        format!(
            "circuit breaker 'keyed_twice' is given different configs:\n  {a}: failures = 2\n  {b}: failures = 5"
        )
    );
    // Reported before either is called; calling them changes nothing.
    keyed_twice_a("x").unwrap();
    keyed_twice_b("x").unwrap();
}

#[test]
fn a_keyed_and_an_unkeyed_breaker_sharing_a_name_are_reported() {
    let conflicts = registry().check().unwrap_err();
    let mixed = conflicts
        .conflicts()
        .iter()
        .find(|c| c.name() == "keyed_and_plain")
        .expect("keyed_and_plain reported");
    assert!(mixed.keyed_and_unkeyed());
    assert!(mixed.differences().is_empty());
    let keyed = keyed_attribute_at(r#"#[circuit_breaker(name = "keyed_and_plain", key = host)]"#);
    let single_line = SOURCE
        .lines()
        .position(|l| l.trim() == r#"#[circuit_breaker(name = "keyed_and_plain")]"#)
        .unwrap()
        + 1;
    let single = format!("#[circuit_breaker] at {}:{single_line}", file!());
    // Sorted by site: attributes before keyed attributes.
    assert_eq!(
        mixed.to_string(),
        format!(
            "circuit breaker 'keyed_and_plain' is both a keyed family and a single breaker; give \
             one of them another name:\n  {single}\n  {keyed}"
        )
    );
    keyed_and_plain_keyed("x").unwrap();
    keyed_and_plain_single().unwrap();
}

#[test]
fn a_family_and_a_breaker_made_at_run_time_under_one_name_are_reported() {
    let family_line = line!() + 1;
    let tenants = registry().family::<u64>("keyed_runtime_clash", Config::default);
    tenants.unwrap().call(&7, || Ok::<_, ApiError>(())).unwrap();
    let breaker_line = line!() + 1;
    let single = registry().get_or_create("keyed_runtime_clash", Config::default);
    single.call(|| Ok::<_, ApiError>(())).unwrap();
    let conflicts = registry().check().unwrap_err();
    let clash = conflicts
        .conflicts()
        .iter()
        .find(|c| c.name() == "keyed_runtime_clash")
        .expect("keyed_runtime_clash reported");
    assert!(clash.keyed_and_unkeyed());
    assert_eq!(
        clash.to_string(),
        format!(
            "circuit breaker 'keyed_runtime_clash' is both a keyed family and a single breaker; \
             give one of them another name:\n  get_or_create at {f}:{breaker_line}\n  \
             Registry::family at {f}:{family_line}",
            f = file!()
        )
    );
}
