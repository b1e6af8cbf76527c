//! The admin event stream's lag. It runs [`alone`](crate::support::alone), so that no other
//! test's breakers put events on the process-wide channel and the counts are exact.

use axum::body::Body;
use axum::http::Request;
use breakerbox_runtime::{Config, registry};
use serde_json::json;
use tower::ServiceExt;

use crate::support::next_event;

/// Events a client may fall behind by (`admin`'s channel).
const CAPACITY: usize = 1024;

#[tokio::test(start_paused = true)]
async fn a_client_that_lags_loses_the_oldest_changes_and_is_told_how_many() {
    let _alone = crate::support::alone().await;
    let breaker = registry().get_or_create("lagging", Config::default);
    let res = breakerbox_admin::router()
        .oneshot(Request::get("/events").body(Body::empty()).unwrap())
        .await
        .unwrap();
    let mut body = res.into_body().into_data_stream();

    // 1034 changes while the client reads nothing: the listener never waits for it.
    let changes = CAPACITY + 10;
    for i in 0..changes {
        if i % 2 == 0 {
            breaker.force_open();
        } else {
            breaker.reset();
        }
    }

    // The tick due at connecting, then the loss, then the 1024 changes kept (the last ones),
    // in order, then the next tick, which counts the loss.
    let (name, tick) = next_event(&mut body).await;
    assert_eq!(name, "metrics");
    assert_eq!(tick["dropped"], 0);
    assert_eq!(
        next_event(&mut body).await,
        ("dropped".to_owned(), json!({ "dropped": 10 }))
    );
    for i in 10..changes {
        let (name, change) = next_event(&mut body).await;
        assert_eq!(name, "state");
        let to = if i % 2 == 0 { "forced-open" } else { "closed" };
        assert_eq!(change["to"], to, "change {i}");
    }
    let (name, tick) = next_event(&mut body).await;
    assert_eq!(name, "metrics");
    assert_eq!(tick["dropped"], 10);
}
