//! The data of `Breaker::explain`: [`Explanation`], [`Cause`], [`Progress`], and what a
//! breaker hands over to build one ([`Why`], [`Parts`]).

use core::time::Duration;
use std::sync::Arc;
use std::time::SystemTime;

use crate::config::Window;
use crate::event::Reason;
use crate::state::State;

/// What a transition leaves behind for [`Explanation`]: why it happened and the numbers that
/// made it happen. Written under the breaker's transition lock, with the state it explains.
#[derive(Clone, Debug, Default)]
pub(crate) struct Why {
    /// Why the breaker entered its state; `None` if it never changed state.
    pub(crate) reason: Option<Reason>,
    /// The wall time of the change.
    pub(crate) wall: Option<SystemTime>,
    /// For a rate trip: the bad calls (failed or slow) and the calls in the window when it
    /// tripped.
    pub(crate) tally: Option<(u64, u64)>,
    /// For an opening: how long it was opened for (jitter and backoff applied).
    pub(crate) open_for: Option<Duration>,
    /// For a state imported from a store: why, as the store told it.
    pub(crate) told: Option<Arc<str>>,
}

/// What the breaker hands over to build an [`Explanation`]; see `Inner::explain_parts`.
pub(crate) struct Parts {
    pub(crate) name: String,
    pub(crate) key: Option<String>,
    pub(crate) state: State,
    pub(crate) now: Duration,
    pub(crate) since: Duration,
    pub(crate) why: Why,
    pub(crate) last_failure: Option<Arc<str>>,
    /// While open: when it half-opens, on the breaker's clock.
    pub(crate) open_until: Option<Duration>,
    pub(crate) reopens: u32,
    pub(crate) consecutive_failures: u64,
    pub(crate) probe_successes: u64,
    /// The window's bad (failed, slow) calls and calls now, with a rate policy.
    pub(crate) window: Option<(u64, u64, u64)>,
    pub(crate) config: crate::Config,
}

/// Why a breaker is in its state: from [`Breaker::explain`](crate::Breaker::explain).
///
/// As data, for dashboards and admin endpoints, and as a sentence through `Display`:
///
/// ```text
/// open since 12:00:03 UTC (2.1 s ago) because 6 of the last 10 calls failed (60 % ≥ 50 %,
/// window 10 s, min 5); last failure: 'server answered 500'; next probe in 0.9 s (backoff ×2,
/// 3rd re-open)
/// ```
///
/// (one line). The wall time is the system's at the change, in UTC, to the second; a breaker
/// that never changed state says `closed since it was created`. Times in the sentence are
/// rounded to a tenth of a second (milliseconds below one second).
///
/// The explanation is a snapshot taken without stopping the breaker: if a transition happens
/// while it is taken, its parts may straddle the change (the state from before, the reason
/// from after, say). Taken again, it is consistent.
///
/// With the `serde` feature it is `Serialize` (the data, not the sentence): durations as text
/// (`"7.9s"`), `since_wall` as `Event::wall` is, and [`Cause`] and [`Progress`] as
/// `{"kind": "failures", "detail": {"failures": 2, "threshold": 2, "within": null}}` or, with
/// no numbers, `{"kind": "reset"}`; `kind` is the variant's name in snake case.
///
/// ```
/// use breakerbox_runtime::{Breaker, Cause, Config, ManualClock, State};
/// use std::time::Duration;
///
/// let clock = ManualClock::new();
/// let config = Config::builder().failures(2).open_for(Duration::from_secs(10)).clock(clock.clone());
/// let breaker = Breaker::new("users", config.build()?);
/// for _ in 0..2 {
///     let _ = breaker.call(|| Err::<(), _>("connection refused"));
/// }
/// clock.advance(Duration::from_millis(2100));
/// let why = breaker.explain();
/// assert_eq!(why.state, State::Open);
/// assert_eq!(why.cause, Cause::Failures { failures: 2, threshold: 2, within: None });
/// assert_eq!(why.elapsed, Duration::from_millis(2100));
/// assert_eq!(why.next_probe_in, Some(Duration::from_millis(7900)));
/// assert!(why.to_string().ends_with(
///     "(2.1 s ago) because 2 calls failed in a row (threshold 2); \
///      last failure: 'connection refused'; next probe in 7.9 s"
/// ));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Explanation {
    /// The breaker's name: the family's, for a keyed family's breaker.
    pub name: String,
    /// For a keyed family's breaker, its key as it displays (see
    /// [`Event::key`](crate::Event::key)); the sentence then begins `key '<key>': `. With
    /// `serde`, left out when `None`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub key: Option<String>,
    /// Its state.
    pub state: State,
    /// When it entered the state, on the breaker's clock (comparable with
    /// [`Event::at`](crate::Event::at)).
    #[cfg_attr(feature = "serde", serde(with = "crate::serde_duration::as_text"))]
    pub since: Duration,
    /// How long it has been in the state, on the breaker's clock.
    #[cfg_attr(feature = "serde", serde(with = "crate::serde_duration::as_text"))]
    pub elapsed: Duration,
    /// When it entered the state on the system's wall clock; `None` if it never changed state.
    pub since_wall: Option<SystemTime>,
    /// What put it in this state.
    pub cause: Cause,
    /// The message of the failure that last tripped it (see
    /// [`Breaker::last_failure`](crate::Breaker::last_failure)); shown while not closed.
    #[cfg_attr(feature = "serde", serde(serialize_with = "serde_text"))]
    pub last_failure: Option<Arc<str>>,
    /// While open: how long until it half-opens.
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::serde_duration::option_as_text")
    )]
    pub next_probe_in: Option<Duration>,
    /// While open: how long this opening lasts, from `since` (backoff, cap and jitter
    /// applied).
    #[cfg_attr(
        feature = "serde",
        serde(with = "crate::serde_duration::option_as_text")
    )]
    pub open_for: Option<Duration>,
    /// While open after a re-open under `backoff` (a factor above 1): that factor. This
    /// opening's time is `open_for × backoff^reopens`, capped at `max_open_for`.
    pub backoff: Option<f64>,
    /// Re-opens since the last close: 0 while closed and during the first opening.
    pub reopens: u32,
    /// Where the breaker stands against its policy now.
    pub progress: Progress,
}

