//! HTTP responses as breaker outcomes: a status classifier and a `Retry-After` parser, for
//! clients built on the [`http`](https://docs.rs/http) 1.x types (reqwest, hyper, axum, tonic).
//!
//! Use it through the `breakerbox` crate, as `breakerbox::http` (feature `http`; with feature
//! `tower` too, the classifier is a tower layer's `Classify`). A crate of its own rather than
//! a feature of `breakerbox-tower`, so that a client that only judges statuses (reqwest)
//! builds no tower.
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
//! A failure says why ([`Outcome::reason`]): `HTTP 500`, and for a trip `HTTP 503
//! (Retry-After 6 s)` (the pause the server asked for, before the cap). That is the message a
//! breaker keeps as its last failure when the response trips it, and shows in the opening's
//! event, `explain()` and its rejections. Outcomes compare by verdict, reasons aside.
//!
//! Every row can be changed:
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use breakerbox_runtime::Outcome;
//! use breakerbox_http::HttpClassifier;
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
//! With this crate's `tower` feature, an `HttpClassifier` is a
//! [`Classify`](breakerbox_tower::Classify)
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
#![forbid(unsafe_code)]

use core::ops::{Range, RangeInclusive};
use core::time::Duration;
use std::time::SystemTime;

use ::http::header::RETRY_AFTER;
use ::http::{HeaderMap, Response, StatusCode};

use breakerbox_runtime::{FailureReason, Outcome};

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
    /// # use breakerbox_http::HttpClassifier;
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
    /// use breakerbox_http::HttpClassifier;
    /// use breakerbox_runtime::Outcome;
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
            FAILURE => Outcome::failure_with(FailureReason::http(status.as_u16())),
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
            // The reason says what the server asked for; the pause is capped.
            let reason = FailureReason::http_retry_after(status.as_u16(), pause);
            return Outcome::trip_for_with(pause.min(self.max_retry_after), reason);
        }
        self.status(status)
    }

    /// The verdict on `response`, its `Retry-After` measured from [`SystemTime::now`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use breakerbox_http::HttpClassifier;
    /// use breakerbox_runtime::Outcome;
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
                    let verdict = |s| {
                        StatusCode::from_u16(s)
                            .map(|s| self.0.status(s).verdict())
                            .ok()
                    };
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
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
impl<B, E> breakerbox_tower::Classify<Response<B>, E> for HttpClassifier {
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
/// use breakerbox_http::parse_retry_after;
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
mod tests;
