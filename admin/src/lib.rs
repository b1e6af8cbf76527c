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
//! | `POST /breakers/{name}/force-open`, `/disable`, `/reset` | the control, with an empty body (or `{}`) |
//! | `POST /breakers/{name}/trip-for` | opens it for `{"duration": "30s"}` (the attribute's duration text) |
//! | `GET /breakers/{family}/keys` | a page of a keyed family's keys: `?sort=key\|state\|failure_rate\|volume&offset=&limit=&q=` (`limit` at most 500) |
//! | `GET /breakers/{family}/keys/{key}` | one key (percent-encoded in the path) |
//! | `GET /breakers/{family}/keys/{key}/config` | where each key of that key's config came from |
//! | `POST /breakers/{family}/keys/{key}/force-open`, `/disable`, `/reset`, `/trip-for` | the control, on that key alone |
//! | `GET /breakers/{name}/replay` | the breaker's replay journal (feature `replay`): size, oldest entry, dead letters, counts |
//! | `GET /breakers/{name}/replay/dead-letters` | its dead letters, oldest first |
//! | `POST /breakers/{name}/replay/dead-letters/retry`, `/drop` | every dead letter back in the queue, or dropped |
//! | `GET /replays` | every live replay's journal, as `/breakers/{name}/replay` shows it (feature `replay`) |
//! | `GET /events` | server-sent events: `state` on each change, `metrics` every second, `dropped` after a lag |
//! | `GET /health` | [`Registry::health`](breakerbox_runtime::Registry::health) as Spring Boot's actuator answers it: `{"status": "UP", "components": {…}}`, `200` for `UP` and `DEGRADED`, `503` for `DOWN` |
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
//! - The controls need `Authorization: Bearer <token>` with the token given to
//!   [`Admin::token`], compared in constant time (the time depends on the configured token's
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
//! has.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod auth;
mod control;
#[cfg(feature = "fleet")]
mod fleet;
mod health;
mod keys;
#[cfg(feature = "replay")]
mod replay;
mod sources;
mod stream;
mod view;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use auth::Token;

/// The largest request body the router reads, in bytes.
pub(crate) const BODY_LIMIT: usize = 4096;

/// The dashboard page (`GET /`), with its script and style.
const DASHBOARD: &str = include_str!("dashboard.html");

/// A read-only admin router: [`Admin::new().router()`](Admin::router).
pub fn router() -> Router {
    Admin::new().router()
}

/// Builds the admin [`Router`]: the token that turns the controls on, and the Prometheus
/// renderer.
///
/// ```
/// use breakerbox_admin::Admin;
///
/// let admin = Admin::new().token("s3cret").router();
/// # let _ = admin;
/// ```
#[derive(Default)]
pub struct Admin {
    token: Option<Token>,
    #[cfg(feature = "metrics")]
    prometheus: Option<Render>,
    #[cfg(feature = "fleet")]
    fleet: Option<breakerbox_fleet::FleetView>,
}

#[cfg(feature = "metrics")]
type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// What every handler shares.
pub(crate) struct Shared {
    pub(crate) token: Option<Token>,
    #[cfg(feature = "metrics")]
    prometheus: Option<Render>,
    #[cfg(feature = "fleet")]
    pub(crate) fleet: Option<breakerbox_fleet::FleetView>,
}

impl Admin {
    /// A read-only admin: no token, no Prometheus text.
    pub fn new() -> Admin {
        Admin::default()
    }

    /// Turns the controls on for requests that send `Authorization: Bearer <token>`.
    ///
    /// An empty token turns them off, as if none were given: an empty bearer is no secret.
    /// Use a long random string, and keep it out of source code.
    pub fn token(mut self, token: impl Into<String>) -> Admin {
        let token: String = token.into();
        self.token = (!token.is_empty()).then(|| Token::new(token.into_bytes()));
        self
    }

    /// Serves `GET /metrics`: calls [`export::record_all`](breakerbox_metrics::record_all), then
    /// answers `render()` as Prometheus text.
    ///
    /// The `metrics` crate's recorder is global and the application's to choose, so the admin
    /// does not install one; it asks the one you installed to render:
    ///
    /// ```ignore
    /// let handle = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    /// let admin = Admin::new().prometheus(move || handle.render()).router();
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn prometheus(mut self, render: impl Fn() -> String + Send + Sync + 'static) -> Admin {
        self.prometheus = Some(Arc::new(render));
        self
    }

    /// Serves `GET /fleet`, the fleet view: each shared breaker with the live instances
    /// sharing it and each one's local state, from [`Fleet::view`](breakerbox_fleet::Fleet::view).
    /// The dashboard shows it on the breakers' tiles.
    ///
    /// ```ignore
    /// let fleet = Fleet::start(config)?;
    /// let admin = Admin::new().fleet(fleet.view()).router();
    /// ```
    #[cfg(feature = "fleet")]
    #[cfg_attr(docsrs, doc(cfg(feature = "fleet")))]
    pub fn fleet(mut self, view: breakerbox_fleet::FleetView) -> Admin {
        self.fleet = Some(view);
        self
    }

