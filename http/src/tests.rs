//! The classifier's and the `Retry-After` parser's tests.

use super::*;
use std::time::UNIX_EPOCH;

/// 2015-10-21 07:26:40 GMT.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_445_412_400)
}

fn headers(retry_after: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(RETRY_AFTER, retry_after.parse().unwrap());
    headers
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap()
}

#[test]
fn defaults_by_class() {
    let c = HttpClassifier::new();
    let none = HeaderMap::new();
    for (code, outcome) in [
        (100, Outcome::Success),
        (200, Outcome::Success),
        (204, Outcome::Success),
        (304, Outcome::Success),
        (399, Outcome::Success),
        (400, Outcome::Ignored),
        (404, Outcome::Ignored),
        (429, Outcome::Ignored),
        (499, Outcome::Ignored),
        (500, Outcome::Failure),
        (503, Outcome::Failure),
        (599, Outcome::Failure),
        (600, Outcome::Failure),
        (999, Outcome::Failure),
    ] {
        assert_eq!(c.status(status(code)), outcome, "{code}");
        assert_eq!(c.outcome(status(code), &none, now()), outcome, "{code}");
        assert_eq!(Outcome::from(status(code)), outcome, "{code}");
    }
}

#[test]
fn retry_after_trips_429_and_503_only() {
    let c = HttpClassifier::new();
    let h = headers("30");
    let trip = Outcome::TripFor(Duration::from_secs(30));
    assert_eq!(c.outcome(status(429), &h, now()), trip);
    assert_eq!(c.outcome(status(503), &h, now()), trip);
    assert_eq!(c.outcome(status(500), &h, now()), Outcome::Failure);
    assert_eq!(c.outcome(status(404), &h, now()), Outcome::Ignored);
    assert_eq!(c.outcome(status(200), &h, now()), Outcome::Success);
    // A date form, measured from `now`.
    let h = headers("Wed, 21 Oct 2015 07:28:00 GMT");
    assert_eq!(
        c.outcome(status(503), &h, now()),
        Outcome::TripFor(Duration::from_secs(80))
    );
}

#[test]
fn a_retry_after_that_is_zero_past_or_garbage_leaves_the_status_verdict() {
    let c = HttpClassifier::new();
    for value in ["0", "Tue, 20 Oct 2015 07:28:00 GMT", "soon", "1.5", ""] {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, value.parse().unwrap());
        assert_eq!(
            c.outcome(status(503), &h, now()),
            Outcome::Failure,
            "{value:?}"
        );
        assert_eq!(
            c.outcome(status(429), &h, now()),
            Outcome::Ignored,
            "{value:?}"
        );
    }
}

#[test]
fn a_long_retry_after_is_capped() {
    let day = headers("86400");
    assert_eq!(
        HttpClassifier::new().outcome(status(503), &day, now()),
        Outcome::TripFor(DEFAULT_MAX_RETRY_AFTER)
    );
    let c = HttpClassifier::new().max_retry_after(Duration::from_secs(10));
    assert_eq!(
        c.outcome(status(503), &day, now()),
        Outcome::TripFor(Duration::from_secs(10))
    );
    let huge = headers(&"9".repeat(100));
    assert_eq!(
        c.outcome(status(429), &huge, now()),
        Outcome::TripFor(Duration::from_secs(10))
    );
}

