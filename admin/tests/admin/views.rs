//! `GET /breakers`, `GET /breakers/{name}`, the dashboard page and Prometheus text.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use breakerbox_admin::{self as admin, Admin};
use breakerbox_runtime::{Config, registry};
use serde_json::{Value, json};
use std::time::Duration;

use crate::support::*;

#[tokio::test]
async fn the_list_shows_state_config_metrics_last_failure_and_time_left_open() {
    let _shared = crate::support::shared().await;
    let (users, clock) = breaker("adm-list");
    trip(&users);
    // 28.499999999 s left: shown rounded up to the millisecond.
    clock.advance(Duration::from_nanos(1_500_000_001));
    let (status, headers, body) = send(&admin::router(), get("/breakers")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(body["control"], false);
    let b = find(&body["breakers"], "adm-list");
    assert_eq!(b["kind"], "breaker");
    assert_eq!(b["state"], "open");
    assert_eq!(b["open_remaining"], "28.5s");
    assert_eq!(b["last_failure"], "server answered 500");
    assert_eq!(b["config"]["failures"], 2);
    assert_eq!(b["config"]["open_for"], "30s");
    assert_eq!(b["metrics"]["failures"], 2);
    assert_eq!(b["metrics"]["calls"], 2);
    assert_eq!(b["metrics"]["time_in_state"], "1.500000001s");
    // Breaker::explain, as data and as its sentence.
    let why = &b["explain"];
    assert_eq!(why["cause"], "2 calls failed in a row (threshold 2)");
    assert_eq!(why["elapsed"], "1.500000001s");
    assert_eq!(why["next_probe_in"], "28.499999999s");
    assert_eq!(why["open_for"], "30s");
    assert_eq!(why["reopens"], 0);
    let text = why["text"].as_str().unwrap();
    assert!(
        text.ends_with(
            "(1.5 s ago) because 2 calls failed in a row (threshold 2); \
             last failure: 'server answered 500'; next probe in 28.5 s"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn the_detail_shows_one_breaker_and_an_unknown_name_is_a_404_with_a_suggestion() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-detail");
    b.force_open();
    let app = Admin::new().token(TOKEN).router();
    let (status, _, body) = send(&app, get("/breakers/adm-detail")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["name"], "adm-detail");
    assert_eq!(body["state"], "forced-open");
    assert_eq!(body["open_remaining"], Value::Null);
    assert_eq!(body["config"]["failures"], 2);

    let (status, _, body) = send(&app, get("/breakers/adm-detial")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({
            "error": "no circuit breaker named 'adm-detial'; did you mean 'adm-detail'? \
                      (GET /breakers lists them)",
            "status": 404
        })
    );
    // Looking an unknown name up creates nothing.
    assert!(!registry().names().contains(&"adm-detial".to_owned()));
}

#[tokio::test]
async fn a_keyed_family_is_listed_with_its_open_keys_most_failures_first() {
    let _shared = crate::support::shared().await;
    let tenants = registry()
        .family::<u32>("adm-tenants", || {
            Config::builder().failures(2).build().unwrap()
        })
        .unwrap();
    let outcomes: [(u32, &[bool]); 3] = [
        (1, &[true]),
        (2, &[false, false]),
        (3, &[false, true, false, false]),
    ];
    for (key, calls) in outcomes {
        for &ok in calls {
            let _ = tenants.call(&key, || if ok { Ok(()) } else { Err("down") });
        }
    }
    let (status, _, body) = send(&admin::router(), get("/breakers")).await;
    assert_eq!(status, StatusCode::OK);
    let f = find(&body["families"], "adm-tenants");
    assert_eq!(f["kind"], "family");
    assert_eq!(f["keys"], 3);
    assert_eq!(f["open_keys"], 2);
    assert_eq!(f["totals"]["calls"], 7);
    assert_eq!(f["totals"]["failures"], 5);
    let open: Vec<(&Value, &Value, &Value)> = f["top_open"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (&k["key"], &k["metrics"]["state"], &k["metrics"]["failures"]))
        .collect();
    assert_eq!(
        open,
        [
            (&json!("3"), &json!("open"), &json!(3)),
            (&json!("2"), &json!("open"), &json!(2))
        ]
    );

    let (status, _, one) = send(&admin::router(), get("/breakers/adm-tenants")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["kind"], "family");
    assert_eq!(one["top_open"][0]["key"], "3");
}

#[tokio::test]
async fn the_dashboard_is_one_page_that_loads_nothing_from_elsewhere() {
    let _shared = crate::support::shared().await;
    let (status, headers, body) = send(&admin::router(), get("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none';"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
    let page = body.as_str().unwrap();
    assert!(page.contains("new EventSource(base + \"events\")"));
    for outside in ["src=", "href=", "@import", "url(", "//cdn", "https://"] {
        assert!(!page.contains(outside), "the page holds {outside}");
    }
}

#[tokio::test]
async fn no_cors_header_is_sent_even_when_asked() {
    let _shared = crate::support::shared().await;
    let req = Request::get("/breakers")
        .header(header::ORIGIN, "https://evil.example")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = send(&admin::router(), req).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
    let preflight = Request::options("/breakers/x/reset")
        .header(header::ORIGIN, "https://evil.example")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = send(&Admin::new().token(TOKEN).router(), preflight).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
}

#[tokio::test]
async fn without_a_renderer_metrics_is_a_404_that_says_what_it_needs() {
    let _shared = crate::support::shared().await;
    let (status, _, body) = send(&admin::router(), get("/metrics")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["error"],
        "no Prometheus text here: it needs the `metrics` feature and \
         `Admin::new().prometheus(move || handle.render())` with your recorder's handle"
    );
}

#[cfg(feature = "metrics")]
#[tokio::test]
async fn prometheus_text_comes_from_the_recorder_the_application_installed() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-prom");
    b.force_open();
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .unwrap();
    let app = Admin::new().prometheus(move || handle.render()).router();
    let (status, headers, body) = send(&app, get("/metrics")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = body.as_str().unwrap();
    assert!(
        text.contains(r#"breakerbox_state{name="adm-prom"} 3"#),
        "{text}"
    );
}
