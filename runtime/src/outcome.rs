//! What a finished call means for the breaker, and why it failed.

use core::fmt;
use core::hash::{Hash, Hasher};
use core::time::Duration;

/// The verdict on one finished call.
///
/// A classifier turns a call's result into one; the default is `Ok` → `Success`,
/// `Err` → `Failure`. A failure may say why ([`Outcome::failure_with`],
/// [`Outcome::trip_for_with`]): the reason is kept as the breaker's last failure when the
/// failure trips it ([`Breaker::last_failure`](crate::Breaker::last_failure), the opening's
/// [`Event::failure`](crate::Event::failure), `explain()`, a rejection's text).
///
/// Outcomes compare (and hash) by their verdict alone: a failure with a reason equals
/// [`Failure`](Outcome::Failure), whatever the reason; [`reason`](Outcome::reason) tells it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Outcome {
    /// The service answered well.
    Success,
    /// The service failed; counts toward tripping.
    Failure,
    /// Says nothing about the service (a 404, a cancelled call): counted neither way, and a
    /// half-open probe's slot is freed.
    Ignored,
    /// Open the breaker now for this long: the service asked for a pause, such as an HTTP 503
    /// with `Retry-After`.
    TripFor(Duration),
    /// A [`Failure`](Outcome::Failure) with its reason ([`Outcome::failure_with`]).
    FailureWith(FailureReason),
    /// A [`TripFor`](Outcome::TripFor) with its reason ([`Outcome::trip_for_with`]).
    TripForWith(Duration, FailureReason),
}

impl Outcome {
    /// The default verdict: `Ok` is a success, `Err` a failure.
    ///
    /// ```
    /// use breakerbox_runtime::Outcome;
    /// assert_eq!(Outcome::of_result(&Ok::<_, ()>(1)), Outcome::Success);
    /// assert_eq!(Outcome::of_result(&Err::<(), _>("no")), Outcome::Failure);
    /// ```
    pub fn of_result<T, E>(result: &Result<T, E>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        }
    }

    /// A failure, and why: the reason is the message kept if it trips the breaker (unless the
    /// call's own error is given with it, as [`Breaker::call`](crate::Breaker::call) does).
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, Outcome};
    ///
    /// let breaker = Breaker::new("payments", Config::builder().failures(1).build()?);
    /// let _ = breaker.call_with(|| "<html>oops</html>", |_| Outcome::failure_with("not JSON"));
    /// assert_eq!(breaker.last_failure().as_deref(), Some("not JSON"));
    /// # Ok::<(), breakerbox_runtime::ConfigError>(())
    /// ```
    pub fn failure_with(reason: impl Into<FailureReason>) -> Outcome {
        Outcome::FailureWith(reason.into())
    }

    /// [`TripFor`](Outcome::TripFor) `pause`, and why.
    pub fn trip_for_with(pause: Duration, reason: impl Into<FailureReason>) -> Outcome {
        Outcome::TripForWith(pause, reason.into())
    }

    /// The reason a failure gave, if any.
    pub fn reason(&self) -> Option<FailureReason> {
        match *self {
            Outcome::FailureWith(r) | Outcome::TripForWith(_, r) => Some(r),
            _ => None,
        }
    }

    /// The verdict without its reason: [`Failure`](Outcome::Failure) for a failure with a
    /// reason, [`TripFor`](Outcome::TripFor) for a trip with one; any other as it is.
    pub fn verdict(self) -> Outcome {
        match self {
            Outcome::FailureWith(_) => Outcome::Failure,
            Outcome::TripForWith(d, _) => Outcome::TripFor(d),
            other => other,
        }
    }
}