#[test]
fn every_row_is_configurable_and_later_calls_win() {
    let c = HttpClassifier::new()
        .failure(StatusCode::TOO_MANY_REQUESTS)
        .ignore(500..=504)
        .success(503u16)
        .success(StatusCode::OK)
        .failure(404..405)
        .honour_retry_after(StatusCode::SERVICE_UNAVAILABLE, false)
        .honour_retry_after(500..600, true)
        .honour_retry_after(502, false);
    let none = HeaderMap::new();
    assert_eq!(c.outcome(status(429), &none, now()), Outcome::Failure);
    assert_eq!(c.outcome(status(500), &none, now()), Outcome::Ignored);
    assert_eq!(c.outcome(status(503), &none, now()), Outcome::Success);
    assert_eq!(c.outcome(status(505), &none, now()), Outcome::Failure);
    assert_eq!(c.outcome(status(404), &none, now()), Outcome::Failure);
    assert_eq!(c.outcome(status(405), &none, now()), Outcome::Ignored);
    let h = headers("5");
    let trip = Outcome::TripFor(Duration::from_secs(5));
    assert_eq!(
        c.outcome(status(503), &h, now()),
        trip,
        "500..600 after 503"
    );
    assert_eq!(
        c.outcome(status(502), &h, now()),
        Outcome::Ignored,
        "500..=504 ignored"
    );
    assert_eq!(c.outcome(status(429), &h, now()), trip);
    let never = c.honour_retry_after(100..=999, false);
    assert_eq!(never.outcome(status(429), &h, now()), Outcome::Failure);
}

#[test]
fn statuses_out_of_range_and_empty_ranges_change_nothing() {
    let c = HttpClassifier::new()
        .failure(0..=99)
        .failure(1000..=u16::MAX)
        .failure(-5..=99)
        .failure(1000..=i32::MAX)
        .failure(i32::MIN..-1)
        .failure(300..300)
        .failure(RangeInclusive::new(300, 299))
        .failure(0)
        .failure(-1)
        .failure(u16::MAX)
        .ignore(-10..=150);
    assert_eq!(c.status(status(200)), Outcome::Success);
    assert_eq!(c.status(status(300)), Outcome::Success);
    assert_eq!(c.status(status(100)), Outcome::Ignored);
    assert_eq!(c.status(status(150)), Outcome::Ignored);
    assert_eq!(c.status(status(151)), Outcome::Success);
    assert_eq!(c.status(status(999)), Outcome::Failure);
    for all in [
        HttpClassifier::new().failure(0..=u16::MAX),
        HttpClassifier::new().failure(i32::MIN..i32::MAX),
    ] {
        assert_eq!(all.status(status(100)), Outcome::Failure);
        assert_eq!(all.status(status(999)), Outcome::Failure);
    }
}

#[test]
fn a_plain_value_of_368_bytes() {
    assert_eq!(size_of::<HttpClassifier>(), 368);
}

#[test]
fn debug_shows_runs() {
    assert_eq!(
        format!("{:?}", HttpClassifier::new().success(404)),
        "HttpClassifier { statuses: {100..=399: Success, 400..=403: Ignored, \
         404..=404: Success, 405..=499: Ignored, 500..=999: Failure}, \
         retry_after_on: [429, 503], max_retry_after: 300s }"
    );
}

#[cfg(feature = "tower")]
#[test]
fn classifies_the_responses_of_a_tower_service() {
    use breakerbox_runtime::{Breaker, Config, ManualClock, State};
    use breakerbox_tower::CircuitBreakerLayer;
    use core::future::Future;
    use core::task::{Context, Poll, Waker};
    use tower::{Layer, Service};

    let clock = ManualClock::new();
    let config = Config::builder().clock(clock.clone()).build().unwrap();
    let breaker = Breaker::new("http-tower", config);
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone())
        .classify(HttpClassifier::new())
        .layer(tower::service_fn(
            |(code, retry): (u16, &'static str)| async move {
                let mut response = Response::builder().status(code);
                if !retry.is_empty() {
                    response = response.header(RETRY_AFTER, retry);
                }
                response.body(()).map_err(|_| "bad response")
            },
        ));
    let mut call = |request| {
        let mut cx = Context::from_waker(Waker::noop());
        let future = core::pin::pin!(svc.call(request));
        match future.poll(&mut cx) {
            Poll::Ready(result) => result.map(|r| r.status().as_u16()),
            Poll::Pending => unreachable!("the inner service answers at once"),
        }
    };
    assert_eq!(call((404, "")).unwrap(), 404);
    assert_eq!(call((200, "")).unwrap(), 200);
    assert!(call((0, "")).is_err(), "an error from the service");
    assert_eq!(call((503, "30")).unwrap(), 503);
    let m = breaker.metrics();
    assert_eq!((m.ignored, m.successes, m.failures), (1, 1, 2));
    assert_eq!(breaker.state(), State::Open);
    let rejected = call((200, "")).unwrap_err();
    let rejected = rejected.rejected().unwrap();
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(30)));
}