    /// The router. Mount it where you like: `Router::nest_service("/admin", …)` serves the
    /// dashboard at `/admin` and `/admin/` (axum's `nest` routes `/admin` only). The dashboard
    /// finds the other endpoints relative to its own address.
    pub fn router(self) -> Router {
        stream::install();
        let shared = Arc::new(Shared {
            token: self.token,
            #[cfg(feature = "metrics")]
            prometheus: self.prometheus,
            #[cfg(feature = "fleet")]
            fleet: self.fleet,
        });
        Router::new()
            .route("/", get(dashboard))
            .route("/breakers", get(view::list))
            .route("/breakers/{name}", get(view::detail))
            .route("/breakers/{name}/{action}", post(control::act))
            .route("/breakers/{name}/config", get(sources::breaker))
            .route("/breakers/{name}/keys", get(keys::list))
            .route("/breakers/{name}/keys/{key}", get(keys::detail))
            .route("/breakers/{name}/keys/{key}/config", get(sources::key))
            .route("/breakers/{name}/keys/{key}/{action}", post(keys::act))
            .route("/breakers/{name}/replay", get(replay_status))
            .route(
                "/breakers/{name}/replay/dead-letters",
                get(replay_dead_letters),
            )
            .route(
                "/breakers/{name}/replay/dead-letters/retry",
                post(replay_retry),
            )
            .route(
                "/breakers/{name}/replay/dead-letters/drop",
                post(replay_drop),
            )
            .route("/replays", get(replay_list))
            .route("/events", get(stream::events))
            .route("/health", get(health::health))
            .route("/fleet", get(fleet))
            .route("/metrics", get(metrics))
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
            .layer(DefaultBodyLimit::max(BODY_LIMIT))
            .with_state(shared)
    }
}

impl core::fmt::Debug for Admin {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Never the token itself.
        f.debug_struct("Admin")
            .field("control", &self.token.is_some())
            .finish_non_exhaustive()
    }
}

/// A 4xx answer: `{"error": "...", "status": n}`.
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Problem {
        Problem {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message, "status": self.status.as_u16() });
        let mut response = json(&body);
        *response.status_mut() = self.status;
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// `value` as a `200` JSON answer, never cached.
pub(crate) fn json(value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        // Our views hold strings, numbers and maps with string keys only.
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn dashboard() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
                 frame-ancestors 'none'",
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        DASHBOARD,
    )
        .into_response()
}

#[cfg(feature = "replay")]
use replay::{dead_letters as replay_dead_letters, list as replay_list, status as replay_status};
#[cfg(feature = "replay")]
use replay::{drop_all as replay_drop, retry as replay_retry};

/// The replay routes without the feature: a `404` that says what turns them on.
#[cfg(not(feature = "replay"))]
async fn no_replay() -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no replay here: this admin router was built without its `replay` feature \
         (breakerbox's `admin` and `replay` features together turn it on)",
    )
}
#[cfg(not(feature = "replay"))]
use {
    no_replay as replay_status, no_replay as replay_dead_letters, no_replay as replay_retry,
    no_replay as replay_drop, no_replay as replay_list,
};

#[cfg(feature = "metrics")]
async fn metrics(axum::extract::State(shared): axum::extract::State<Arc<Shared>>) -> Response {
    let Some(render) = shared.prometheus.clone() else {
        return no_metrics();
    };
    // Snapshots of every breaker, then the user's renderer: blocking work, but short and
    // bounded by the number of breakers, as on any scrape.
    breakerbox_metrics::record_all();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        render(),
    )
        .into_response()
}

#[cfg(not(feature = "metrics"))]
async fn metrics() -> Response {
    no_metrics()
}

#[cfg(feature = "fleet")]
use fleet::fleet;

#[cfg(not(feature = "fleet"))]
async fn fleet() -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no fleet here: it needs the `fleet` feature (the facade's `admin` with `redis`) and \
         `Admin::new().fleet(fleet.view())`",
    )
    .into_response()
}

fn no_metrics() -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no Prometheus text here: it needs the `metrics` feature and \
         `Admin::new().prometheus(move || handle.render())` with your recorder's handle",
    )
    .into_response()
}

async fn not_found(uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        format!(
            "no admin endpoint at '{}'; there are GET /, /breakers, /breakers/{{name}}, \
             /breakers/{{family}}/keys, /breakers/{{family}}/keys/{{key}}, /breakers/{{name}}/replay, \
             /breakers/{{name}}/replay/dead-letters, /replays, /events, /health, /metrics and \
             POST /breakers/{{name}}/{{action}}, /breakers/{{family}}/keys/{{key}}/{{action}} \
             (actions: force-open, disable, reset, trip-for), \
             /breakers/{{name}}/replay/dead-letters/retry, /breakers/{{name}}/replay/dead-letters/drop",
            breakerbox_runtime::__edge::excerpt(uri.path())
        ),
    )
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Problem {
    // The controls are the third segment of a breaker's path and the fifth of a key's.
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let allowed = match segments.len() {
        3 if segments[2] != "keys" && segments[2] != "replay" => "POST",
        n if n >= 5 => "POST",
        _ => "GET",
    };
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{method} is not allowed on '{}': use {allowed}",
            breakerbox_runtime::__edge::excerpt(uri.path())
        ),
    )
}
