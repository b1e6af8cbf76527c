//! State changes, as told to listeners and to `tracing`: the [`Event`], its [`Reason`], and
//! the lists of listeners (one per breaker, one for the whole registry) that are told it.

use core::any::Any;
use core::fmt;
use core::time::Duration;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use crate::state::State;

pub(crate) type Listener = Arc<dyn Fn(&Event) + Send + Sync>;

/// A list of listeners: one breaker's, or the registry's (see [`registry_wide`]).
///
/// std's lock, not loom's: no protocol runs through it (a listener is added, or the list is
/// copied and the lock let go before anyone is told), and the registry's list is a static.
pub(crate) struct Listeners {
    list: RwLock<Vec<Listener>>,
    /// Names the listeners in the log when one panics: "listener", "registry listener".
    whose: &'static str,
}

impl Default for Listeners {
    /// A breaker's own list.
    fn default() -> Listeners {
        Listeners::new("listener")
    }
}

impl Listeners {
    /// An empty list, whose panicking listeners `whose` names in the log.
    pub(crate) const fn new(whose: &'static str) -> Listeners {
        Listeners {
            list: RwLock::new(Vec::new()),
            whose,
        }
    }

    /// Adds a listener, told after those added before it.
    pub(crate) fn add(&self, listener: Listener) {
        self.list
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(listener);
    }

    /// Tells `event` to each listener in turn (see [`tell`]). The list is copied first, so no
    /// lock is held while a listener runs, and a listener may add another.
    pub(crate) fn notify(&self, event: &Event) {
        let listeners: Vec<Listener> = self.list.read().unwrap_or_else(|e| e.into_inner()).clone();
        tell(&listeners, event, self.whose);
    }
}

/// The listeners of every registry breaker's changes
/// ([`Registry::on_state_change`](crate::Registry::on_state_change)), told after each breaker's
/// own. Here rather than in the registry, so that a breaker tells them without naming it.
pub(crate) fn registry_wide() -> &'static Listeners {
    static LISTENERS: Listeners = Listeners::new("registry listener");
    &LISTENERS
}