#[test]
fn parses_delta_seconds() {
    let now = now();
    assert_eq!(parse_retry_after("0", now), Some(Duration::ZERO));
    assert_eq!(
        parse_retry_after("120", now),
        Some(Duration::from_secs(120))
    );
    assert_eq!(parse_retry_after(" 7\t", now), Some(Duration::from_secs(7)));
    assert_eq!(parse_retry_after("007", now), Some(Duration::from_secs(7)));
    assert_eq!(
        parse_retry_after("18446744073709551615", now),
        Some(Duration::from_secs(u64::MAX))
    );
    assert_eq!(
        parse_retry_after("18446744073709551616", now),
        Some(Duration::from_secs(u64::MAX)),
        "saturates"
    );
    let long = "9".repeat(1 << 20);
    assert_eq!(
        parse_retry_after(&long, now),
        Some(Duration::from_secs(u64::MAX))
    );
    for bad in ["", " ", "-5", "+5", "1.5", "5s", "1e3", "0x10", "١٢", "5 5"] {
        assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
    }
    assert_eq!(parse_retry_after(b"\xff\xfe", now), None);
}

#[test]
fn parses_the_three_date_forms() {
    let now = now();
    let eighty = Some(Duration::from_secs(80));
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
        eighty
    );
    assert_eq!(
        parse_retry_after("Wednesday, 21-Oct-15 07:28:00 GMT", now),
        eighty
    );
    assert_eq!(parse_retry_after("Wed Oct 21 07:28:00 2015", now), eighty);
    // Not after `now`: no pause.
    assert_eq!(
        parse_retry_after("Wed, 21 Oct 2015 07:26:40 GMT", now),
        Some(Duration::ZERO)
    );
    assert_eq!(
        parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now),
        Some(Duration::ZERO)
    );
    // Far in the future: the date's distance, to be capped by the caller.
    assert_eq!(
        parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now),
        Some(Duration::from_secs(253_402_300_799 - 1_445_412_400))
    );
    for bad in [
        "Thu, 21 Oct 2015 07:28:00 GMT", // wrong weekday
        "Wed, 21 Oct 2015 07:28:00 UTC",
        "Wed, 32 Oct 2015 07:28:00 GMT",
        "Wed, 21 Oct 2015 25:28:00 GMT",
        "Sat, 01 Jan 10000 00:00:00 GMT",
        "Wed, 21 Oct 2015 07:28:00 GMT garbage",
        "Wed, 21 Oct 2015",
    ] {
        assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
    }
}

#[test]
fn a_missing_header_is_none() {
    assert_eq!(retry_after(&HeaderMap::new(), now()), None);
    assert_eq!(
        retry_after(&headers("9"), now()),
        Some(Duration::from_secs(9))
    );
}

proptest::proptest! {
    /// Any bytes: no panic, and whatever `Some` is given is not before `now`.
    #[test]
    fn never_panics(value in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
        let _ = parse_retry_after(&value, now());
        let _ = parse_retry_after(&value, UNIX_EPOCH);
    }

    /// Strings shaped like dates, with every field perturbed.
    #[test]
    fn date_like_strings_never_panic(
        day in "[A-Za-z]{0,4}",
        date in 0u32..40,
        month in "[A-Za-z]{0,4}",
        year in 0u32..20000,
        time in "[0-9:]{0,9}",
        zone in "[A-Z]{0,4}",
    ) {
        for text in [
            format!("{day}, {date:02} {month} {year} {time} {zone}"),
            format!("{day}day, {date:02}-{month}-{year} {time} {zone}"),
            format!("{day} {month} {date:2} {time} {year}"),
        ] {
            let _ = parse_retry_after(&text, now());
        }
    }
}
