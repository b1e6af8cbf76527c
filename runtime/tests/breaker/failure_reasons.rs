//! A classifier's reason for a failure is the breaker's last failure: in `last_failure()`,
//! `metrics()`, the opening's event, `explain()` and a rejection's text. (`HttpClassifier`'s
//! reasons are tested in `breakerbox-http`, http/tests/reasons.rs.)

use std::time::Duration;

use breakerbox_runtime::{BreakerMap, Config, FailureReason, KeyQuery, Outcome, State};

use crate::support::{breaker, events, rejected};

#[test]
fn a_reason_is_the_last_failure_everywhere_it_shows() {
    let (b, _clock) = breaker(Config::builder().failures(1));
    let seen = events(&b);
    let r = b.call_with(|| "<html>", |_| Outcome::failure_with("not JSON"));
    assert_eq!(r.unwrap(), "<html>");
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.last_failure().as_deref(), Some("not JSON"));
    assert_eq!(b.metrics().last_failure.as_deref(), Some("not JSON"));
    assert_eq!(seen.lock().unwrap()[0].failure.as_deref(), Some("not JSON"));
    assert!(
        b.explain()
            .to_string()
            .contains("; last failure: 'not JSON'")
    );
    assert!(
        rejected(&b)
            .to_string()
            .ends_with("(last failure: not JSON)")
    );
}

#[test]
fn a_calls_own_error_wins_over_the_reason() {
    let (b, _clock) = breaker(Config::builder().failures(1));
    b.try_acquire()
        .unwrap()
        .record_with(Outcome::failure_with("a reason"), Some(&"the error"));
    assert_eq!(b.last_failure().as_deref(), Some("the error"));
}

#[test]
fn a_trip_with_a_reason_opens_for_its_time_and_keeps_the_reason() {
    let (b, _clock) = breaker(Config::builder().failures(5));
    let seen = events(&b);
    let pause = Duration::from_secs(6);
    b.call_with(
        || 503,
        |_| Outcome::trip_for_with(pause, FailureReason::http_retry_after(503, pause)),
    )
    .unwrap();
    assert_eq!(b.metrics().retry_after, Some(pause));
    let opened = seen.lock().unwrap()[0].clone();
    assert_eq!(
        opened.failure.as_deref(),
        Some("HTTP 503 (Retry-After 6 s)")
    );
    // A change that no failure caused has none.
    b.reset();
    assert_eq!(seen.lock().unwrap()[1].failure, None);
}

#[test]
fn a_keys_last_failure_is_listed_with_it() {
    let config = Config::builder().failures(1).build().unwrap();
    let hosts: BreakerMap<String> = BreakerMap::new("reasons", config);
    let _ = hosts.call_with("a.example", || (), |_| Outcome::failure_with("timeout"));
    let page = hosts.key_page(&KeyQuery::default());
    assert_eq!(page.keys[0].last_failure.as_deref(), Some("timeout"));
    assert_eq!(
        hosts.snapshot(5).top_open[0].last_failure.as_deref(),
        Some("timeout")
    );
}
