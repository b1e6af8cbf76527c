//! `GET /health`: the registry's health as Spring Boot's actuator answers it, `200` for UP and
//! DEGRADED, `503` for DOWN. Its own process: the health is every breaker's of the registry.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use breakerbox_runtime::{Config, State, registry};
use serde_json::Value;
use tower::ServiceExt;

/// The tests judge the whole registry's status: one at a time.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _alone = ALONE.lock().await;
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

/// `GET /health` of `app`: the status code, the overall status, and `name`'s component.
async fn judged(app: &axum::Router, name: &str) -> (StatusCode, String, Value) {
    let req = Request::get("/health").body(Body::empty()).unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let code = res.status();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    let status = body["status"].as_str().unwrap().to_owned();
    (code, status, body["components"][name].clone())
}

/// A breaker of another instance's, tripped: what fleet mode hands this one through
/// `import_state`.
fn tripped_elsewhere(name: &str) -> breakerbox_runtime::SharedState {
    let remote = breakerbox_runtime::Breaker::new(
        name,
        Config::builder()
            .failures(1)
            .open_for(Duration::from_secs(10))
            .build()
            .unwrap(),
    );
    let _ = remote.call(|| Err::<(), _>("HTTP 503"));
    remote.export_state()
}

#[tokio::test]
async fn a_critical_breaker_opened_by_another_instance_leaves_this_one_ready_through_the_probe_rounds()
 {
    let _alone = ALONE.lock().await;
    // The router first: its listener sees every change from here on.
    let app = breakerbox_admin::router();
    let by_fleet = breakerbox_admin::Admin::new()
        .health_scope(breakerbox_admin::HealthScope::Fleet)
        .router();
    let clock = breakerbox_runtime::ManualClock::new();
    registry().set_clock("ledger", clock.clone());
    let ledger = registry().get_or_create("ledger", || {
        Config::builder()
            .failures(1)
            .open_for(Duration::from_secs(10))
            .critical(true)
            .build()
            .unwrap()
    });
    let fleet_record = tripped_elsewhere("ledger");

    // Another instance tripped it: this one rejects its calls, and stays ready.
    ledger.import_state(&fleet_record);
    assert_eq!(ledger.state(), State::Open);
    let (code, status, ledger_health) = judged(&app, "ledger").await;
    assert_eq!((code, status.as_str()), (StatusCode::OK, "DEGRADED"));
    assert_eq!(ledger_health["status"], "DEGRADED");
    assert_eq!(ledger_health["details"]["openedBy"], "fleet");
    // Judged by the fleet's state, every instance is DOWN together.
    let (code, status, _) = judged(&by_fleet, "ledger").await;
    assert_eq!(
        (code, status.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "DOWN")
    );

    // The fleet's probe rounds: the open time runs out here (half-open), the fleet's record
    // is taken on again; readiness stays 200 through every round.
    for _ in 0..3 {
        clock.advance(Duration::from_secs(10));
        drop(ledger.try_acquire());
        assert_eq!(ledger.state(), State::HalfOpen);
        assert_eq!(judged(&app, "ledger").await.0, StatusCode::OK);
        ledger.import_state(&fleet_record);
        assert_eq!(ledger.state(), State::Open);
        assert_eq!(judged(&app, "ledger").await.0, StatusCode::OK);
    }

    // This instance's own calls trip it: DOWN, and the fleet's record of that trip taken on
    // over it leaves it DOWN.
    ledger.reset();
    let _ = ledger.call(|| Err::<(), _>("connection refused"));
    let (code, status, ledger_health) = judged(&app, "ledger").await;
    assert_eq!(
        (code, status.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "DOWN")
    );
    assert!(ledger_health["details"].get("openedBy").is_none());
    ledger.import_state(&fleet_record);
    assert_eq!(
        judged(&app, "ledger").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Its own opening over, it half-opens to probe: ready again, and the fleet's record
    // taken on after that does not take it back out.
    clock.advance(Duration::from_secs(10));
    drop(ledger.try_acquire());
    assert_eq!(judged(&app, "ledger").await.0, StatusCode::OK);
    ledger.import_state(&fleet_record);
    assert_eq!(judged(&app, "ledger").await.0, StatusCode::OK);
    // Its own probe fails: out again.
    clock.advance(Duration::from_secs(10));
    let _ = ledger.call(|| Err::<(), _>("connection refused"));
    assert_eq!(ledger.state(), State::Open);
    assert_eq!(
        judged(&app, "ledger").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    ledger.reset();
    let (code, status, _) = judged(&app, "ledger").await;
    assert_eq!((code, status.as_str()), (StatusCode::OK, "UP"));
}

#[tokio::test]
async fn a_critical_familys_key_opened_by_another_instance_leaves_this_one_ready() {
    let _alone = ALONE.lock().await;
    let app = breakerbox_admin::router();
    let shards = registry()
        .family::<String>("shards", || {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(60))
                .critical(true)
                .build()
                .unwrap()
        })
        .unwrap();
    let (a, b) = ("a".to_owned(), "b".to_owned());
    shards.call(&a, || Ok::<_, &str>(())).unwrap();
    shards.call(&b, || Ok::<_, &str>(())).unwrap();
    shards
        .breaker(&a)
        .import_state(&tripped_elsewhere("shards"));
    let (code, _, shards_health) = judged(&app, "shards").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(shards_health["status"], "DEGRADED");
    assert_eq!(shards_health["details"]["openKeys"], 1);
    assert_eq!(shards_health["details"]["openedBy"], "fleet");

    // Another key tripped by this instance's own calls: DOWN.
    let _ = shards.call(&b, || Err::<(), _>("refused"));
    let (code, _, shards_health) = judged(&app, "shards").await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(shards_health["status"], "DOWN");
    for key in [&a, &b] {
        shards.breaker(key).reset();
    }
    assert_eq!(judged(&app, "shards").await.0, StatusCode::OK);
}

#[tokio::test]
async fn liveness_answers_up_while_a_critical_breaker_is_open() {
    let _alone = ALONE.lock().await;
    let app = breakerbox_admin::router();
    let vault = registry().get_or_create("vault", || {
        Config::builder()
            .failures(1)
            .critical(true)
            .build()
            .unwrap()
    });
    let _ = vault.call(|| Err::<(), _>("sealed"));
    assert_eq!(
        judged(&app, "vault").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let req = Request::get("/health/liveness")
        .body(Body::empty())
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&bytes).unwrap(),
        serde_json::json!({"status": "UP"})
    );
    let req = Request::get("/health/readiness")
        .body(Body::empty())
        .unwrap();
    assert_eq!(
        app.clone().oneshot(req).await.unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    vault.reset();
}

#[tokio::test]
async fn a_critical_breaker_open_is_down_though_a_family_has_its_name() {
    let _alone = ALONE.lock().await;
    // A breaker and a keyed family of one name (which `check` reports, but which runs).
    let config = || {
        Config::builder()
            .failures(1)
            .open_for(Duration::from_secs(60))
            .critical(true)
            .build()
            .unwrap()
    };
    let ledger = registry().get_or_create("health-twin", config);
    let shards = registry().family::<u32>("health-twin", config).unwrap();
    shards.call(&1, || Ok::<_, &str>(())).unwrap();
    let _ = ledger.call(|| Err::<(), _>("connection refused"));
    assert_eq!(ledger.state(), State::Open);
    let (code, body) = health().await;
    ledger.reset();
    assert_eq!(
        (code, body["status"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("DOWN")),
        "{body}"
    );
}
