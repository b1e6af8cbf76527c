//! `GET /events`: state changes and per-second metrics, on tokio's paused clock.

use axum::http::header;
use breakerbox_admin as admin;
use futures_util::StreamExt;
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

/// A router given `end_streams_on` ends every open event stream when the signal completes,
/// and answers a stream asked for afterwards with its end at once.
#[tokio::test(start_paused = true)]
async fn the_event_streams_end_when_the_routers_signal_completes() {
    let _shared = crate::support::shared().await;
    let (stop, stopped) = tokio::sync::watch::channel(());
    let app = admin::Admin::new()
        .end_streams_on(async move {
            let mut stopped = stopped;
            stopped.changed().await.unwrap_or(());
        })
        .router();
    let res = app.clone().oneshot(get("/events")).await.unwrap();
    let mut body = res.into_body().into_data_stream();
    let (name, _) = next_event(&mut body).await;
    assert_eq!(name, "metrics");
    stop.send(()).unwrap();
    assert!(body.next().await.is_none(), "the stream goes on");

    let res = app.oneshot(get("/events")).await.unwrap();
    let mut body = res.into_body().into_data_stream();
    assert!(body.next().await.is_none(), "a new stream goes on");
}

/// A shutdown signal that panics ends the streams, as if it had completed; the panic reaches
/// no client's stream.
#[tokio::test(start_paused = true)]
async fn a_shutdown_signal_that_panics_ends_the_streams() {
    let _shared = crate::support::shared().await;
    let app = admin::Admin::new()
        .end_streams_on(async {
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            panic!("the application's signal panics");
        })
        .router();
    let res = app.oneshot(get("/events")).await.unwrap();
    let mut body = res.into_body().into_data_stream();
    // Until the stream ends: the ticks at 0 s and 1 s, and other tests' breakers' changes.
    let mut ticks = 0;
    for _ in 0..1000 {
        let Some(frame) = body.next().await else {
            assert_eq!(ticks, 2, "the ticks before the signal at 1.5 s");
            return;
        };
        ticks += usize::from(
            std::str::from_utf8(&frame.unwrap())
                .unwrap()
                .contains("event: metrics"),
        );
    }
    panic!("the stream goes on: {ticks} ticks");
}

/// An application that gives the admin its shutdown signal shuts down gracefully with a
/// client's event stream open: axum waits for every response to end, and the stream ends.
#[tokio::test]
async fn a_graceful_shutdown_does_not_wait_for_an_open_event_stream() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Its stream's first tick flushes the coalesced key changes: never beside a test that
    // counts them.
    let _shared = crate::support::shared().await;
    let (stop, stopped) = tokio::sync::watch::channel(());
    let (mut for_streams, mut for_server) = (stopped.clone(), stopped);
    let app = admin::Admin::new()
        .end_streams_on(async move { for_streams.changed().await.unwrap_or(()) })
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { for_server.changed().await.unwrap_or(()) })
            .await
    });
    let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
    client
        .write_all(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    // The stream is open once its first event (the metrics) has come.
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("event: metrics") {
        let mut buf = [0; 4096];
        let n = client.read(&mut buf).await.unwrap();
        assert_ne!(n, 0, "closed before the first event");
        seen.extend_from_slice(&buf[..n]);
    }
    stop.send(()).unwrap();
    // Nothing to wait for but the stream's end: a hang is the failure.
    let served = tokio::time::timeout(std::time::Duration::from_secs(30), server).await;
    assert!(
        matches!(served, Ok(Ok(Ok(())))),
        "the server did not shut down: {served:?}"
    );
}