/// What put a breaker in its state: the [`Reason`] of its last change, with the numbers
/// behind it.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "kind", content = "detail", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Cause {
    /// It never changed state.
    Created,
    /// Failures in a row reached the threshold.
    Failures {
        /// Failures in the streak that tripped it.
        failures: u32,
        /// `failures`.
        threshold: u32,
        /// `failures_within`, if set.
        #[cfg_attr(
            feature = "serde",
            serde(with = "crate::serde_duration::option_as_text")
        )]
        within: Option<Duration>,
    },
    /// The window's failure rate reached the limit.
    FailureRate {
        /// Failed calls in the window at the trip (`None` if not known: an imported state).
        failed: Option<u64>,
        /// Calls in the window at the trip.
        calls: Option<u64>,
        /// The rate, in percent.
        rate: u8,
        /// `failure_rate`.
        threshold: u8,
        /// `window`.
        window: Window,
        /// `min_calls`.
        min_calls: u32,
    },
    /// The window's slow-call rate reached the limit.
    SlowRate {
        /// Slow calls in the window at the trip.
        slow_calls: Option<u64>,
        /// Calls in the window at the trip.
        calls: Option<u64>,
        /// The rate, in percent.
        rate: u8,
        /// `slow_rate`.
        threshold: u8,
        /// `slow`: from this long, a call is slow.
        #[cfg_attr(feature = "serde", serde(with = "crate::serde_duration::as_text"))]
        slow: Duration,
        /// `window`.
        window: Window,
        /// `min_calls`.
        min_calls: u32,
    },
    /// A call's outcome ([`Outcome::TripFor`](crate::Outcome::TripFor)) or
    /// [`Breaker::trip_for`](crate::Breaker::trip_for) opened it for this long.
    TripFor(
        #[cfg_attr(feature = "serde", serde(with = "crate::serde_duration::as_text"))] Duration,
    ),
    /// Its open time ended: probing.
    OpenElapsed,
    /// A probe failed.
    ProbeFailed,
    /// No probe finished within `probe_timeout` (given).
    ProbeTimeout(
        #[cfg_attr(feature = "serde", serde(with = "crate::serde_duration::as_text"))] Duration,
    ),
    /// Enough probes (given) succeeded.
    ProbesSucceeded(u32),
    /// A health probe succeeded before the open time ended.
    HealthProbe,
    /// [`Breaker::force_open`](crate::Breaker::force_open).
    ForcedOpen,
    /// [`Breaker::disable`](crate::Breaker::disable).
    Disabled,
    /// [`Breaker::reset`](crate::Breaker::reset).
    Reset,
    /// [`Breaker::import_state`](crate::Breaker::import_state).
    Imported,
    /// A state taken on from a store that told why (fleet mode: the instance that changed
    /// the shared breaker, and its reason: `web-2 tripped it: 5 consecutive failures`).
    Told(String),
}

