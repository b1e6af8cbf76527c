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
//! All off by default; the default build is the runtime and the attribute. Each feature that
//! adds a module says so on the module's page.
//!
//! | feature | what it turns on |
//! |---|---|
//! | `tokio` | `timeout = "…"` on async functions, async health probes, `TokioClock` (follows tokio's paused time) |
//! | `tower` | `breakerbox::tower`: a tower `Layer` and `Service` that put a breaker in front of any service |
//! | `http` | `breakerbox::http`: outcomes from HTTP statuses and `Retry-After` headers, on the `http` 1.x types |
//! | `metrics` | `breakerbox::export`: breaker metrics through the `metrics` crate (Prometheus and others), from snapshots, never on the call path |
//! | `serde` | `Serialize`/`Deserialize` for [`Config`], [`Metrics`], [`State`], [`Event`]; `registry().load_toml(path)` with `BREAKERBOX__<NAME>__<KEY>` overrides |
//! | `watch` | `registry().watch_toml(path, callback)`: the file reloaded into the live breakers when it changes (`TomlWatcher`); implies `serde` |
//! | `admin` | `breakerbox::admin`: an axum `Router` with the breakers as JSON, their controls behind a bearer token, an event stream and a dashboard; implies `serde` |
//! | `redis` | `breakerbox::fleet`: breakers shared across processes and hosts through Redis; implies `tokio` |
//! | `redis-tls`, `redis-sentinel`, `redis-cluster` | fleet mode over `rediss://`, through Redis Sentinel, on a Redis Cluster; each implies `redis` |
//! | `postgres` | fleet mode with PostgreSQL as the store (`[fleet] url = "postgres://…"`); implies `redis` |
//! | `fleet-conformance` | `breakerbox::fleet::store::conformance`: the conformance suite that checks a fleet store of your own (`breakerbox::fleet::store::FleetStore`, started with `Fleet::start_with_store`); implies `redis` |
//! | `replay` | `breakerbox::replay`: calls rejected while open journaled and replayed once the breaker closes; implies `tokio` |
//!
//! # Alerting on open and close
//!
//! [`Registry::on_state_change`] calls a listener on every state change of every registry
//! breaker, in the order they happened, on the thread that made the change (a call's, a
//! control's, a probe's; the system clock's timer hands its half-opens to a thread of its own,
//! `breakerbox-notify`), or on a thread already telling that breaker's earlier changes. Keep it
//! quick and non-blocking: hand the [`Event`] to a channel and notify from a task (the
//! `alerts` example posts JSON to a webhook). Each change is also a `tracing` event (target
//! `breakerbox`, `WARN` on opening).
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
// The feature-gated items of the runtime again, by name, so that docs.rs marks each with the
// facade's feature (the glob above brings them in too; a named re-export takes precedence).
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use breakerbox_runtime::LoadError;
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub use breakerbox_runtime::TokioClock;
#[cfg(feature = "watch")]
#[cfg_attr(docsrs, doc(cfg(feature = "watch")))]
pub use breakerbox_runtime::TomlWatcher;

#[cfg(feature = "admin")]
#[cfg_attr(docsrs, doc(cfg(feature = "admin")))]
pub mod admin {
    //! An admin endpoint to mount in your own axum server: every registry breaker and keyed
    //! family as JSON, their controls (force open, disable, reset, trip for a time) behind a
    //! bearer token, a server-sent event stream of state changes and per-second metrics,
    //! `GET /health`, Prometheus text (with the `metrics` feature) and a dashboard page.
    //!
    //! Feature `admin` (implies `serde`). [`router()`] is read-only: the views, the stream and
    //! the dashboard, every control refused. [`Admin`] builds one with a token for the
    //! controls, and with the `redis` feature a fleet view (`GET /fleet`); with `replay`, each
    //! replay's journal and its dead letters. Mount it with `Router::nest_service("/admin", …)`,
    //! bind it to loopback or put it behind your application's auth.
    //!
    //! The guide, `docs/admin.md` in the repository, has every endpoint, its JSON and the event
    //! format. This module re-exports the [`breakerbox_admin`] crate, whose page has an example.
    pub use breakerbox_admin::*;
}

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod fleet {
    //! Fleet mode: breakers shared by many processes and hosts through Redis, local first.
    //!
    //! Feature `redis` (implies `tokio`); `redis-tls`, `redis-sentinel` and `redis-cluster` add
    //! `rediss://`, `redis+sentinel://` and `redis+cluster://` URLs. [`Fleet::start`] with a
    //! [`FleetConfig`] (or `FleetConfig::from_toml`) shares the registry breakers whose names
    //! match: one instance's trip, `force_open`, `disable` or `reset` reaches every instance,
    //! while every call is still decided by the local breaker, so a failing Redis leaves each
    //! instance deciding alone ([`OnStoreError`]). [`FleetTrip::Quorum`] opens the fleet only
    //! once enough live instances report the trip.
    //!
    //! The store is pluggable: [`store::FleetStore`] is the trait a store of your own implements
    //! (checked with the conformance suite, feature `fleet-conformance`), started with
    //! [`Fleet::start_with_store`].
    //!
    //! The guide, `docs/fleet.md` in the repository, has the protocol, the guarantees and a
    //! three-node demo. This module re-exports the [`breakerbox_fleet`] crate, whose page has an
    //! example.
    pub use breakerbox_fleet::*;
}

