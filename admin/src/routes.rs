//! The router: [`Admin`], which builds it, and its table of routes, each to the module that
//! serves it.

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

use crate::auth::Tokens;
use crate::control::BODY_LIMIT;
use crate::dashboard::dashboard;
use crate::fallback::{method_not_allowed, not_found};
use crate::health_scope::HealthScope;
use crate::prometheus::metrics;
use crate::state::AdminState;
#[cfg(feature = "metrics")]
use crate::state::Render;
use crate::{breakers, config_sources, control, events, family_keys, health, stream};

#[cfg(not(feature = "replay"))]
use crate::fallback::{
    no_replay as replay_dead_letters, no_replay as replay_drop, no_replay as replay_list,
    no_replay as replay_retry, no_replay as replay_status,
};
#[cfg(feature = "replay")]
use crate::replay::{
    dead_letters as replay_dead_letters, drop_all as replay_drop, list as replay_list,
    retry as replay_retry, status as replay_status,
};

#[cfg(not(feature = "fleet"))]
use crate::fallback::no_fleet as fleet;
#[cfg(feature = "fleet")]
use crate::fleet::fleet;

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
    tokens: Tokens,
    health_scope: HealthScope,
    #[cfg(feature = "metrics")]
    prometheus: Option<Render>,
    #[cfg(feature = "fleet")]
    fleet: Option<breakerbox_fleet::FleetView>,
    streams_end: Option<crate::state::StreamsEnd>,
}

impl Admin {
    /// A read-only admin: no token, no Prometheus text.
    pub fn new() -> Admin {
        Admin::default()
    }

    /// Turns the controls on for requests that send `Authorization: Bearer <token>`, under
    /// the label `admin` (see [`named_token`](Admin::named_token)).
    ///
    /// An empty token removes it, as if none were given: an empty bearer is no secret.
    /// Whitespace around it is dropped (a token read from a file keeps its newline, which no
    /// request can send). Use a long random string, and keep it out of source code.
    pub fn token(self, token: impl Into<String>) -> Admin {
        self.named_token("admin", token)
    }

    /// Turns the controls on for requests that send `Authorization: Bearer <token>`, and
    /// names who holds it: each control used with it is recorded with `label` (in the
    /// breaker's events, `GET /breakers/{name}/events`, and in the log). Give each person or
    /// system its own token; a second token under one label replaces the first, and an empty
    /// token removes the label's. Whitespace around a token is dropped, as [`token`](Admin::token)
    /// says.
    ///
    /// ```
    /// use breakerbox_admin::Admin;
    ///
    /// let admin = Admin::new()
    ///     .named_token("alice", std::env::var("ALICE_TOKEN").unwrap_or_default())
    ///     .named_token("deploy-bot", std::env::var("BOT_TOKEN").unwrap_or_default())
    ///     .router();
    /// # let _ = admin;
    /// ```
    pub fn named_token(mut self, label: impl Into<String>, token: impl Into<String>) -> Admin {
        self.tokens.set(label.into(), token.into());
        self
    }

    /// How `GET /health` judges a breaker whose state another instance made (fleet mode):
    /// by what this instance saw ([`HealthScope::Instance`], the default), or by its state
    /// whoever made it ([`HealthScope::Fleet`]). See [`HealthScope`] for why the default.
    ///
    /// ```
    /// use breakerbox_admin::{Admin, HealthScope};
    ///
    /// let admin = Admin::new().health_scope(HealthScope::Fleet).router();
    /// # let _ = admin;
    /// ```
    pub fn health_scope(mut self, scope: HealthScope) -> Admin {
        self.health_scope = scope;
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

    /// Ends every `GET /events` stream once `signal` completes: give it the signal your
    /// server's graceful shutdown waits for. An event stream is a response that never ends
    /// by itself, and axum's `with_graceful_shutdown` waits for every response to end, so
    /// without this one dashboard left open holds the shutdown until the client goes (or the
    /// orchestrator's kill). A stream asked for after `signal` completed ends at once.
    ///
    /// ```
    /// use breakerbox_admin::Admin;
    ///
    /// # async fn serve(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    /// let (stop, stopped) = tokio::sync::watch::channel(());
    /// let mut streams_stopped = stopped.clone();
    /// let admin = Admin::new()
    ///     .end_streams_on(async move { streams_stopped.changed().await.unwrap_or(()) })
    ///     .router();
    /// let mut server_stopped = stopped;
    /// axum::serve(listener, admin)
    ///     .with_graceful_shutdown(async move { server_stopped.changed().await.unwrap_or(()) })
    ///     .await?;
    /// # drop(stop);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// (`stop.send(())`, from the SIGTERM handler, stops both.) A `signal` that panics ends
    /// the streams as if it had completed; the panic goes no further.
    pub fn end_streams_on(
        mut self,
        signal: impl core::future::Future<Output = ()> + Send + 'static,
    ) -> Admin {
        use futures_util::FutureExt;
        let signal = core::panic::AssertUnwindSafe(signal)
            .catch_unwind()
            .map(|_| ());
        let signal: core::pin::Pin<Box<dyn core::future::Future<Output = ()> + Send>> =
            Box::pin(signal);
        self.streams_end = Some(signal.shared());
        self
    }

    /// The router. Mount it where you like: `Router::nest_service("/admin", …)` serves the
    /// dashboard at `/admin` and `/admin/` (axum's `nest` routes `/admin` only). The dashboard
    /// finds the other endpoints relative to its own address.
    pub fn router(self) -> Router {
        stream::install();
        let shared = Arc::new(AdminState {
            tokens: self.tokens,
            health_scope: self.health_scope,
            #[cfg(feature = "metrics")]
            prometheus: self.prometheus,
            #[cfg(feature = "fleet")]
            fleet: self.fleet,
            streams_end: self.streams_end,
        });
        Router::new()
            .route("/", get(dashboard))
            .route("/breakers", get(breakers::list))
            .route("/breakers/{name}", get(breakers::detail))
            .route("/breakers/{name}/{action}", post(control::act))
            .route("/breakers/{name}/config", get(config_sources::breaker))
            .route("/breakers/{name}/events", get(events::breaker))
            .route("/breakers/{name}/keys", get(family_keys::list))
            .route("/breakers/{name}/keys/{key}", get(family_keys::detail))
            .route(
                "/breakers/{name}/keys/{key}/config",
                get(config_sources::key),
            )
            .route("/breakers/{name}/keys/{key}/events", get(events::key))
            .route(
                "/breakers/{name}/keys/{key}/{action}",
                post(family_keys::act),
            )
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
            .route("/health/readiness", get(health::health))
            .route("/health/liveness", get(health::liveness))
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
            .field("control", &self.tokens.any())
            .field("token_labels", &self.tokens.labels())
            .field("ends_streams", &self.streams_end.is_some())
            .finish_non_exhaustive()
    }
}