/// Tells `event` to each of `listeners` in turn; `whose` names them in the log ("listener",
/// "registry listener"). A listener's panic is caught here and logged
/// at `error` (target `breakerbox`, with the breaker's name and the panic's message): it never
/// reaches the thread that changed the state, which may be unwinding from a panic of its own
/// (a permit dropped by a panicking call records a failure, which may trip the breaker), and
/// where a second panic escaping would abort the process. Later listeners are still told.
fn tell(listeners: &[Listener], event: &Event, whose: &'static str) {
    for listener in listeners {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| listener(event))) {
            let message = panic_message(&*payload);
            tracing::error!(
                target: "breakerbox",
                name = %event.name,
                key = event.key.as_deref(),
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
/// `key` (for a keyed family's breaker only), `from`, `to`, `reason`, `origin` (for a state
/// taken on from another instance) and, for an opening by a failure, `failure` (its message):
/// at `WARN` when the breaker opens, at `INFO` otherwise.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Event {
    /// The breaker's name: the family's, for a keyed family's breaker.
    pub name: String,
    /// For a keyed family's breaker ([`BreakerMap`](crate::BreakerMap),
    /// `#[circuit_breaker(key = …)]`), its key as it displays (`<Display panicked>` if the
    /// key's `Display` panicked); `None` for other breakers and a family's overflow breaker.
    /// With `serde`, left out when `None`, and read as `None` when absent: the form of events
    /// without a key is unchanged.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub key: Option<String>,
    /// For an opening by a failure: that failure's message (its error's `Display`, or the
    /// reason its classifier gave, such as `HTTP 503 (Retry-After 6 s)`; see
    /// [`Breaker::last_failure`](crate::Breaker::last_failure), which says where a long one is
    /// cut); `None` for other changes.
    /// With `serde`, left out when `None`, and read as `None` when absent.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub failure: Option<String>,
    /// For a state taken on from another instance ([`Reason::Imported`], fleet mode): who
    /// changed it and why, as the store tells it, such as `web-2 tripped it (5 consecutive
    /// failures)` or `web-1 changed it (reset)`; `None` for other changes. With `serde`, left
    /// out when `None`, and read as `None` when absent.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub origin: Option<String>,
    /// The state it left.
    pub from: State,
    /// The state it entered.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// When, on the breaker's clock: comparable with the breaker's other times (a
    /// [`ManualClock`](crate::ManualClock)'s in tests), not with `Instant` or a wall time.
    #[cfg_attr(feature = "serde", serde(with = "crate::serde_duration::as_text"))]
    pub at: Duration,
    /// When, on the system's wall clock ([`SystemTime::now`] as the change was made), for logs
    /// and alerts. It is read even for a breaker on a [`ManualClock`](crate::ManualClock), and
    /// may step back or forward with the system's clock. With `serde`, in serde's own form for
    /// `SystemTime`: `{"secs_since_epoch": …, "nanos_since_epoch": …}`.
    pub wall: SystemTime,
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
    TripFor(
        #[cfg_attr(feature = "serde", serde(with = "crate::serde_duration::as_text"))] Duration,
    ),
    /// `open_for` passed: probing.
    OpenElapsed,
    /// A probe failed.
    ProbeFailed,
    /// No probe finished within `probe_timeout`.
    ProbeTimeout,
    /// Enough probes succeeded.
    ProbesSucceeded,
    /// A health probe ([`ConfigBuilder::probe`](crate::ConfigBuilder::probe)) said the
    /// service is healthy before the open time ended: half-open, to let real calls confirm.
    HealthProbe,
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
            Reason::Failures(1) => f.write_str("1 consecutive failure"),
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
            Reason::HealthProbe => f.write_str("health probe succeeded"),
            Reason::ForcedOpen => f.write_str("forced open"),
            Reason::Disabled => f.write_str("disabled"),
            Reason::Reset => f.write_str("reset"),
            Reason::Imported => f.write_str("imported"),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{Breaker, Config, ManualClock};
    use std::sync::Mutex;
    use std::time::UNIX_EPOCH;

    /// Events on a manual clock: `at` is that clock's, `wall` is set from the system's.
    fn events() -> Vec<Event> {
        let clock = ManualClock::new();
        let config = Config::builder().clock(clock.clone()).build().unwrap();
        let breaker = Breaker::new("event-wall", config);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        breaker.on_state_change(move |e| log.lock().unwrap().push(e.clone()));
        clock.advance(Duration::from_secs(3600));
        breaker.force_open();
        breaker.reset();
        seen.lock().unwrap().clone()
    }

    #[test]
    fn an_event_has_its_breaker_clock_time_and_a_wall_time() {
        let events = events();
        assert_eq!(events.len(), 2);
        for event in &events {
            assert_eq!(event.at, Duration::from_secs(3600));
            // The wall time is the system's, whatever the breaker's clock says: set, and far
            // from the manual clock's hour after its zero.
            assert!(event.wall > UNIX_EPOCH + Duration::from_secs(365 * 24 * 3600));
        }
    }

    /// A trip's reason reads as English: one failure, two failures.
    #[test]
    fn a_single_failure_is_singular() {
        assert_eq!(Reason::Failures(1).to_string(), "1 consecutive failure");
        assert_eq!(Reason::Failures(2).to_string(), "2 consecutive failures");
    }

    #[cfg(feature = "serde")]
    #[test]
    fn the_wall_time_deserializes_in_serdes_form() {
        #[derive(serde::Deserialize)]
        struct File {
            event: Event,
        }
        let text = "[event]\nname = \"users\"\nfrom = \"closed\"\nto = \"open\"\n\
                    reason = { trip_for = \"30s\" }\nat = \"1h\"\n\
                    wall = { secs_since_epoch = 1445412400, nanos_since_epoch = 5 }\n";
        let event = toml::from_str::<File>(text).unwrap().event;
        assert_eq!(event.at, Duration::from_secs(3600));
        assert_eq!(event.wall, UNIX_EPOCH + Duration::new(1_445_412_400, 5));
    }
}
