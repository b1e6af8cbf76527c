//! Circuit breakers for Rust: one attribute on a function, every policy, a few nanoseconds
//! per call.
//!
//! ```
//! use breakerbox::{circuit_breaker, Rejected};
//!
//! #[derive(Debug)]
//! enum ApiError { Down, Rejected(Rejected) }
//! impl From<Rejected> for ApiError {
//!     fn from(r: Rejected) -> Self { ApiError::Rejected(r) }
//! }
//!
//! #[circuit_breaker(name = "doc-users", failures = 2, open_for = "2s")]
//! fn fetch_user(id: u32) -> Result<String, ApiError> {
//!     if id == 0 { Err(ApiError::Down) } else { Ok(format!("user {id}")) }
//! }
//!
//! assert_eq!(fetch_user(7).unwrap(), "user 7");
//! assert!(matches!(fetch_user(0), Err(ApiError::Down)));
//! assert!(matches!(fetch_user(0), Err(ApiError::Down)));
//! // Two failures in a row: open. Calls are rejected without running.
//! assert!(matches!(fetch_user(7), Err(ApiError::Rejected(_))));
//! ```
//!
//! - [`macro@circuit_breaker`] — the attribute, with every key and the code it expands to.
//! - [`Breaker`], [`Config`], [`Outcome`], [`Rejected`] — the runtime API underneath.
//! - [`FallbackReason`] — what a `fallback_with_reason` fallback is told: rejected (and why),
//!   timed out, or (with `fallback_on = "error"`) failed ([`CallFailed`]).
//! - [`registry()`] — the process-wide breakers by name: snapshots, manual control, listeners;
//!   [`Registry::check`] at startup reports names given different configs.
//! - [`BreakerMap`] — a breaker per key (host, tenant, shard), bounded by `max_keys` and
//!   `idle_for`.
//! - [`WeakBreaker`] (from [`Breaker::downgrade`]) — a handle that does not keep its breaker
//!   alive, for a listener that acts on its own breaker.
//! - [`ManualClock`] — time for tests, so that no test sleeps.
//!
//! # Cargo features
//!
//! All off by default.
//!
//! - `tokio`: `timeout = "…"` on async functions; `TokioClock`, which follows tokio's
//!   paused time.
//! - `tower`: `breakerbox::tower::CircuitBreakerLayer`, a tower `Layer` that puts a breaker
//!   in front of any `Service`: a hyper or reqwest client, a tonic channel, an axum route.
//! - `http`: `breakerbox::http`, `Outcome`s from HTTP statuses and `Retry-After` headers
//!   (`HttpClassifier`, `parse_retry_after`), on the `http` 1.x types.
//! - `metrics`: `breakerbox::export`, the breakers' counts, states and rates through the
//!   `metrics` crate (`breakerbox_calls_total`, `breakerbox_state`, …), exported from
//!   snapshots, never on the call path.
//! - `serde`: `Serialize`/`Deserialize` for [`Config`] (the attribute's keys, durations as
//!   `"250ms"`), [`Metrics`], [`State`], [`Event`]; `registry().load_toml(path)` reads
//!   `[breakers.<name>]` tables, overridden by `BREAKERBOX__<NAME>__<KEY>` variables.
//! - `watch` (implies `serde`): `registry().watch_toml(path, callback)` reloads the file
//!   into the live breakers and keyed families, keeping their state, each time it changes,
//!   and reports each result; a bad file changes nothing (`docs/live.md`).
//! - `admin` (implies `serde`): `breakerbox::admin::router()`, an axum `Router` to mount in
//!   your server: breakers as JSON, their controls behind a bearer token, a server-sent event
//!   stream and a dashboard page (`docs/admin.md`).
//! - `replay` (implies `tokio`): `breakerbox::replay`, calls rejected while open journaled in
//!   memory and replayed through the breaker once it closes (`docs/replay.md`); with `redis`
//!   too, `RedisJournal` and `replay = "fleet"`, one journal in the fleet's Redis.
//!
//! # Alerting on open and close
//!
//! [`Registry::on_state_change`] calls a listener on every state change of every registry
//! breaker, in the order they happened, on the thread whose call caused it (or on the thread
//! already telling that breaker's earlier changes). Keep it quick and non-blocking: hand the
//! [`Event`] to a channel and notify from a task (the `alerts` example posts JSON to a
//! webhook). Each change is also a `tracing` event (target `breakerbox`, `WARN` on opening).
//!
//! ```
//! use breakerbox::{registry, State};
//! use std::sync::mpsc;
//!
//! let (alerts, inbox) = mpsc::channel();
//! registry().on_state_change(move |event| {
//!     if matches!(event.to, State::Open | State::ForcedOpen | State::Closed) {
//!         let _ = alerts.send(format!("{} is {}: {}", event.name, event.to, event.reason));
//!     }
//! });
//! registry().get_or_create("doc-alerts", Default::default).force_open();
//! assert_eq!(inbox.recv().unwrap(), "doc-alerts is forced-open: forced open");
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[doc(inline)]
pub use breakerbox_macros::circuit_breaker;
pub use breakerbox_runtime::*;
// The feature-gated items again, by name, so that docs.rs marks each with its feature (the glob
// above brings them in too; a named re-export takes precedence over it).
/// The admin router: breakers as JSON, their controls, an event stream and a dashboard (the
/// `breakerbox-admin` crate; `docs/admin.md`).
#[cfg(feature = "admin")]
#[cfg_attr(docsrs, doc(cfg(feature = "admin")))]
pub use breakerbox_admin as admin;
/// Fleet mode: breakers shared across processes and hosts through Redis (the
/// `breakerbox-fleet` crate; `docs/fleet.md`).
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use breakerbox_fleet as fleet;
/// `Outcome`s from HTTP statuses and `Retry-After` headers (the `breakerbox-http` crate).
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use breakerbox_http as http;
/// Breaker metrics through the `metrics` crate (the `breakerbox-metrics` crate).
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use breakerbox_metrics as export;
/// Calls rejected while open, journaled and replayed once the breaker closes (the
/// `breakerbox-replay` crate; `docs/replay.md`).
#[cfg(feature = "replay")]
#[cfg_attr(docsrs, doc(cfg(feature = "replay")))]
pub use breakerbox_replay as replay;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use breakerbox_runtime::LoadError;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use breakerbox_runtime::TokioClock;
#[cfg(feature = "watch")]
#[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
pub use breakerbox_runtime::TomlWatcher;
/// A tower `Layer` and `Service` around any service (the `breakerbox-tower` crate).
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub use breakerbox_tower as tower;

mod fallback;
pub use fallback::{CallFailed, FallbackReason};

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The integration guide's examples (`docs/integrations.md`) run as doctests of the
// `breakerbox-integration` package (integration/src/lib.rs), which has their dependencies.