#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http {
    //! HTTP responses as breaker outcomes, on the `http` 1.x types (reqwest, hyper, axum,
    //! tonic).
    //!
    //! Feature `http`. [`HttpClassifier`] judges a status and its `Retry-After` header: 1xx to
    //! 3xx succeed, 4xx are ignored, 5xx and 600–999 fail, and a 429 or 503 with a
    //! `Retry-After` in the future trips the breaker for that long
    //! ([`Outcome::TripFor`](crate::Outcome::TripFor), capped at 5 minutes by default). With the `tower` feature too, it is a tower layer's
    //! classifier. [`parse_retry_after`] reads both forms of the header.
    //!
    //! This module re-exports the [`breakerbox_http`] crate, whose page has the classifier's
    //! table of statuses.
    pub use breakerbox_http::*;
}

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod export {
    //! Breaker metrics through the `metrics` crate: Prometheus
    //! (`metrics-exporter-prometheus`), StatsD, OpenTelemetry or any other recorder.
    //!
    //! Feature `metrics`. Nothing is recorded on the call path: [`record_all`] reads every
    //! registry breaker's and family's snapshot and sets the exported values (call it where
    //! metrics are scraped), and [`install`] keeps the state gauge current between two
    //! exports. [`record`] and [`record_family`] do the same for a breaker or a family outside
    //! the registry.
    //!
    //! This module re-exports the [`breakerbox_metrics`] crate, whose page lists every metric,
    //! its labels, and the PromQL that sums calls without counting one twice.
    pub use breakerbox_metrics::*;
}

#[cfg(feature = "replay")]
#[cfg_attr(docsrs, doc(cfg(feature = "replay")))]
pub mod replay {
    //! Calls rejected while open, journaled and replayed through the breaker once it closes:
    //! for writes that must happen eventually (a webhook, an audit record, a notification) and
    //! are safe to repeat.
    //!
    //! Feature `replay` (implies `tokio`); with `redis` too, a journal in the fleet's Redis.
    //! [`Replay`] wraps a breaker with a [`Journal`] — [`MemoryJournal`] or [`DiskJournal`]
    //! (survives a restart) — bounded, deduplicated by key, with a TTL and dead letters
    //! ([`ReplayConfig`]); a task replays the entries, oldest first, at the rate you choose.
    //! On a function, `#[circuit_breaker(replay = "memory" | "disk")]`.
    //!
    //! The guide, `docs/replay.md` in the repository, says which calls are safe to replay and
    //! what each journal guarantees. This module re-exports the [`breakerbox_replay`] crate, whose
    //! page has an example.
    pub use breakerbox_replay::*;
}

#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod tower {
    //! A tower `Layer` and `Service` that put a breaker in front of any service: a hyper or
    //! reqwest client, a tonic channel, an axum router's handlers.
    //!
    //! Feature `tower`. [`CircuitBreakerLayer`] resolves one registry breaker (or takes a
    //! [`Breaker`](crate::Breaker)) shared by every service it wraps; a response is judged by a
    //! [`Classify`] (errors fail by default; with the `http` feature, by status). An open
    //! breaker answers [`Error::Rejected`](crate::Error::Rejected) at once, without calling the
    //! inner service.
    //! [`KeyedCircuitBreakerLayer`] keeps a breaker per key taken from each request (per host,
    //! per tenant).
    //!
    //! This module re-exports the [`breakerbox_tower`] crate, whose page has an example.
    pub use breakerbox_tower::*;
}

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
