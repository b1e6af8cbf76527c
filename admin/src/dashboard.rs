//! `GET /`: the dashboard, one HTML page (`dashboard.html`) with its script and style inline,
//! under a `Content-Security-Policy` that loads nothing from elsewhere.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The dashboard page, with its script and style.
const DASHBOARD: &str = include_str!("dashboard.html");

pub(crate) async fn dashboard() -> Response {
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