/// Where a breaker stands against its policy now.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize),
    serde(tag = "kind", content = "detail", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Progress {
    /// Nothing to report: open, forced open or disabled.
    None,
    /// Closed, consecutive policy: failures in a row so far, of the threshold.
    Failures {
        /// Failures in a row now.
        failures: u64,
        /// `failures`.
        threshold: u32,
    },
    /// Closed, rate policy: the window now.
    Window {
        /// Failed calls in the window.
        failed: u64,
        /// Slow calls in the window.
        slow: u64,
        /// Calls in the window.
        calls: u64,
    },
    /// Half-open: successful probes so far, of those needed to close.
    Probes {
        /// Successful probes this round.
        succeeded: u64,
        /// `successes`.
        needed: u32,
    },
}

/// `last_failure` as a plain string (serde's `Arc` support needs its `rc` feature).
#[cfg(feature = "serde")]
fn serde_text<S: serde::Serializer>(text: &Option<Arc<str>>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&text.as_deref(), s)
}

impl Explanation {
    pub(crate) fn new(p: Parts) -> Explanation {
        let c = &p.config;
        let cause = match p.why.reason {
            None => Cause::Created,
            Some(reason) => cause(reason, &p.why, c),
        };
        let open = p.state == State::Open;
        let backoff = (open && c.backoff > 1.0 && p.reopens > 0).then_some(c.backoff);
        let progress = match p.state {
            State::Closed => match p.window {
                Some((failed, slow, calls)) => Progress::Window {
                    failed,
                    slow,
                    calls,
                },
                None => Progress::Failures {
                    failures: p.consecutive_failures,
                    threshold: c.failures,
                },
            },
            State::HalfOpen => Progress::Probes {
                succeeded: p.probe_successes,
                needed: c.successes,
            },
            _ => Progress::None,
        };
        Explanation {
            name: p.name,
            key: p.key,
            state: p.state,
            since: p.since,
            elapsed: p.now.saturating_sub(p.since),
            since_wall: p.why.wall,
            cause,
            last_failure: p.last_failure,
            next_probe_in: p
                .open_until
                .filter(|_| open)
                .map(|until| until.saturating_sub(p.now)),
            open_for: p.why.open_for.filter(|_| open),
            backoff,
            reopens: p.reopens,
            progress,
        }
    }
}

fn cause(reason: Reason, why: &Why, c: &crate::Config) -> Cause {
    match reason {
        Reason::Failures(n) => Cause::Failures {
            failures: n,
            threshold: c.failures,
            within: c.failures_within,
        },
        Reason::FailureRate(rate) => Cause::FailureRate {
            failed: why.tally.map(|t| t.0),
            calls: why.tally.map(|t| t.1),
            rate,
            threshold: c.failure_rate.unwrap_or(rate),
            window: c.window,
            min_calls: c.min_calls,
        },
        Reason::SlowRate(rate) => Cause::SlowRate {
            slow_calls: why.tally.map(|t| t.0),
            calls: why.tally.map(|t| t.1),
            rate,
            threshold: c.slow_rate.unwrap_or(rate),
            slow: c.slow.unwrap_or_default(),
            window: c.window,
            min_calls: c.min_calls,
        },
        Reason::TripFor(d) => Cause::TripFor(d),
        Reason::OpenElapsed => Cause::OpenElapsed,
        Reason::ProbeFailed => Cause::ProbeFailed,
        Reason::ProbeTimeout => Cause::ProbeTimeout(c.probe_timeout),
        Reason::ProbesSucceeded => Cause::ProbesSucceeded(c.successes),
        Reason::HealthProbe => Cause::HealthProbe,
        Reason::ForcedOpen => Cause::ForcedOpen,
        Reason::Disabled => Cause::Disabled,
        Reason::Reset => Cause::Reset,
        Reason::Imported => match &why.told {
            Some(told) => Cause::Told(told.to_string()),
            None => Cause::Imported,
        },
    }
}