impl PartialEq for Outcome {
    /// Equal verdicts: reasons are not compared.
    fn eq(&self, other: &Outcome) -> bool {
        match (self.verdict(), other.verdict()) {
            (Outcome::Success, Outcome::Success)
            | (Outcome::Failure, Outcome::Failure)
            | (Outcome::Ignored, Outcome::Ignored) => true,
            (Outcome::TripFor(a), Outcome::TripFor(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Outcome {}

impl Hash for Outcome {
    /// The verdict's, as [`PartialEq`] compares.
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self.verdict() {
            Outcome::Success => 0u8.hash(state),
            Outcome::Failure => 1u8.hash(state),
            Outcome::Ignored => 2u8.hash(state),
            Outcome::TripFor(d) => {
                3u8.hash(state);
                d.hash(state);
            }
            _ => 4u8.hash(state),
        }
    }
}

/// Why a call failed, as its classifier says ([`Outcome::failure_with`]): a text of the
/// program's, or an HTTP status with its `Retry-After` (`http::HttpClassifier`, feature `http`,
/// gives those). Displayed as the text, or as `HTTP 503` and `HTTP 503 (Retry-After 6 s)`.
///
/// `Copy`, and built without allocating: the text is formatted only when the failure trips
/// the breaker (or a `debug` log wants it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FailureReason(Repr);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Repr {
    Text(&'static str),
    /// A status and its `Retry-After` in milliseconds (`u32::MAX` for none).
    Http(u16, u32),
}

impl FailureReason {
    /// A reason in the program's words.
    pub const fn text(text: &'static str) -> FailureReason {
        FailureReason(Repr::Text(text))
    }

    /// An HTTP status: `HTTP 500`.
    pub const fn http(status: u16) -> FailureReason {
        FailureReason(Repr::Http(status, u32::MAX))
    }

    /// An HTTP status with the pause its `Retry-After` asked for: `HTTP 503 (Retry-After 6 s)`
    /// (to the millisecond, below 49 days).
    pub fn http_retry_after(status: u16, retry_after: Duration) -> FailureReason {
        let ms =
            u32::try_from(retry_after.as_millis()).map_or(u32::MAX - 1, |ms| ms.min(u32::MAX - 1));
        FailureReason(Repr::Http(status, ms))
    }

    /// The HTTP status, for a reason made by [`http`](FailureReason::http) or
    /// [`http_retry_after`](FailureReason::http_retry_after).
    pub fn status(&self) -> Option<u16> {
        match self.0 {
            Repr::Http(status, _) => Some(status),
            Repr::Text(_) => None,
        }
    }
}

impl From<&'static str> for FailureReason {
    fn from(text: &'static str) -> FailureReason {
        FailureReason::text(text)
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Repr::Text(text) => f.write_str(text),
            Repr::Http(status, u32::MAX) => write!(f, "HTTP {status}"),
            Repr::Http(status, ms) => write!(
                f,
                "HTTP {status} (Retry-After {})",
                crate::explain::Human(Duration::from_millis(u64::from(ms)))
            ),
        }
    }
}

/// The default verdict on a status, without `Retry-After`: 4xx ignored, 5xx and above a
/// failure, anything else a success (`breakerbox::http::HttpClassifier::status` with the
/// defaults). Here rather than in `breakerbox-http` because only the crate of `Outcome` or of
/// `StatusCode` may implement `From` between them: the runtime's one use of `http`.
///
/// ```
/// use breakerbox_runtime::Outcome;
/// use http::StatusCode;
///
/// assert_eq!(Outcome::from(StatusCode::NO_CONTENT), Outcome::Success);
/// assert_eq!(Outcome::from(StatusCode::TOO_MANY_REQUESTS), Outcome::Ignored);
/// assert_eq!(Outcome::from(StatusCode::BAD_GATEWAY), Outcome::Failure);
/// ```
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
impl From<http::StatusCode> for Outcome {
    fn from(status: http::StatusCode) -> Self {
        match status.as_u16() {
            400..=499 => Outcome::Ignored,
            500.. => Outcome::failure_with(FailureReason::http(status.as_u16())),
            _ => Outcome::Success,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_as_on_call_reads_them() {
        assert_eq!(FailureReason::http(500).to_string(), "HTTP 500");
        let r = FailureReason::http_retry_after(503, Duration::from_secs(6));
        assert_eq!(r.to_string(), "HTTP 503 (Retry-After 6 s)");
        assert_eq!(r.status(), Some(503));
        assert_eq!(FailureReason::from("not JSON").to_string(), "not JSON");
    }

    #[test]
    fn outcomes_compare_by_verdict() {
        assert_eq!(Outcome::failure_with("x"), Outcome::Failure);
        assert_ne!(Outcome::failure_with("x"), Outcome::Ignored);
        let d = Duration::from_secs(1);
        assert_eq!(Outcome::trip_for_with(d, "y"), Outcome::TripFor(d));
        assert_ne!(Outcome::trip_for_with(d, "y"), Outcome::TripFor(2 * d));
        assert_eq!(
            Outcome::failure_with("x").reason(),
            Some(FailureReason::text("x"))
        );
        assert_eq!(Outcome::Failure.reason(), None);
    }
}
