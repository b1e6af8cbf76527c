//! HTTP responses as breaker outcomes: a status classifier and a `Retry-After` parser, for
//! clients built on the [`http`](https://docs.rs/http) 1.x types (reqwest, hyper, axum, tonic).
//!
//! By default ([`HttpClassifier::new`], and `Outcome::from(status)`):
//!
//! | status | outcome |
//! |---|---|
//! | 1xx, 2xx, 3xx | [`Success`](Outcome::Success) |
//! | 429, 503 with a `Retry-After` in the future | [`TripFor`](Outcome::TripFor) that long, at most 5 minutes |
//! | other 4xx (and 429 without `Retry-After`) | [`Ignored`](Outcome::Ignored): the request was wrong, not the service |
//! | other 5xx (and 503 without `Retry-After`) | [`Failure`](Outcome::Failure) |
//! | 600–999 | [`Failure`](Outcome::Failure) |
//!
//! Every row can be changed:
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use breakerbox_runtime::Outcome;
//! use breakerbox_runtime::http::HttpClassifier;
//! use http::{HeaderMap, HeaderValue, StatusCode, header::RETRY_AFTER};
//!
//! let classify = HttpClassifier::new()
//!     .failure(StatusCode::TOO_MANY_REQUESTS) // a 429 without `Retry-After` fails too
//!     .ignore(501..=501)                     // "not implemented" says nothing about health
//!     .max_retry_after(Duration::from_secs(60));
//!
//! let now = SystemTime::now();
//! let mut headers = HeaderMap::new();
//! assert_eq!(classify.outcome(StatusCode::TOO_MANY_REQUESTS, &headers, now), Outcome::Failure);
//! assert_eq!(classify.outcome(StatusCode::NOT_IMPLEMENTED, &headers, now), Outcome::Ignored);
//! assert_eq!(classify.outcome(StatusCode::BAD_GATEWAY, &headers, now), Outcome::Failure);
//! assert_eq!(classify.outcome(StatusCode::NOT_FOUND, &headers, now), Outcome::Ignored);
//!
//! // A server asking for an hour's pause gets the cap.
//! headers.insert(RETRY_AFTER, HeaderValue::from_static("3600"));
//! assert_eq!(
//!     classify.outcome(StatusCode::SERVICE_UNAVAILABLE, &headers, now),
//!     Outcome::TripFor(Duration::from_secs(60)),
//! );
//! ```
//!
//! With the `tower` feature, an `HttpClassifier` is a [`Classify`](crate::tower::Classify)
//! for services that answer `http::Response<B>`: an `Err` from the service is a failure, a
//! response is judged by [`HttpClassifier::response`].
//!
//! For reqwest, whose `Response` is not an `http::Response`, judge its status and headers
//! (reqwest 0.12 and later use these `http` types):
//!
//! ```ignore
//! static HTTP: HttpClassifier = HttpClassifier::new();
//! fn by_status(r: &Result<reqwest::Response, reqwest::Error>) -> Outcome {
//!     match r {
//!         Ok(response) => HTTP.outcome(response.status(), response.headers(), SystemTime::now()),
//!         Err(_) => Outcome::Failure,
//!     }
//! }
//! ```

use core::ops::{Range, RangeInclusive};
use core::time::Duration;
use std::time::SystemTime;

use ::http::header::RETRY_AFTER;
use ::http::{HeaderMap, Response, StatusCode};

use crate::outcome::Outcome;

/// The lowest and highest status an `http::StatusCode` can hold.
const FIRST: u16 = 100;
const LAST: u16 = 999;
const STATUSES: usize = (LAST - FIRST + 1) as usize;

/// The verdicts of the table, two bits per status.
const SUCCESS: u64 = 0;
const FAILURE: u64 = 1;
const IGNORED: u64 = 2;

/// The cap on a `Retry-After` pause unless [`HttpClassifier::max_retry_after`] says otherwise.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(5 * 60);

