//! Why a `#[circuit_breaker]` fallback answers.

use core::fmt;

use breakerbox_runtime::{Breaker, Outcome, RejectReason, Rejected, Timeout};

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
/// | ran and failed, with `fallback_on = "error"` | `Failed(f)`; `f.classified()` tells an `Err` from an outcome `classify` gave |
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
    /// With `fallback_on = "error"`: the call ran while the breaker was closed or half-open,
    /// and failed. Its failure was recorded first.
    Failed(CallFailed),
}

/// A call that ran and failed, which a `fallback_on = "error"` fallback answers: an `Err`
/// (judged by the default classifier), or a result `classify = …` judged a failure or a trip.
/// The failure was recorded before the fallback was called.
#[derive(Clone, Debug)]
pub struct CallFailed {
    breaker: Breaker,
    outcome: Outcome,
    classified: bool,
}

impl CallFailed {
    /// Not public API: made by the code `#[circuit_breaker]` generates.
    #[doc(hidden)]
    pub fn new(breaker: Breaker, outcome: Outcome, classified: bool) -> CallFailed {
        CallFailed {
            breaker,
            outcome,
            classified,
        }
    }

    /// The name of the breaker (for a keyed function, its family's).
    pub fn name(&self) -> &str {
        self.breaker.name()
    }

    /// The outcome recorded: [`Outcome::Failure`] for an `Err`, or what `classify` returned
    /// (a failure, or a trip, with its reason if it gave one).
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// Whether `classify = …` judged the call (a result it called a failure), rather than the
    /// default classifier an `Err`.
    pub fn classified(&self) -> bool {
        self.classified
    }

    /// The breaker, as the failure left it (it may have opened).
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}

impl fmt::Display for CallFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the call through circuit breaker '{}' failed",
            self.name()
        )?;
        if let Some(reason) = self.outcome.reason() {
            write!(f, ": {reason}")?;
        } else if self.classified {
            f.write_str(" (by its classifier)")?;
        }
        Ok(())
    }
}

impl std::error::Error for CallFailed {}

impl FallbackReason {
    /// The rejection, if the breaker refused the call.
    pub fn rejected(&self) -> Option<&Rejected> {
        match self {
            FallbackReason::Rejected(rejected) => Some(rejected),
            FallbackReason::TimedOut(_) | FallbackReason::Failed(_) => None,
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
            FallbackReason::Rejected(_) | FallbackReason::Failed(_) => None,
        }
    }

    /// The failed call, if it ran and failed (`fallback_on = "error"`).
    pub fn failed(&self) -> Option<&CallFailed> {
        match self {
            FallbackReason::Failed(failed) => Some(failed),
            FallbackReason::Rejected(_) | FallbackReason::TimedOut(_) => None,
        }
    }

    /// The name of the breaker.
    pub fn name(&self) -> &str {
        match self {
            FallbackReason::Rejected(rejected) => rejected.name(),
            FallbackReason::TimedOut(timeout) => timeout.name(),
            FallbackReason::Failed(failed) => failed.name(),
        }
    }
}

/// The rejection's or the timeout's own message.
impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FallbackReason::Rejected(rejected) => rejected.fmt(f),
            FallbackReason::TimedOut(timeout) => timeout.fmt(f),
            FallbackReason::Failed(failed) => failed.fmt(f),
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
