//! What the router answers where it serves nothing: an unknown path (`404`), a method a path
//! does not take (`405`), and the routes of a feature this build lacks (a `404` that says what
//! turns it on).

use axum::http::StatusCode;
#[cfg(not(feature = "fleet"))]
use axum::response::{IntoResponse, Response};

use crate::respond::Problem;

/// The replay routes without the feature: a `404` that says what turns them on.
#[cfg(not(feature = "replay"))]
pub(crate) async fn no_replay() -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no replay here: this admin router was built without its `replay` feature \
         (breakerbox's `admin` and `replay` features together turn it on)",
    )
}

/// `GET /fleet` without the feature: a `404` that says what turns it on.
#[cfg(not(feature = "fleet"))]
pub(crate) async fn no_fleet() -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "no fleet here: it needs the `fleet` feature (the facade's `admin` with `redis`) and \
         `Admin::new().fleet(fleet.view())`",
    )
    .into_response()
}

/// Any other path: a `404` that lists the endpoints.
pub(crate) async fn not_found(uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        format!(
            "no admin endpoint at '{}'; there are GET /, /breakers, /breakers/{{name}}, \
             /breakers/{{name}}/events, /breakers/{{family}}/keys, /breakers/{{family}}/keys/{{key}}, \
             /breakers/{{family}}/keys/{{key}}/events, /breakers/{{name}}/replay, \
             /breakers/{{name}}/replay/dead-letters, /replays, /events, /health, /metrics and \
             POST /breakers/{{name}}/{{action}}, /breakers/{{family}}/keys/{{key}}/{{action}} \
             (actions: force-open, disable, reset, trip-for), \
             /breakers/{{name}}/replay/dead-letters/retry, /breakers/{{name}}/replay/dead-letters/drop",
            breakerbox_runtime::__integrations::excerpt(uri.path())
        ),
    )
}

/// A known path with the wrong method: a `405` that names the right one.
pub(crate) async fn method_not_allowed(
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> Problem {
    // The controls are the third segment of a breaker's path and the fifth of a key's or a
    // replay's; the views of those lengths (a breaker's or a key's config and events, a
    // family's keys, a replay) are read with GET.
    let segments: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
    let view = |last: &str| matches!(last, "config" | "events" | "keys" | "replay");
    let allowed = match segments.len() {
        3 | 5 if !view(segments[segments.len() - 1]) => "POST",
        _ => "GET",
    };
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{method} is not allowed on '{}': use {allowed}",
            breakerbox_runtime::__integrations::excerpt(uri.path())
        ),
    )
}
