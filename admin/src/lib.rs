//! An admin endpoint to mount in your own axum server: every [`registry`](breakerbox_runtime::registry())
//! breaker as JSON, their controls behind a bearer token, a server-sent event stream of state
//! changes and per-second metrics, Prometheus text, and a dashboard page.
//!
//! Use it through the `breakerbox` crate, as `breakerbox::admin` (feature `admin`; its
//! `GET /metrics` also with feature `metrics`).
//!
//! ```
//! use breakerbox_admin::Admin;
//!
//! // Read-only: the JSON views, the event stream and the dashboard; every control is refused.
//! let read_only: axum::Router = breakerbox_admin::router();
//!
//! // With the controls (force-open, disable, reset, trip-for), for requests that send
//! // `Authorization: Bearer <token>`.
//! let token = std::env::var("ADMIN_TOKEN").unwrap_or_else(|_| "change me".into());
//! let app: axum::Router =
//!     axum::Router::new().nest_service("/admin", Admin::new().token(token).router());
//! # let _ = (read_only, app);
//! ```
//!
//! # Endpoints
//!
//! | method and path | what |
//! | --- | --- |
//! | `GET /` | the dashboard: one HTML page, its script and style inline, nothing loaded from elsewhere |
//! | `GET /breakers` | `{"breakers": [...], "families": [...], "control": bool}` |
//! | `GET /breakers/{name}` | one breaker: state, config, metrics, last failure, time left open; or a keyed family |
//! | `GET /breakers/{name}/config` | each key of its config: the effective value and where it came from (default, file and line, variable, attribute) |
//! | `GET /breakers/{name}/events` | its last events (a keyed family's: its keys' together): state changes, and controls with the label of the token used and the peer address |
//! | `POST /breakers/{name}/force-open`, `/disable`, `/reset` | the control, with an empty body (or `{}`) |
//! | `POST /breakers/{name}/trip-for` | opens it for `{"duration": "30s"}` (the attribute's duration text) |
//! | `GET /breakers/{family}/keys` | a page of a keyed family's keys: `?sort=key\|state\|failure_rate\|volume&offset=&limit=&q=` (`limit` at most 500) |
//! | `GET /breakers/{family}/keys/{key}` | one key (percent-encoded in the path) |
//! | `GET /breakers/{family}/keys/{key}/events` | that key's last events |
//! | `GET /breakers/{family}/keys/{key}/config` | where each key of that key's config came from |
//! | `POST /breakers/{family}/keys/{key}/force-open`, `/disable`, `/reset`, `/trip-for` | the control, on that key alone |
//! | `GET /breakers/{name}/replay` | the breaker's replay journal (feature `replay`): size, oldest entry, dead letters, counts |
//! | `GET /breakers/{name}/replay/dead-letters` | its dead letters, oldest first |
//! | `POST /breakers/{name}/replay/dead-letters/retry`, `/drop` | every dead letter back in the queue, or dropped |
//! | `GET /replays` | every live replay's journal, as `/breakers/{name}/replay` shows it (feature `replay`) |
//! | `GET /events` | server-sent events: `state` on each change, `metrics` every second, `dropped` after a lag |
//! | `GET /health`, `/health/readiness` | [`Registry::health`](breakerbox_runtime::Registry::health) as Spring Boot's actuator answers it: `{"status": "UP", "components": {…}}`, `200` for `UP` and `DEGRADED`, `503` for `DOWN`; a shared breaker judged as [`HealthScope`] says |
//! | `GET /health/liveness` | `{"status": "UP"}` whenever the router answers |
//! | `GET /metrics` | Prometheus text, with feature `metrics` and `Admin::prometheus` |
//! | `GET /fleet` | the fleet view: each shared breaker's live instances and their local states, with feature `fleet` and `Admin::fleet` |
//!
//! `docs/admin.md` in the repository gives every JSON shape and the event stream's format.
//! Every error is a JSON body `{"error": "<sentence>", "status": <code>}` with a 4xx status.
//!
//! # Security
//!
//! - **Bind it to loopback, or mount it behind your application's own authentication.** The
//!   read-only views tell anyone who reaches them your breakers' names, configs and last
//!   failure messages.
//! - The controls need `Authorization: Bearer <token>` with a token given to
//!   [`Admin::token`] or [`Admin::named_token`] (each control is recorded with its label),
//!   compared in constant time (the time depends on the configured token's
//!   length only). Without a token the controls answer `403` and change nothing.
//! - A missing or wrong token is a `401`; a request body over 4 KiB is a `413`; a malformed
//!   body is a `400`; an unknown breaker, family, key or action is a `404`. Each changes
//!   nothing.
//! - No CORS headers are sent, so another origin's page cannot read the views or send the
//!   token. The dashboard forbids framing and loading anything from another origin
//!   (`Content-Security-Policy`).
//!
//! # The event stream
//!
//! The first router built installs one registry-wide listener
//! ([`Registry::on_state_change`](breakerbox_runtime::Registry::on_state_change)) that puts each change
//! on a tokio broadcast channel of 1024 events. It never waits: a client that falls more than
//! 1024 changes behind loses the oldest, and is told how many with a `dropped` event. Breakers
//! made with [`Breaker::new`](breakerbox_runtime::Breaker::new) are not in the registry and are not served.
//!
//! The stream and its per-second ticks need a tokio runtime with its timer, as any axum server
//! has. A stream ends when its client goes, or when the signal given to
//! [`Admin::end_streams_on`] completes: give it your server's graceful-shutdown signal, which
//! otherwise waits for every open stream.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod auth;
mod breakers;
mod config_sources;
mod control;
mod dashboard;
mod events;
mod fallback;
mod family_keys;
#[cfg(feature = "fleet")]
mod fleet;
mod health;
mod health_scope;
mod history;
mod prometheus;
#[cfg(feature = "replay")]
mod replay;
mod respond;
mod routes;
mod state;
mod stream;

pub use health_scope::HealthScope;
pub use routes::{Admin, router};
