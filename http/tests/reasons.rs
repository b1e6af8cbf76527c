//! `HttpClassifier`'s failures say which status and which pause: `HTTP 500`, `HTTP 503
//! (Retry-After 6 s)`, kept as the breaker's last failure and shown in its rejections.

use ::http::header::RETRY_AFTER;
use ::http::{HeaderMap, HeaderValue, StatusCode};
use breakerbox_http::HttpClassifier;
use breakerbox_runtime::{Breaker, Config, ConfigBuilder, ManualClock, Outcome, Rejected};
use std::time::Duration;
use std::time::SystemTime;

#[test]
fn http_statuses_say_which_status_and_which_pause() {
    let classify = HttpClassifier::new();
    let now = SystemTime::now();
    let mut headers = HeaderMap::new();
    let failed = classify.outcome(StatusCode::INTERNAL_SERVER_ERROR, &headers, now);
    assert_eq!(failed, Outcome::Failure);
    assert_eq!(failed.reason().unwrap().to_string(), "HTTP 500");
    // A 503 without Retry-After fails; with one, it trips for that long.
    let unavailable = classify.outcome(StatusCode::SERVICE_UNAVAILABLE, &headers, now);
    assert_eq!(unavailable.reason().unwrap().to_string(), "HTTP 503");
    headers.insert(RETRY_AFTER, HeaderValue::from_static("6"));
    let trip = classify.outcome(StatusCode::SERVICE_UNAVAILABLE, &headers, now);
    assert_eq!(trip, Outcome::TripFor(Duration::from_secs(6)));
    assert_eq!(
        trip.reason().unwrap().to_string(),
        "HTTP 503 (Retry-After 6 s)"
    );
    // Capped pause, the server's ask in the reason.
    headers.insert(RETRY_AFTER, HeaderValue::from_static("3600"));
    let capped = classify.max_retry_after(Duration::from_secs(60)).outcome(
        StatusCode::SERVICE_UNAVAILABLE,
        &headers,
        now,
    );
    assert_eq!(capped, Outcome::TripFor(Duration::from_secs(60)));
    assert_eq!(
        capped.reason().unwrap().to_string(),
        "HTTP 503 (Retry-After 1 h)"
    );
    assert_eq!(classify.status(StatusCode::OK).reason(), None);
    assert_eq!(
        Outcome::from(StatusCode::BAD_GATEWAY)
            .reason()
            .unwrap()
            .to_string(),
        "HTTP 502"
    );
}

#[test]
fn a_breaker_tripped_by_http_answers_names_the_status() {
    let (b, _clock) = breaker(Config::builder().failures(2));
    let classify = HttpClassifier::new();
    let headers = HeaderMap::new();
    for _ in 0..2 {
        b.call_with(
            || StatusCode::INTERNAL_SERVER_ERROR,
            |s| classify.outcome(*s, &headers, SystemTime::now()),
        )
        .unwrap();
    }
    assert_eq!(b.last_failure().as_deref(), Some("HTTP 500"));
    assert!(
        rejected(&b)
            .to_string()
            .ends_with("(last failure: HTTP 500)")
    );
}

/// A breaker on a manual clock.
fn breaker(builder: ConfigBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let config = builder.clock(clock.clone()).build().expect("valid config");
    (Breaker::new("b", config), clock)
}

/// The rejection of a call `b` refuses.
fn rejected(b: &Breaker) -> Rejected {
    match b.try_acquire() {
        Ok(p) => panic!("admitted {p:?} in state {:?}", b.state()),
        Err(r) => r,
    }
}