/// Turns HTTP responses into [`Outcome`]s; see the [module docs](self) for the defaults.
///
/// A builder: each method changes the statuses it is given and leaves the others as they
/// were, so later calls win where they overlap. It is a plain `Copy` value of 368 bytes,
/// with no allocation, so it can be a `static` (`new` is a `const fn`) or be copied
/// into a tower layer, which copies it once per request.
#[derive(Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct HttpClassifier {
    /// Two bits per status from `FIRST`: `SUCCESS`, `FAILURE` or `IGNORED`.
    verdicts: [u64; STATUSES.div_ceil(32)],
    /// One bit per status from `FIRST`: a `Retry-After` on it opens the breaker.
    retry_after: [u64; STATUSES.div_ceil(64)],
    max_retry_after: Duration,
}

impl Default for HttpClassifier {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClassifier {
    /// The defaults: 1xx–3xx succeed, 4xx are ignored, 5xx and 600–999 fail, and a
    /// `Retry-After` on a 429 or a 503 opens the breaker for that long, at most
    /// [`DEFAULT_MAX_RETRY_AFTER`] (5 minutes).
    pub const fn new() -> Self {
        let mut this = HttpClassifier {
            verdicts: [0; STATUSES.div_ceil(32)],
            retry_after: [0; STATUSES.div_ceil(64)],
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
        };
        this = this.set(400, 499, IGNORED);
        this = this.set(500, LAST, FAILURE);
        this = this.set_retry_after(429, 429, true);
        this.set_retry_after(503, 503, true)
    }

    /// These statuses are successes.
    pub fn success(self, statuses: impl Statuses) -> Self {
        let (first, last) = statuses.bounds();
        self.set(first, last, SUCCESS)
    }

    /// These statuses are failures.
    pub fn failure(self, statuses: impl Statuses) -> Self {
        let (first, last) = statuses.bounds();
        self.set(first, last, FAILURE)
    }

    /// These statuses are ignored: they say nothing about the service's health (and free a
    /// half-open probe's slot).
    pub fn ignore(self, statuses: impl Statuses) -> Self {
        let (first, last) = statuses.bounds();
        self.set(first, last, IGNORED)
    }

    /// Whether a `Retry-After` header on these statuses opens the breaker for the time it
    /// names ([`Outcome::TripFor`]). Where it does not, or the header is missing, unreadable
    /// or not in the future, the status's own verdict applies.
    ///
    /// ```
    /// # use breakerbox_runtime::http::HttpClassifier;
    /// // Never let a server choose how long the breaker stays open.
    /// let classify = HttpClassifier::new().honour_retry_after(100..=999, false);
    /// # let _ = classify;
    /// ```
    pub fn honour_retry_after(self, statuses: impl Statuses, honour: bool) -> Self {
        let (first, last) = statuses.bounds();
        self.set_retry_after(first, last, honour)
    }

    /// The longest pause a `Retry-After` can ask for; longer ones are cut to this, so that a
    /// server cannot open the breaker for a year. [`DEFAULT_MAX_RETRY_AFTER`] by default.
    pub const fn max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// The verdict on `status` alone, as if no `Retry-After` came with it.
    ///
    /// ```
    /// use breakerbox_runtime::{Outcome, http::HttpClassifier};
    /// use http::StatusCode;
    ///
    /// let classify = HttpClassifier::new();
    /// assert_eq!(classify.status(StatusCode::OK), Outcome::Success);
    /// assert_eq!(classify.status(StatusCode::NOT_FOUND), Outcome::Ignored);
    /// assert_eq!(classify.status(StatusCode::SERVICE_UNAVAILABLE), Outcome::Failure);
    /// ```
    pub fn status(&self, status: StatusCode) -> Outcome {
        let i = index(status.as_u16());
        match (self.verdicts[i / 32] >> (i % 32 * 2)) & 3 {
            SUCCESS => Outcome::Success,
            FAILURE => Outcome::Failure,
            _ => Outcome::Ignored,
        }
    }

    /// The verdict on a response with `status` and `headers`, `now` being the time a
    /// `Retry-After` date is measured from.
    pub fn outcome(&self, status: StatusCode, headers: &HeaderMap, now: SystemTime) -> Outcome {
        let i = index(status.as_u16());
        if (self.retry_after[i / 64] >> (i % 64)) & 1 == 1
            && let Some(pause) = retry_after(headers, now)
            && !pause.is_zero()
        {
            return Outcome::TripFor(pause.min(self.max_retry_after));
        }
        self.status(status)
    }

