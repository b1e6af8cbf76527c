//! State changes, as told to listeners and to `tracing`.

use core::any::Any;
use core::fmt;
use core::time::Duration;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::breaker::State;

pub(crate) type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// Tells `event` to each of `listeners` in turn; `whose` names them in the log ("listener",
/// "registry listener"). A listener's panic is caught here and logged
/// at `error` (target `breakerbox`, with the breaker's name and the panic's message): it never
/// reaches the thread that changed the state, which may be unwinding from a panic of its own
/// (a permit dropped by a panicking call records a failure, which may trip the breaker), and
/// where a second panic escaping would abort the process. Later listeners are still told.
pub(crate) fn tell(listeners: &[Listener], event: &Event, whose: &'static str) {
    for listener in listeners {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| listener(event))) {
            let message = panic_message(&*payload);
            tracing::error!(
                target: "breakerbox",
                name = %event.name,
                panic = message,
                "a {whose} of circuit breaker '{}' panicked (caught): {message}",
                event.name
            );
            discard(payload);
        }
    }
}

/// A panic's message, when it has one we can read (`panic!` with a literal or a format).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a panic payload that is not a string)"
    }
}

/// Drops a caught panic's payload, whose own `Drop` may panic: that second panic is caught
/// too, and its payload leaked rather than risk a third.
pub(crate) fn discard(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        core::mem::forget(again);
    }
}

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
            Reason::TripFor(d) => write!(f, "tripped for {d:?}"),
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
