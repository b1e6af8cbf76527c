//! `GET /events`: state changes and per-second metrics, on tokio's paused clock.

use axum::http::header;
use breakerbox_admin as admin;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::*;

#[tokio::test(start_paused = true)]
async fn the_event_stream_tells_changes_and_metrics_every_second() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-sse");
    let res = admin::router().oneshot(get("/events")).await.unwrap();
    assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = res.into_body().into_data_stream();

    // At once: every breaker's metrics, without rates (no second has passed).
    let (name, first) = next_event(&mut body).await;
    assert_eq!(name, "metrics");
    let mine = find(&first["breakers"], "adm-sse");
    assert_eq!(mine["state"], "closed");
    assert_eq!(mine["per_second"], Value::Null);
    assert_eq!(first["dropped"], 0);

    // A change is told before the next tick; other tests' breakers may change meanwhile.
    trip(&b);
    let change = loop {
        let (name, data) = next_event(&mut body).await;
        if name == "state" && data["name"] == "adm-sse" {
            break data;
        }
    };
    assert_eq!(change["from"], "closed");
    assert_eq!(change["to"], "open");
    assert_eq!(change["reason"], json!({ "failures": 2 }));
    assert_eq!(change["why"], "2 consecutive failures");

    // The next tick, a second after the first on tokio's clock: 2 calls (the failures) and
    // 3 rejections in that second.
    for _ in 0..3 {
        assert!(b.call(|| Ok::<_, &str>(())).is_err());
    }
    let tick = loop {
        let (name, data) = next_event(&mut body).await;
        if name == "metrics" {
            break data;
        }
    };
    let mine = find(&tick["breakers"], "adm-sse");
    assert_eq!(mine["state"], "open");
    assert_eq!(mine["open_remaining"], "30s");
    assert_eq!(mine["last_failure"], "server answered 500");
    assert_eq!(
        mine["per_second"],
        json!({ "calls": 5.0, "failures": 2.0, "slow": 0.0, "timeouts": 0.0, "rejected": 3.0 })
    );
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_counted_apart_in_the_metrics_and_their_rate() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-sse-timeouts");
    let res = admin::router().oneshot(get("/events")).await.unwrap();
    let mut body = res.into_body().into_data_stream();
    let (name, _) = next_event(&mut body).await;
    assert_eq!(name, "metrics");
    b.call(|| Ok::<_, &str>(())).unwrap();
    b.try_acquire()
        .unwrap()
        .timed_out(&breakerbox_runtime::Timeout::new(
            b.name(),
            std::time::Duration::from_secs(2),
        ));
    let tick = loop {
        let (name, data) = next_event(&mut body).await;
        if name == "metrics" {
            break data;
        }
    };
    let mine = find(&tick["breakers"], "adm-sse-timeouts");
    assert_eq!(mine["state"], "closed");
    assert_eq!(
        (&mine["metrics"]["failures"], &mine["metrics"]["timeouts"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(
        mine["per_second"],
        json!({ "calls": 2.0, "failures": 1.0, "slow": 0.0, "timeouts": 1.0, "rejected": 0.0 })
    );
    // The timeout counts toward tripping.
    assert!(
        mine["explain"]["text"]
            .as_str()
            .unwrap()
            .ends_with("; 1 of 2 failures in a row so far"),
        "{}",
        mine["explain"]
    );
}