    /// The verdict on `response`, its `Retry-After` measured from [`SystemTime::now`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use breakerbox_runtime::{Outcome, http::HttpClassifier};
    ///
    /// let response = http::Response::builder()
    ///     .status(429)
    ///     .header("retry-after", "30")
    ///     .body(())
    ///     .unwrap();
    /// assert_eq!(
    ///     HttpClassifier::new().response(&response),
    ///     Outcome::TripFor(Duration::from_secs(30)),
    /// );
    /// ```
    pub fn response<B>(&self, response: &Response<B>) -> Outcome {
        self.outcome(response.status(), response.headers(), SystemTime::now())
    }

    const fn set(mut self, first: u16, last: u16, verdict: u64) -> Self {
        let mut status = clamp(first);
        while status <= last && status <= LAST {
            let i = index(status);
            let shift = i % 32 * 2;
            self.verdicts[i / 32] = (self.verdicts[i / 32] & !(3 << shift)) | (verdict << shift);
            status += 1;
        }
        self
    }

    const fn set_retry_after(mut self, first: u16, last: u16, on: bool) -> Self {
        let mut status = clamp(first);
        while status <= last && status <= LAST {
            let i = index(status);
            let bit = 1 << (i % 64);
            if on {
                self.retry_after[i / 64] |= bit;
            } else {
                self.retry_after[i / 64] &= !bit;
            }
            status += 1;
        }
        self
    }
}

impl core::fmt::Debug for HttpClassifier {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // The table as runs of one verdict: `200..=399: Success`.
        struct Runs<'a>(&'a HttpClassifier);
        impl core::fmt::Debug for Runs<'_> {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                let mut map = f.debug_map();
                let mut start = FIRST;
                for status in FIRST..=LAST {
                    let verdict = |s| StatusCode::from_u16(s).map(|s| self.0.status(s)).ok();
                    if status == LAST || verdict(status) != verdict(status + 1) {
                        map.entry(
                            &format_args!("{start}..={status}"),
                            &verdict(status).unwrap_or(Outcome::Failure),
                        );
                        start = status + 1;
                    }
                }
                map.finish()
            }
        }
        let retry_after: Vec<u16> = (FIRST..=LAST)
            .filter(|&s| {
                let i = index(s);
                (self.retry_after[i / 64] >> (i % 64)) & 1 == 1
            })
            .collect();
        f.debug_struct("HttpClassifier")
            .field("statuses", &Runs(self))
            .field("retry_after_on", &retry_after)
            .field("max_retry_after", &self.max_retry_after)
            .finish()
    }
}

#[cfg(feature = "tower")]
impl<B, E> crate::tower::Classify<Response<B>, E> for HttpClassifier {
    /// A response by [`HttpClassifier::response`]; an error from the service (no response)
    /// is a failure.
    #[inline]
    fn classify(&self, result: &Result<Response<B>, E>) -> Outcome {
        match result {
            Ok(response) => self.response(response),
            Err(_) => Outcome::Failure,
        }
    }
}

/// The default verdict on a status, without `Retry-After`: 4xx ignored, 5xx and above a
/// failure, anything else a success ([`HttpClassifier::status`] with the defaults).
///
/// ```
/// use breakerbox_runtime::Outcome;
/// use http::StatusCode;
///
/// assert_eq!(Outcome::from(StatusCode::NO_CONTENT), Outcome::Success);
/// assert_eq!(Outcome::from(StatusCode::TOO_MANY_REQUESTS), Outcome::Ignored);
/// assert_eq!(Outcome::from(StatusCode::BAD_GATEWAY), Outcome::Failure);
/// ```
impl From<StatusCode> for Outcome {
    fn from(status: StatusCode) -> Self {
        match status.as_u16() {
            400..=499 => Outcome::Ignored,
            500.. => Outcome::Failure,
            _ => Outcome::Success,
        }
    }
}

/// Statuses a [`HttpClassifier`] method applies to: one `StatusCode` or number (`429`), or a
/// range of numbers (`500..=599`, `500..600`). Numbers outside 100–999, which no `StatusCode`
/// holds, are left out; an empty range changes nothing.
pub trait Statuses: sealed::Sealed {}

mod sealed {
    /// The first and last status, inclusive.
    pub trait Sealed {
        fn bounds(&self) -> (u16, u16);
    }
}

