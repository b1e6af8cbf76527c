//! State changes, as told to listeners and to `tracing`.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use crate::breaker::State;

pub(crate) type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// One state change of one breaker.
///
/// Each is also emitted as a `tracing` event with target `breakerbox` and fields `name`,
/// `from`, `to` and `reason`: at `WARN` when the breaker opens, at `INFO` otherwise.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Event {
    /// The breaker's name.
    pub name: String,
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// When, on the breaker's clock.
    #[cfg_attr(feature = "serde", serde(with = "crate::serde_impl::duration"))]
    pub at: Duration,
}

/// Why a breaker changed state.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Reason {
    /// This many failures in a row.
    Failures(u32),
    /// The window's failure rate reached the limit (percent).
    FailureRate(u8),
    /// The window's slow-call rate reached the limit (percent).
    SlowRate(u8),
    /// A call's outcome, or [`Breaker::trip_for`](crate::Breaker::trip_for), opened it for this long.
    TripFor(#[cfg_attr(feature = "serde", serde(with = "crate::serde_impl::duration"))] Duration),
    /// `open_for` passed: probing.
    OpenElapsed,
    /// A probe failed.
    ProbeFailed,
    /// No probe finished within `probe_timeout`.
    ProbeTimeout,
    /// Enough probes succeeded.
    ProbesSucceeded,
    /// [`Breaker::force_open`](crate::Breaker::force_open).
    ForcedOpen,
    /// [`Breaker::disable`](crate::Breaker::disable).
    Disabled,
    /// [`Breaker::reset`](crate::Breaker::reset).
    Reset,
    /// [`Breaker::import_state`](crate::Breaker::import_state): another process's state.
    Imported,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Failures(n) => write!(f, "{n} consecutive failures"),
            Reason::FailureRate(p) => write!(f, "failure rate {p}%"),
            Reason::SlowRate(p) => write!(f, "slow-call rate {p}%"),
            Reason::TripFor(d) => {
                write!(f, "tripped for {}", crate::duration::display_duration(*d))
            }
            Reason::OpenElapsed => f.write_str("open time elapsed"),
            Reason::ProbeFailed => f.write_str("probe failed"),
            Reason::ProbeTimeout => f.write_str("no probe finished within probe_timeout"),
            Reason::ProbesSucceeded => f.write_str("probes succeeded"),
            Reason::ForcedOpen => f.write_str("forced open"),
            Reason::Disabled => f.write_str("disabled"),
            Reason::Reset => f.write_str("reset"),
            Reason::Imported => f.write_str("imported"),
        }
    }
}
