//! The circuit breakers behind [breakerbox](https://docs.rs/breakerbox): breakers, the
//! registry that shares them by name, keyed families, configs, and what they report.
//!
//! Use it through the `breakerbox` crate, which re-exports all of this with the
//! `#[circuit_breaker]` attribute. This crate is what that attribute runs on, and what code
//! uses that drives breakers by hand.
//!
//! A circuit breaker stops calling a service that keeps failing. Closed, it runs every call
//! and counts failures; when they cross the threshold (`failures` in a row, or a
//! `failure_rate` over a window) it opens, and calls are rejected at once with a [`Rejected`]
//! that says when to retry, instead of waiting on a service that is down. After `open_for`
//! it turns half-open and lets a few probe calls through: if they succeed it closes again,
//! if one fails it opens again.
//!
//! ```
//! use breakerbox_runtime::{Breaker, Config, Error, ManualClock, State};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new(); // time moves only when the example moves it
//! let config = Config::builder()
//!     .failures(2)
//!     .open_for(Duration::from_secs(5))
//!     .clock(clock.clone())
//!     .build()?;
//! let users = Breaker::new("users", config);
//!
//! // Two failures in a row open it.
//! for _ in 0..2 {
//!     let answer: Result<u32, Error<&str>> = users.call(|| Err("connection refused"));
//!     assert!(matches!(answer, Err(Error::Inner("connection refused"))));
//! }
//! assert_eq!(users.state(), State::Open);
//!
//! // Open: the call does not run, and the rejection says why and when to retry.
//! let answer: Result<u32, Error<&str>> = users.call(|| unreachable!());
//! let rejected = answer.unwrap_err().rejected().cloned().unwrap();
//! assert_eq!(rejected.retry_after(), Some(Duration::from_secs(5)));
//! assert_eq!(
//!     rejected.to_string(),
//!     "circuit breaker 'users' is open; retry in 5.0s (last failure: connection refused)"
//! );
//!
//! // Once `open_for` has passed, a successful probe closes it again.
//! clock.advance(Duration::from_secs(5));
//! assert_eq!(users.call(|| Ok::<_, &str>(42)).unwrap(), 42);
//! assert_eq!(users.state(), State::Closed);
//! # Ok::<(), breakerbox_runtime::ConfigError>(())
//! ```
//!
//! # Where to start
//!
//! - [`Breaker`]: one breaker. [`call`](Breaker::call) and [`call_async`](Breaker::call_async)
//!   run a call through it; [`try_acquire`](Breaker::try_acquire) gives a [`Permit`] to
//!   record an [`Outcome`] with by hand; [`state`](Breaker::state),
//!   [`metrics`](Breaker::metrics) and [`explain`](Breaker::explain) say where it stands, and
//!   [`on_state_change`](Breaker::on_state_change) tells each change as an [`Event`].
//! - [`registry()`]: the process-wide [`Registry`], one breaker per name, where every
//!   `#[circuit_breaker]` function's breaker lives. Configure names before they are made
//!   ([`configure`](Registry::configure), or a TOML file with `load_toml`, feature `serde`),
//!   check at startup that no two sites disagree ([`check`](Registry::check)), and read every
//!   breaker at once ([`snapshot`](Registry::snapshot), [`health`](Registry::health)).
//! - [`BreakerMap`]: a breaker per key (host, tenant, shard) from one config, in bounded
//!   memory, so that one failing host opens its own breaker and no other.
//! - [`Config`]: what a breaker does, built with [`Config::builder`] and checked once
//!   ([`ConfigError`] says what is wrong): when to open, for how long, how many probes,
//!   slow calls, a bulkhead, health probes, the [`Clock`] (a [`ManualClock`] in tests).
//!
//! # Features
//!
//! - `serde`: `Serialize`/`Deserialize` for configs, metrics, states and events, and
//!   `Registry::load_toml`: configs from a TOML file and the environment.
//! - `watch`: `Registry::watch_toml`, which reloads a config file when it changes.
//! - `tokio`: `TokioClock`, whose time is tokio's (paused in tests), and async health probes.
//! - `http`: `Outcome::from(http::StatusCode)`.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod breaker;
mod clock;
mod config;
#[doc(hidden)]
pub mod config_keys;
mod counters;
mod duration;
mod error;
mod event;
mod explain;
mod health;
mod identity;
mod integration_support;
mod keyed;
mod latency;
#[cfg(feature = "serde")]
mod load;
mod metrics;
mod outcome;
mod probe;
mod reconfigure;
mod registration;
mod registry;
#[cfg(feature = "serde")]
mod serde_duration;
#[cfg(feature = "serde")]
mod serde_impls;
mod site;
mod state;
mod suggest;
mod sync;
mod timer;
mod window;

pub use breaker::{Breaker, Error, OwnedPermit, Permit, Rejected, WeakBreaker};
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use clock::TokioClock;
#[doc(hidden)]
#[cfg(not(loom))]
pub use clock::timer_thread::stop as __stop_system_timer;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::sources::{ConfigSource, KeySource};
pub use config::{Config, ConfigBuilder, ConfigError, TwoFiles, Window};
#[doc(hidden)]
pub use config_keys as keys;
pub use error::{RejectReason, Timeout};
pub use event::{Event, Reason};
pub use explain::{Cause, Explanation, Progress};
pub use health::{ComponentHealth, Health, HealthStatus};
#[doc(hidden)]
pub use identity::live_breakers;
pub use keyed::{
    BreakerMap, Evicted, FamilyMetrics, FamilySnapshot, FamilyTotals, KeyError, KeyHasher,
    KeyMetrics, KeyOrder, KeyPage, KeyQuery, KeyTypeMismatch,
};
pub use latency::LatencySnapshot;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use load::LoadError;
#[cfg(feature = "watch")]
#[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
pub use load::TomlWatcher;
pub use metrics::Metrics;
pub use outcome::{FailureReason, Outcome};
pub use probe::{HealthProbes, IntoProbe, Probe, ProbeOutcome};
pub use reconfigure::ReconfigureError;
pub use registration::{ConfigConflict, Conflict, Conflicts};
pub use registry::{Registry, registry};
pub use site::Site;
pub use state::{SharedState, State};
pub use timer::Timers;

/// What the integration crates need of the core: `integration_support`'s items, under a name
/// that says they are not public API.
#[doc(hidden)]
pub mod __integrations {
    pub use crate::integration_support::*;
}

/// Support for the code `#[circuit_breaker]` generates, re-exported by the facade's
/// `__private`. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::__breakerbox_register as register;
    pub use crate::breaker::Guarded;

    /// Asks an annotated function's breaker for a permit: a closed breaker with a plain
    /// config admits inline, a timed open one rejects inline but for its count, and any other
    /// answer (a probe, a disabled or forced-open breaker) is one call. Inlining every answer
    /// into each annotated function costs it build time and binary size for paths most calls
    /// never take.
    #[inline]
    pub fn acquire(breaker: &crate::Breaker) -> Result<crate::Permit<'_>, crate::Rejected> {
        breaker.try_acquire_lean()
    }

    /// Records an annotated function's success, by one call: its words in registers.
    #[inline]
    pub fn succeed(permit: crate::Permit<'_>) {
        permit.success_lean();
    }

    pub use crate::registration::Registration;
    #[cfg(breakerbox_linkme)]
    pub use {crate::registration::REGISTRATIONS, linkme};
}
