//! The tower layer on both sides of HTTP: around a reqwest client service, and inside an axum
//! router in front of a handler.
//!
//! Runs by itself on 127.0.0.1 and exits: `cargo run -p breakerbox-integration --example tower_layer`.
//! The breakers read a `ManualClock`, so "30 seconds later" takes no time.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use breakerbox::tower::CircuitBreakerLayer;
use breakerbox::{Config, Error, ManualClock, Outcome, registry};
use tower::{Layer, ServiceBuilder, ServiceExt};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let clock = ManualClock::new();
    let down = Arc::new(AtomicBool::new(false));

    // --- Server side: the layer inside an axum router. ---
    // `/stock` calls a "warehouse" that fails while `down` is set. The layer counts 5xx
    // responses as failures; once open, the route answers 503 without running the handler.
    registry().set_clock("warehouse-route", clock.clone());
    let route_breaker = ServiceBuilder::new()
        // The router needs an infallible service: turn a rejection into a 503.
        .layer(HandleErrorLayer::new(|err: Error<Infallible>| async move {
            (StatusCode::SERVICE_UNAVAILABLE, err.to_string())
        }))
        .layer(
            CircuitBreakerLayer::new("warehouse-route", config(2)?).classify(
                |r: &Result<Response, Infallible>| match r {
                    Ok(resp) if resp.status().is_server_error() => Outcome::Failure,
                    _ => Outcome::Success,
                },
            ),
        );
    let flag = down.clone();
    let app = Router::new()
        .route(
            "/stock",
            get(move || async move {
                if flag.load(Ordering::Relaxed) {
                    (StatusCode::INTERNAL_SERVER_ERROR, "warehouse unreachable").into_response()
                } else {
                    "42 in stock".into_response()
                }
            }),
        )
        .route_layer(route_breaker);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/stock", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    // --- Client side: the layer around a reqwest client service. ---
    // Transport errors and 5xx are failures; other statuses succeed.
    registry().set_clock("stock-client", clock.clone());
    // Local only: ignore any HTTP_PROXY of the environment.
    let http = reqwest::Client::builder().no_proxy().build()?;
    let client = CircuitBreakerLayer::new("stock-client", config(3)?)
        .classify(|r: &Result<reqwest::Response, reqwest::Error>| match r {
            Ok(resp) if resp.status().is_server_error() => Outcome::Failure,
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        })
        .layer(tower::service_fn(move |url: String| {
            let http = http.clone();
            async move { http.get(url).send().await }
        }));

    // At startup: two attributes (or an attribute and a `get_or_create`) that give one name
    // different configs are reported here, each with its file and line.
    registry().check()?;

    let call = |step: &'static str| {
        let client = client.clone();
        let url = url.clone();
        async move {
            let shown = match client.oneshot(url).await {
                Ok(resp) => {
                    let status = resp.status();
                    format!("{status}: {}", resp.text().await.unwrap_or_default())
                }
                Err(Error::Rejected(r)) => format!("rejected by the client: {r}"),
                Err(Error::Inner(e)) => format!("transport error: {e}"),
            };
            println!("{step:<28} {shown}");
        }
    };
    let states = || {
        let route = registry().get("warehouse-route").unwrap().state();
        let client = registry().get("stock-client").unwrap().state();
        println!("{:<28} route breaker {route}, client breaker {client}", "");
    };

    call("warehouse up").await;
    down.store(true, Ordering::Relaxed);
    for step in ["warehouse down", "warehouse down", "route breaker open"] {
        call(step).await;
    }
    states();
    // The route's 503s count as failures for the client too: a third one opens it.
    call("client breaker open").await;
    states();

    down.store(false, Ordering::Relaxed);
    clock.advance(Duration::from_secs(30));
    // The client probes; its probe reaches the route, which probes the handler.
    call("30s later, warehouse back").await;
    states();
    call("recovered").await;
    Ok(())
}

/// Opens after `failures` in a row, probes after 30 s.
fn config(failures: u32) -> Result<Config, breakerbox::ConfigError> {
    Config::builder()
        .failures(failures)
        .open_for(Duration::from_secs(30))
        .build()
}
