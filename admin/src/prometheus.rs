//! `GET /metrics`: Prometheus text (feature `metrics`, with
//! [`Admin::prometheus`](crate::Admin::prometheus)), after `breakerbox-metrics`'s export; a
//! `404` that says what turns it on otherwise.

#[cfg(feature = "metrics")]
use std::sync::Arc;

use axum::http::StatusCode;
#[cfg(feature = "metrics")]
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::respond::Problem;
#[cfg(feature = "metrics")]
use crate::state::AdminState;

/// Prometheus text from the renderer [`Admin::prometheus`](crate::Admin::prometheus) gave, or
/// a `404` without one.
#[cfg(feature = "metrics")]
pub(crate) async fn metrics(
    axum::extract::State(shared): axum::extract::State<Arc<AdminState>>,
) -> Response {
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

/// Without the feature: the `404`.
#[cfg(not(feature = "metrics"))]
pub(crate) async fn metrics() -> Response {
    no_metrics()
}

/// A `404` that says what serves Prometheus text.
fn no_metrics() -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no Prometheus text here: it needs the `metrics` feature and \
         `Admin::new().prometheus(move || handle.render())` with your recorder's handle",
    )
    .into_response()
}
