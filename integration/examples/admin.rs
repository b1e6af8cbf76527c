//! The admin router (`breakerbox::admin`, feature `admin`) mounted in an application's axum
//! server, and a client in the same program that reads and drives it.
//!
//! Runs by itself on 127.0.0.1 and exits:
//! `cargo run -p breakerbox-integration --example admin`.
//!
//! Open `http://127.0.0.1:<port>/admin` in a browser for the dashboard (the example exits at
//! once; mount the router the same way in a server that keeps running). `docs/admin.md` lists
//! every endpoint.

use breakerbox::admin::Admin;
use breakerbox::{Config, State, export, registry};
use metrics_exporter_prometheus::PrometheusBuilder;
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

    // The token would come from the environment or a secret store; without one the router is
    // read-only. Bind to loopback, or put the router behind the application's own auth.
    let token = std::env::var("ADMIN_TOKEN").unwrap_or_else(|_| "example-token".to_owned());
    let admin = Admin::new()
        .token(token.clone())
        .prometheus(move || prometheus.render())
        .router();
    // `nest_service` serves the dashboard at both `/admin` and `/admin/`.
    let app = axum::Router::new().nest_service("/admin", admin);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}/admin", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });

    // Some traffic: two failures on `users`, a few searches.
    let users = registry().get_or_create("users", Config::default);
    let search = registry().get_or_create("search", Config::default);
    registry().check()?;
    for ok in [true, false, false] {
        let _ = users.call(|| if ok { Ok(()) } else { Err("db timeout") });
    }
    for _ in 0..4 {
        let _ = search.call(|| Ok::<_, &str>(()));
    }

    // The client. Local only: ignore any HTTP_PROXY of the environment.
    let http = reqwest::Client::builder().no_proxy().build()?;

    let list = read(http.get(format!("{base}/breakers")).send().await?).await?;
    println!("GET /admin/breakers (controls on: {})", list["control"]);
    for b in list["breakers"].as_array().ok_or("a list")? {
        let m = &b["metrics"];
        println!(
            "  {:<8} {:<8} calls {} failures {} rejected {}",
            b["name"].as_str().unwrap_or(""),
            b["state"].as_str().unwrap_or(""),
            m["calls"],
            m["failures"],
            m["rejected"]
        );
    }

    // A control without the token is refused, and changes nothing.
    let refused = http
        .post(format!("{base}/breakers/users/force-open"))
        .send()
        .await?;
    let status = refused.status();
    let body = read(refused).await?;
    println!(
        "POST force-open without a token -> {status}: {}",
        body["error"]
    );
    assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED);
    assert_eq!(users.state(), State::Closed);

    // With it: open `users` for 45 s.
    let tripped = http
        .post(format!("{base}/breakers/users/trip-for"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(json!({ "duration": "45s" }).to_string())
        .send()
        .await?
        .error_for_status()?;
    let tripped = read(tripped).await?;
    println!(
        "POST trip-for 45s -> {}, {} left open",
        tripped["state"], tripped["open_remaining"]
    );
    assert_eq!(users.state(), State::Open);

    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    println!("GET /admin/metrics (breakerbox_state lines)");
    for line in text.lines().filter(|l| l.starts_with("breakerbox_state{")) {
        println!("  {line}");
    }
    assert!(text.contains(r#"breakerbox_state{name="users"} 1"#));

    // The event stream: its first event is every breaker's metrics, sent at once.
    let mut events = http
        .get(format!("{base}/events"))
        .send()
        .await?
        .error_for_status()?;
    let first = events.chunk().await?.ok_or("an event")?;
    let first = String::from_utf8_lossy(&first);
    println!(
        "GET /admin/events -> {}",
        first.lines().next().unwrap_or_default()
    );
    assert!(first.starts_with("event: metrics\n"));
    drop(events);

    let reset = http
        .post(format!("{base}/breakers/users/reset"))
        .bearer_auth(&token)
        .send()
        .await?
        .error_for_status()?;
    let reset = read(reset).await?;
    println!("POST reset -> {}", reset["state"]);
    assert_eq!(users.state(), State::Closed);
    Ok(())
}

/// A response's body as JSON.
async fn read(response: reqwest::Response) -> Result<Value, BoxError> {
    Ok(serde_json::from_str(&response.text().await?)?)
}
