//! A breaker's numbers at one moment.

use core::time::Duration;

use crate::state::State;

/// A snapshot of one breaker, from [`Breaker::metrics`](crate::Breaker::metrics).
///
/// The totals count from the breaker's creation and never reset:
/// `calls == successes + failures + ignored + rejected`, calls made while disabled included.
/// `slow` counts the calls that took at least the `slow` threshold and were recorded as a
/// success or a failure: ignored (and cancelled) calls and calls made while disabled are not
/// timed.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Metrics {
    /// The breaker's name.
    pub name: String,
    /// Its state.
    pub state: State,
    /// How long it has been in that state.
    #[cfg_attr(feature = "serde", serde(with = "crate::serde_duration::as_text"))]
    pub time_in_state: Duration,
    /// Every call asked for: run or rejected, in every state (disabled too). A call is counted
    /// when its outcome is recorded (or when it is rejected): one still running is not yet.
    pub calls: u64,
    /// Calls that succeeded.
    pub successes: u64,
    /// Calls that failed (including those that tripped the breaker by their outcome).
    pub failures: u64,
    /// Calls counted neither way.
    pub ignored: u64,
    /// Calls refused.
    pub rejected: u64,
    /// Successes and failures that took at least the `slow` threshold.
    pub slow: u64,
    /// Failures that were calls run past their timeout (`#[circuit_breaker(timeout = …)]`,
    /// [`Permit::timed_out`](crate::Permit::timed_out)): counted among `failures` too, so
    /// never more than them. With `serde`, read as 0 when absent.
    #[cfg_attr(feature = "serde", serde(default))]
    pub timeouts: u64,
    /// Calls in the rate window now (0 without a rate policy).
    pub window_calls: u64,
    /// The window's failure rate in percent, if it holds any call.
    pub failure_rate: Option<f64>,
    /// The window's slow-call rate in percent, if it holds any call.
    pub slow_rate: Option<f64>,
    /// Failures in a row now (closed, consecutive policy).
    pub consecutive_failures: u64,
    /// Successful probes in this half-open round.
    pub consecutive_successes: u64,
    /// Times the breaker opened.
    pub times_opened: u64,
    /// While open: how long until it probes.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::serde_duration::option_as_text")
    )]
    pub retry_after: Option<Duration>,
    /// The message of the failure that last tripped it
    /// ([`Breaker::last_failure`](crate::Breaker::last_failure)): the call's error, or the
    /// reason its classifier gave (`HTTP 503 (Retry-After 6 s)`); `None` if none did. With
    /// `serde`, read as `None` when absent.
    #[cfg_attr(feature = "serde", serde(default))]
    pub last_failure: Option<String>,
}
