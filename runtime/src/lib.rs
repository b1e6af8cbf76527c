//! The circuit-breaker runtime behind [breakerbox](https://docs.rs/breakerbox): the state
//! machine and its policies, the registry, errors, events, metrics and clock.
//!
//! Use it through the `breakerbox` crate, which re-exports everything here.
//!
//! ```
//! use breakerbox_runtime::{Breaker, Config, Error, State};
//! use std::time::Duration;
//!
//! let breaker = Breaker::new("users", Config::builder().failures(5).open_for(Duration::from_secs(2)).build()?);
//! let answer: Result<u32, Error<std::io::Error>> = breaker.call(|| Ok(42));
//! assert_eq!(answer.unwrap(), 42);
//! assert_eq!(breaker.state(), State::Closed);
//! # Ok::<(), breakerbox_runtime::ConfigError>(())
//! ```
//!
//! # Where things are
//!
//! Floors, bottom up: each module imports only from the modules listed before it (a test,
//! `integration/tests/layers.rs`, keeps this map true and complete), and no two files of a
//! folder import each other in a circle. A module's own file (`breaker.rs`, `keyed/mod.rs`,
//! and this one) only declares its children, re-exports what they define and carries the
//! module's docs: what its children share sits in a child file of its own, below them.
//!
//! The vocabulary, which names no breaker:
//!
//! - `sync` — std's atomics and locks, or loom's under `cfg(loom)` for the model checks.
//! - `duration` — the one duration parser and printer (`"250ms"`), shared with the attribute.
//! - `serde_duration` (feature `serde`) — durations as that text in the `serde` derives of
//!   [`Metrics`] and [`Event`], here so that the core never names `serde_impls`.
//! - `suggest` — "did you mean …?" for misspelt keys and names, shared with the attribute.
//! - `config_keys` — the config's keys as text, for the TOML loader and the attribute's key
//!   list (public, hidden, as `keys`).
//! - `site` — [`Site`]: where a config was given (an attribute, a call), as reports name it.
//! - `error` — [`RejectReason`], [`Timeout`], and how admission encodes a refusal.
//! - `identity` — a breaker's name, shared by a keyed family's breakers, and the count of live
//!   breakers (`live_breakers`, for tests of memory).
//! - `probe` — [`Probe`], [`IntoProbe`], [`HealthProbes`]: the health probe a config holds.
//! - `state` — [`State`], [`SharedState`], and the packed words the protocols run on.
//! - `counters` — per-thread striped call counters, exact without an atomic read-modify-write
//!   on the call path.
//! - `latency` — the latency histogram of a breaker that times its calls.
//! - `event` — [`Event`] and [`Reason`]: state changes as told to listeners and `tracing`;
//!   the listener lists, a breaker's and the registry's.
//! - `metrics` — [`Metrics`] snapshots.
//! - `timer` — [`Timers`]: the wake-ups that half-open an open breaker without a call; it
//!   names the breaker only through its `Target` trait.
//! - `clock` — [`Clock`] (in `clock/source`), [`SystemClock`] (`clock/system`),
//!   [`ManualClock`] (`clock/manual`), `TokioClock` (`clock/tokio_clock`); the clock a breaker
//!   holds (`clock/clock_ref`), the recent time (`clock/recent`) and the system clock's timer
//!   thread (`clock/timer_thread`).
//!
//! What a breaker does, and what it judges with:
//!
//! - `config` — [`Config`] (in `config/settings`) and [`ConfigBuilder`] (`config/builder`,
//!   with [`ConfigError`] in `config/config_error`): what a breaker does, validated once;
//!   `config/pool` shares one allocation between equal configs, `config/sources` tells where
//!   each key's value came from.
//! - `window` — the sliding windows behind `failure_rate` and `slow_rate`: `window/rate`
//!   picks the count window (`window/calls`) or the time window (`window/time`), which share
//!   `window/gate`.
//! - `explain` — [`Explanation`], [`Cause`], [`Progress`]: `Breaker::explain`'s data in
//!   `explain/model`, and in `explain/text` its sentences.
//! - `outcome` — [`Outcome`], a finished call's verdict.
//! - `reconfigure` — [`ReconfigureError`], which configs a live breaker can take, and the
//!   config slot a reload swaps.
//! - `serde_impls` (feature `serde`) — `Serialize`/`Deserialize` for configs, metrics, states,
//!   events.
//!
//! The breaker:
//!
//! - `breaker` — [`Breaker`] and [`WeakBreaker`]: the handles in `breaker/handle`, the API
//!   in `breaker/api`; below them, one file per seam: `inner` (the shared state's layout),
//!   `rare_parts` (the parts few breakers use, made on first use), `admit`, `record`,
//!   `transition`, `delivery` (telling listeners), `cause` (a failure's message, `explain`),
//!   `permit` ([`Permit`], [`OwnedPermit`]), `rejected` ([`Rejected`], [`Error`]), `guarded`,
//!   `open_timer`, `probing` (health probes run while open), `config_change` (`reconfigure`).
//!
//! Many breakers:
//!
//! - `registration` — the link-time list of `#[circuit_breaker]` functions, and the conflicts
//!   [`Registry::check`] reports ([`Conflicts`], [`Conflict`], [`ConfigConflict`]).
//! - `registry` — [`registry()`]: one breaker per name, listeners.
//! - `keyed` — [`BreakerMap`] (in `keyed/breaker_map`): a breaker per key, bounded by
//!   `max_keys` and `idle_for`, its keys kept in `keyed/family`; the families the registry
//!   holds (`keyed/registered`), and a family's config replaced live (`keyed/family_config`,
//!   with the single keys' configs in `keyed/family`).
//! - `health` — [`Registry::health`]: UP, DEGRADED or DOWN.
//! - `load` (feature `serde`) — `Registry::load_toml` (`load/load_toml`), `reload_toml`
//!   (`load/reload`) and their `LoadError` (`load/load_error`): the file read (`load/file`)
//!   and parsed into tables (`load/parse`, `load/table`), the environment (`load/env`), the
//!   layers merged key by key (`load/merge`) into configs (`load/prepare`); `load/watch`
//!   (feature `watch`) — `Registry::watch_toml` and its `TomlWatcher`.
//! - `integration_support` — what the integration crates need of the core that users should
//!   not see; no semver promise.
//! - `__integrations` — hidden, inline here: `integration_support` under the path the
//!   integration crates name (`breakerbox_runtime::__integrations`).
//! - `__private` — hidden, inline here: what `#[circuit_breaker]`'s generated code names,
//!   re-exported by the facade.
//!
//! The integrations are crates of their own, each behind a feature of the `breakerbox` facade:
//! `breakerbox-tower` (`breakerbox::tower`), `breakerbox-http` (`breakerbox::http`),
//! `breakerbox-metrics` (`breakerbox::export`), `breakerbox-admin` (`breakerbox::admin`),
//! `breakerbox-fleet` (`breakerbox::fleet`), `breakerbox-replay` (`breakerbox::replay`).
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
pub use config::{Config, ConfigBuilder, ConfigError, Window};
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
pub use registration::{ConfigConflict, Conflict, Conflicts, TwoFiles};
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

    /// Records an annotated function's success: a closed breaker with a plain config inline,
    /// any other (a rate window's, a probe's) by one call. Inlining every kind of success into
    /// each annotated function costs it build time and binary size for paths most breakers
    /// never take.
    #[inline]
    pub fn succeed(permit: crate::Permit<'_>) {
        permit.success_lean();
    }

    pub use crate::registration::Registration;
    #[cfg(breakerbox_linkme)]
    pub use {crate::registration::REGISTRATIONS, linkme};
}
