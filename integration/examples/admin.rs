//! An admin endpoint for breakers: Prometheus metrics and a JSON API to list, force open,
//! disable and reset them, exercised by a client in the same program.
//!
//! Runs by itself on 127.0.0.1 and exits:
//! `cargo run -p breakerbox-integration --example admin`.
//!
//! - `GET /metrics`: Prometheus text (`breakerbox_calls_total`, `breakerbox_state`, …).
//! - `GET /breakers`: every breaker's metrics, as JSON.
//! - `GET /breakers/{name}`: one breaker's metrics and config.
//! - `POST /breakers/{name}` with `{"action": "force_open" | "disable" | "reset"}`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use breakerbox::{Breaker, Config, export, registry};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde::Deserialize;
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Breaker configs, as an application would ship them (`registry().load_toml(path)` reads a
/// file; `BREAKERBOX__USERS__FAILURES=…` in the environment overrides a key).
/// Both breakers are created below with `get_or_create`, so their tables say `dynamic = true`.
const CONFIG: &str = r#"
[breakers.users]
dynamic = true
failures = 3
open_for = "30s"

[breakers.search]
dynamic = true
failure_rate = 50
window = 20
min_calls = 10
"#;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    registry().load_toml_str("admin.toml", CONFIG)?;
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    export::install();

    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/breakers", get(list))
        .route("/breakers/{name}", get(show).post(act))
        .with_state(prometheus);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    // Some traffic: two failures on `users`, a few searches.
    let users = registry().get_or_create("users", Config::default);
    let search = registry().get_or_create("search", Config::default);
    // At startup: two attributes (or an attribute and a `get_or_create`) that give one name
    // different configs are reported here, each with its file and line.
    registry().check()?;
    for ok in [true, false, false] {
        let _ = users.call(|| if ok { Ok(()) } else { Err("db timeout") });
    }
    for _ in 0..4 {
        let _ = search.call(|| Ok::<_, &str>(()));
    }

    // The client.
    // Local only: ignore any HTTP_PROXY of the environment.
    let http = reqwest::Client::builder().no_proxy().build()?;
    let get = |path: &str| {
        let req = http.get(format!("{base}{path}"));
        async move { req.send().await?.error_for_status()?.text().await }
    };
    let post = |path: &str, action: &str| {
        let req = http
            .post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body(json!({ "action": action }).to_string());
        async move { req.send().await }
    };

    let all: Value = serde_json::from_str(&get("/breakers").await?)?;
    println!("GET /breakers");
    for b in all.as_array().ok_or("a list")? {
        println!(
            "  {:<8} {:<8} calls {} failures {} rejected {}",
            b["name"].as_str().unwrap_or(""),
            b["state"].as_str().unwrap_or(""),
            b["calls"],
            b["failures"],
            b["rejected"]
        );
    }

    let resp = post("/breakers/users", "force_open").await?;
    println!("POST /breakers/users force_open -> {}", resp.status());
    let rejected = users.call(|| Ok::<_, &str>(())).unwrap_err();
    println!("  a call now: {rejected}");
    assert_eq!(users.state(), breakerbox::State::ForcedOpen);

    println!("GET /metrics (breakerbox_ lines for `users`)");
    let text = get("/metrics").await?;
    for line in text
        .lines()
        .filter(|l| l.starts_with("breakerbox_") && l.contains("\"users\""))
    {
        println!("  {line}");
    }
    assert!(text.contains(r#"breakerbox_state{name="users"} 3"#));
    assert!(text.contains(r#"breakerbox_calls_total{name="users",outcome="rejected"} 1"#));

    for action in ["disable", "reset"] {
        let resp = post("/breakers/users", action).await?;
        println!("POST /breakers/users {action} -> {}", resp.status());
    }
    let one: Value = serde_json::from_str(&get("/breakers/users").await?)?;
    println!(
        "GET /breakers/users -> state {}, config {}",
        one["metrics"]["state"], one["config"]
    );
    assert_eq!(one["metrics"]["state"], "closed");

    let bad = post("/breakers/users", "explode").await?;
    println!(
        "POST /breakers/users explode -> {}: {}",
        bad.status(),
        bad.text().await?
    );
    let missing = post("/breakers/nobody", "reset").await?;
    println!("POST /breakers/nobody reset -> {}", missing.status());
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    Ok(())
}

/// Prometheus text. Exporting here, at scrape time, keeps the call path free of metrics work.
async fn metrics(State(prometheus): State<PrometheusHandle>) -> String {
    export::record_all();
    prometheus.render()
}

async fn list() -> Json<Vec<breakerbox::Metrics>> {
    Json(registry().snapshot())
}

fn find(name: &str) -> Result<Breaker, (StatusCode, String)> {
    registry().get(name).ok_or_else(|| {
        (
            StatusCode::NOT_FOUND,
            format!("no circuit breaker named '{name}'"),
        )
    })
}

async fn show(Path(name): Path<String>) -> Result<Json<Value>, (StatusCode, String)> {
    let breaker = find(&name)?;
    Ok(Json(
        json!({ "metrics": breaker.metrics(), "config": breaker.config() }),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Action {
    ForceOpen,
    Disable,
    Reset,
}

#[derive(Deserialize)]
struct Command {
    action: Action,
}

async fn act(
    Path(name): Path<String>,
    body: Result<Json<Command>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<breakerbox::Metrics>, (StatusCode, String)> {
    let breaker = find(&name)?;
    let Json(Command { action }) = body.map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            format!("{e}; send {{\"action\": \"force_open\" | \"disable\" | \"reset\"}}"),
        )
    })?;
    match action {
        Action::ForceOpen => breaker.force_open(),
        Action::Disable => breaker.disable(),
        Action::Reset => breaker.reset(),
    }
    Ok(Json(breaker.metrics()))
}
