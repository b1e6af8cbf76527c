//! The admin event stream's `metrics` ticks under a storm of state changes (`GET /events`): a
//! binary of its own, on tokio's paused clock. Failed before the tick was asked first (found
//! by an adversarial review).

// The admin tests' helpers (one of them, `next_event`, is used here).
#[allow(dead_code)]
#[path = "admin/support.rs"]
mod support;

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use breakerbox::{Config, registry};
use tower::ServiceExt;

use support::next_event;

/// docs/admin.md: "`metrics`: at once on connecting, then every second on tokio's clock".
/// While a state change is waiting each time the client reads (a flapping breaker, a client
/// slower than the changes), the stream sent only `state` events before the fix: `select`
/// polled the broadcast receiver first, so the due tick never won and the dashboard's rates, sparklines
/// and `dropped` count stop for as long as the changes keep coming.
#[tokio::test(start_paused = true)]
async fn metrics_ticks_keep_coming_while_state_changes_keep_arriving() {
    let breaker = registry().get_or_create("review-sse-storm", Config::default);
    let res = breakerbox::admin::router()
        .oneshot(Request::get("/events").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let mut body = res.into_body().into_data_stream();
    let (name, _) = next_event(&mut body).await;
    assert_eq!(name, "metrics", "the first tick, at once");

    // Ten seconds on tokio's clock, half a second at a time; one change waits at each read.
    let mut seen = Vec::new();
    for i in 0..20 {
        tokio::time::advance(Duration::from_millis(500)).await;
        if i % 2 == 0 {
            breaker.force_open();
        } else {
            breaker.reset();
        }
        seen.push(next_event(&mut body).await.0);
    }
    let ticks = seen.iter().filter(|n| *n == "metrics").count();
    assert!(
        ticks >= 5,
        "10 s of tokio time passed with a change always waiting: {ticks} metrics ticks in {seen:?}"
    );
}
