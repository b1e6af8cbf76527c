//! A classifier's reason for a failure is the breaker's last failure: in `last_failure()`,
//! `metrics()`, the opening's event, `explain()` and a rejection's text; `HttpClassifier` gives
//! `HTTP 500` and `HTTP 503 (Retry-After 6 s)`.

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

#[cfg(feature = "http")]
mod http {
    use super::*;
    use ::http::header::RETRY_AFTER;
    use ::http::{HeaderMap, HeaderValue, StatusCode};
    use breakerbox_runtime::http::HttpClassifier;
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
}