impl Statuses for StatusCode {}
impl sealed::Sealed for StatusCode {
    fn bounds(&self) -> (u16, u16) {
        (self.as_u16(), self.as_u16())
    }
}

/// The statuses from `first` to `last` that fit a `u16`; `(1, 0)`, which holds none, for an
/// empty range.
fn span(first: i64, last: i64) -> (u16, u16) {
    let fit = |n: i64| n.clamp(0, i64::from(u16::MAX)) as u16;
    if first > last || last < 0 || first > i64::from(u16::MAX) {
        (1, 0)
    } else {
        (fit(first), fit(last))
    }
}

// `i32` too, so that a plain literal (`.failure(429)`, `.ignore(500..=504)`), which falls back
// to `i32`, is accepted.
macro_rules! statuses {
    ($($int:ty),*) => {$(
        impl Statuses for $int {}
        impl sealed::Sealed for $int {
            fn bounds(&self) -> (u16, u16) {
                span(i64::from(*self), i64::from(*self))
            }
        }

        impl Statuses for RangeInclusive<$int> {}
        impl sealed::Sealed for RangeInclusive<$int> {
            fn bounds(&self) -> (u16, u16) {
                if self.is_empty() {
                    (1, 0)
                } else {
                    span(i64::from(*self.start()), i64::from(*self.end()))
                }
            }
        }

        impl Statuses for Range<$int> {}
        impl sealed::Sealed for Range<$int> {
            fn bounds(&self) -> (u16, u16) {
                span(i64::from(self.start), i64::from(self.end) - 1)
            }
        }
    )*};
}

statuses!(u16, i32);

const fn clamp(status: u16) -> u16 {
    if status < FIRST { FIRST } else { status }
}

/// The table index of a status in `FIRST..=LAST`.
#[inline(always)]
const fn index(status: u16) -> usize {
    (status - FIRST) as usize
}

/// The pause the first `Retry-After` header in `headers` asks for, measured from `now`; see
/// [`parse_retry_after`]. `None` without one.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    parse_retry_after(headers.get(RETRY_AFTER)?, now)
}

/// Reads a `Retry-After` value (RFC 9110 §10.2.3), in either form:
///
/// - delta-seconds, digits only: `"120"` is two minutes. A number too large for a `u64`
///   saturates at `u64::MAX` seconds: cap it before use (as [`HttpClassifier`] does).
/// - an HTTP-date (`"Wed, 21 Oct 2015 07:28:00 GMT"`, and the obsolete RFC 850 and asctime
///   forms), read by [`httpdate`](https://docs.rs/httpdate): the time from `now` until then,
///   [`Duration::ZERO`] for a date that is not after `now`.
///
/// Space around the value is allowed. Anything else (a sign, a fraction, a unit, a date with
/// a wrong weekday, bytes that are not ASCII) is `None`. It never panics, and its time is
/// linear in the value's length.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use breakerbox_runtime::http::parse_retry_after;
///
/// let now = UNIX_EPOCH + Duration::from_secs(1_445_412_400); // 2015-10-21 07:26:40 GMT
/// assert_eq!(parse_retry_after("120", now), Some(Duration::from_secs(120)));
/// assert_eq!(
///     parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
///     Some(Duration::from_secs(80)),
/// );
/// assert_eq!(parse_retry_after("Tue, 20 Oct 2015 07:28:00 GMT", now), Some(Duration::ZERO));
/// assert_eq!(parse_retry_after("soon", now), None);
/// assert_eq!(parse_retry_after("-5", now), None);
/// ```
pub fn parse_retry_after(value: impl AsRef<[u8]>, now: SystemTime) -> Option<Duration> {
    let value = value.as_ref().trim_ascii();
    if value.is_empty() {
        return None;
    }
    if value.iter().all(u8::is_ascii_digit) {
        let secs = value.iter().fold(0u64, |secs, digit| {
            secs.saturating_mul(10)
                .saturating_add(u64::from(digit - b'0'))
        });
        return Some(Duration::from_secs(secs));
    }
    let date = httpdate::parse_http_date(core::str::from_utf8(value).ok()?).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
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
        use crate::tower::CircuitBreakerLayer;
        use crate::{Breaker, Config, ManualClock, State};
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
}
