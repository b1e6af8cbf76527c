//! `GET /health`: the registry's health as Spring Boot's actuator answers it, `200` for UP and
//! DEGRADED, `503` for DOWN. Its own process: the health is every breaker's of the registry.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use breakerbox_runtime::{Config, State, registry};
use serde_json::Value;
use tower::ServiceExt;

async fn health() -> (StatusCode, Value) {
    let req = Request::get("/health").body(Body::empty()).unwrap();
    let res = breakerbox_admin::router().oneshot(req).await.unwrap();
    let status = res.status();
    assert_eq!(res.headers()[header::CONTENT_TYPE], "application/json");
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn health_answers_up_degraded_and_down_as_a_readiness_probe_expects() {
    let one = || {
        Config::builder()
            .failures(1)
            .open_for(Duration::from_secs(60))
    };
    let search = registry().get_or_create("search", || one().build().unwrap());
    let db = registry().get_or_create("db", || one().critical(true).build().unwrap());
    let hosts = registry()
        .family::<String>("hosts", || one().build().unwrap())
        .unwrap();
    hosts.call(&"a".to_owned(), || Ok::<_, &str>(())).unwrap();

    let (code, body) = health().await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["status"], "UP");
    assert_eq!(body["components"]["db"]["status"], "UP");
    assert_eq!(body["components"]["db"]["details"]["state"], "closed");
    assert_eq!(body["components"]["db"]["details"]["critical"], true);
    assert_eq!(body["components"]["hosts"]["details"]["keys"], 1);
    assert_eq!(body["components"]["hosts"]["details"]["openKeys"], 0);

    // A key open: DEGRADED, still 200 (the pod serves, short of one host).
    let _ = hosts.call(&"b".to_owned(), || Err::<(), _>("refused"));
    let (code, body) = health().await;
    assert_eq!(
        (code, body["status"].as_str()),
        (StatusCode::OK, Some("DEGRADED"))
    );
    assert_eq!(body["components"]["hosts"]["status"], "DEGRADED");
    assert_eq!(body["components"]["hosts"]["details"]["openKeys"], 1);

    let _ = search.call(|| Err::<(), _>("timeout"));
    assert_eq!(
        health().await.1["components"]["search"]["status"],
        "DEGRADED"
    );

    // The critical one open: DOWN, 503.
    let _ = db.call(|| Err::<(), _>("connection refused"));
    assert_eq!(db.state(), State::Open);
    let (code, body) = health().await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["status"], "DOWN");
    assert_eq!(body["components"]["db"]["status"], "DOWN");
    assert_eq!(body["components"]["db"]["details"]["state"], "open");

    for b in [&db, &search, &hosts.breaker(&"b".to_owned())] {
        b.reset();
    }
    let (code, body) = health().await;
    assert_eq!(
        (code, body["status"].as_str()),
        (StatusCode::OK, Some("UP"))
    );
}
