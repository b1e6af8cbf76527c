//! The admin event stream's `metrics` ticks under a storm of state changes (`GET /events`), on
//! tokio's paused clock. It runs [`alone`](crate::support::alone): the storm's changes would
//! crowd the other stream tests' channel.

use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use breakerbox_runtime::{Config, registry};
use tower::ServiceExt;

use crate::support::next_event;

/// docs/admin.md: "`metrics`: at once on connecting, then every second on tokio's clock".
/// That holds while a state change is waiting each time the client reads (a flapping breaker,
/// a client slower than the changes): the stream asks whether the tick is due before it reads
/// the broadcast receiver, or the dashboard's rates, sparklines and `dropped` count would stop
/// for as long as the changes keep coming.
#[tokio::test(start_paused = true)]
async fn metrics_ticks_keep_coming_while_state_changes_keep_arriving() {
    let _alone = crate::support::alone().await;
    let breaker = registry().get_or_create("adm-sse-storm", Config::default);
    let res = breakerbox_admin::router()
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
