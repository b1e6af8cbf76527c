//! Why a `#[circuit_breaker]` fallback answers.

use core::fmt;

use breakerbox_runtime::{RejectReason, Rejected, Timeout};

/// Why a fallback answers a call: the last argument of a fallback named with
/// `#[circuit_breaker(fallback_with_reason = path)]`.
///
/// The reasons a breaker gives are told apart by the variant and, for a rejection, by
/// [`Rejected::reason`]:
///
/// | the call | the reason |
/// |---|---|
/// | rejected while the breaker is open | `Rejected(r)`, `r.reason() == RejectReason::Open` |
/// | rejected while half-open, all probe calls taken | `Rejected(r)`, `RejectReason::HalfOpenFull` |
/// | rejected at `max_concurrent` calls | `Rejected(r)`, `RejectReason::BulkheadFull` |
/// | rejected because the breaker was forced open | `Rejected(r)`, `RejectReason::ForcedOpen` |
/// | ran past `timeout = "…"` (async functions) | `TimedOut(t)`; the call counted as a failure |
///
/// ```
/// use breakerbox::{FallbackReason, RejectReason, circuit_breaker, registry};
///
/// fn cached(id: u32, reason: FallbackReason) -> String {
///     match reason {
///         FallbackReason::Rejected(r) if r.reason() == RejectReason::ForcedOpen => {
///             format!("user {id} (maintenance)")
///         }
///         other => format!("user {id} (cached: {other})"),
///     }
/// }
///
/// #[circuit_breaker(name = "doc-fallback-reason", fallback_with_reason = cached)]
/// fn user(id: u32) -> String {
///     format!("user {id}")
/// }
///
/// assert_eq!(user(7), "user 7");
/// registry().get("doc-fallback-reason").unwrap().force_open();
/// assert_eq!(user(7), "user 7 (maintenance)");
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum FallbackReason {
    /// The breaker refused the call, whose body did not run; [`Rejected::reason`] says why.
    Rejected(Rejected),
    /// The call ran past the attribute's `timeout` and was dropped. It counted as a failure.
    TimedOut(Timeout),
}

impl FallbackReason {
    /// The rejection, if the breaker refused the call.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            FallbackReason::Rejected(rejected) => Some(rejected),
            FallbackReason::TimedOut(_) => None,
        }
    }

    /// Why the breaker refused the call, if it did.
    pub fn reject_reason(&self) -> Option<RejectReason> {
        self.rejected().map(Rejected::reason)
    }

    /// The timeout, if the call ran out of time.
    pub fn timed_out(&self) -> Option<&Timeout> {
        match self {
            FallbackReason::TimedOut(timeout) => Some(timeout),
            FallbackReason::Rejected(_) => None,
        }
    }

    /// The name of the breaker.
    pub fn name(&self) -> &str {
        match self {
            FallbackReason::Rejected(rejected) => rejected.name(),
            FallbackReason::TimedOut(timeout) => timeout.name(),
        }
    }
}

/// The rejection's or the timeout's own message.
impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FallbackReason::Rejected(rejected) => rejected.fmt(f),
            FallbackReason::TimedOut(timeout) => timeout.fmt(f),
        }
    }
}

/// Transparent: the message is the inner error's, so the inner error is not its source.
impl std::error::Error for FallbackReason {}

impl From<Rejected> for FallbackReason {
    fn from(rejected: Rejected) -> Self {
        FallbackReason::Rejected(rejected)
    }
}

impl From<Timeout> for FallbackReason {
    fn from(timeout: Timeout) -> Self {
        FallbackReason::TimedOut(timeout)
    }
}
