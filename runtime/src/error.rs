//! The errors' vocabulary below the breaker: why a call was refused ([`RejectReason`], and
//! the `Refusal` that admission returns), and the [`Timeout`] error. [`Rejected`](crate::Rejected)
//! and [`Error`](crate::Error) hold a breaker handle, so they live with it, in
//! `breaker/rejected.rs`.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

/// Why a call was not let through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The breaker is open and waits before probing again.
    Open,
    /// The breaker is half-open and its probe calls are all taken.
    HalfOpenFull,
    /// `max_concurrent` calls are already running.
    BulkheadFull,
    /// The breaker was forced open by hand.
    ForcedOpen,
}

impl RejectReason {
    #[inline(always)]
    pub(crate) fn code(self) -> u64 {
        self as u64
    }

    pub(crate) fn from_code(code: u64) -> RejectReason {
        match code {
            0 => RejectReason::Open,
            1 => RejectReason::HalfOpenFull,
            2 => RejectReason::BulkheadFull,
            _ => RejectReason::ForcedOpen,
        }
    }
}

/// Why admission failed (a `RejectReason` code), and in how many nanoseconds to retry
/// (`NO_RETRY`: unknown). PERF(`open_1t/bb_call`): two words, like a permit's fields (see
/// `Ticket`); raw nanoseconds because building a `Duration` costs a division the rejection
/// path can skip.
pub(crate) type Refusal = (u64, u64);
/// A [`Refusal`]'s retry time when none is known.
pub(crate) const NO_RETRY: u64 = u64::MAX;

/// A duration as a person reads it: `1.2s`, `250ms`.
pub(crate) struct Secs(pub(crate) Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms < 1000 {
            write!(f, "{}ms", ms.max(1))
        } else {
            write!(f, "{:.1}s", self.0.as_secs_f64())
        }
    }
}

/// A call that ran past the `timeout` given to `#[circuit_breaker]`; it counted as a failure,
/// and as a timeout ([`Permit::timed_out`](crate::Permit::timed_out)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("call through circuit breaker '{name}' timed out after {}", Secs(*.after))]
pub struct Timeout {
    name: Arc<str>,
    after: Duration,
}

impl Timeout {
    /// A timeout of the breaker `name` after `after`.
    pub fn new(name: &str, after: Duration) -> Self {
        Timeout {
            name: name.into(),
            after,
        }
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long the call was given.
    pub fn after(&self) -> Duration {
        self.after
    }
}
