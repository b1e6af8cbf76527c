//! The recent events of a breaker and of a family's key (`GET …/events`): state changes with
//! their reason, and each control with the label of the token it was used with and the
//! address it came from; the rings' bounds; named tokens.

use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use breakerbox_admin::Admin;
use breakerbox_runtime::{Config, State, registry};
use serde_json::Value;

use crate::support::{breaker, get, post, send, trip};

const ALICE: &str = "alice's long random token";
const BOT: &str = "the deploy bot's long random token";

fn app() -> axum::Router {
    Admin::new()
        .named_token("alice", ALICE)
        .named_token("deploy-bot", BOT)
        .router()
}

/// `req` as a server started with `into_make_service_with_connect_info` hands it on.
fn from(
    mut req: axum::http::Request<axum::body::Body>,
    peer: &str,
) -> axum::http::Request<axum::body::Body> {
    let addr: SocketAddr = peer.parse().unwrap();
    req.extensions_mut().insert(ConnectInfo(addr));
    req
}

async fn events(app: &axum::Router, path: &str) -> Vec<Value> {
    let (status, _, body) = send(app, get(path)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["events"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_breakers_events_hold_its_transitions_and_who_reset_it_from_where() {
    let _shared = crate::support::shared().await;
    let app = app();
    let (ledger, _clock) = breaker("audit.ledger");
    trip(&ledger);
    let req = from(
        post("/breakers/audit.ledger/reset", Some(ALICE), ""),
        "10.1.2.3:40001",
    );
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    let req = post(
        "/breakers/audit.ledger/trip-for",
        Some(BOT),
        r#"{"duration": "30s"}"#,
    );
    assert_eq!(send(&app, req).await.0, StatusCode::OK);

    let all = events(&app, "/breakers/audit.ledger/events").await;
    let kinds: Vec<(&str, &str)> = all
        .iter()
        .map(|e| {
            let what = e["why"].as_str().or(e["action"].as_str()).unwrap();
            (e["type"].as_str().unwrap(), what)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("transition", "2 consecutive failures"),
            ("action", "reset"),
            ("transition", "reset"),
            ("action", "trip-for"),
            ("transition", "tripped for 30s"),
        ]
    );
    assert_eq!(all[0]["from"], "closed");
    assert_eq!(all[0]["to"], "open");
    assert_eq!(all[0]["failure"], "server answered 500");
    assert_eq!(all[1]["by"], "alice");
    assert_eq!(all[1]["peer"], "10.1.2.3:40001");
    assert!(all[1]["wall"]["secs_since_epoch"].as_u64().unwrap() > 1_600_000_000);
    assert_eq!(all[3]["by"], "deploy-bot");
    assert_eq!(all[3]["duration"], "30s");
    // The changes the controls made say who made them; the trip by calls names no one.
    assert!(all[0].get("by").is_none(), "{}", all[0]);
    assert_eq!(all[2]["by"], "alice");
    assert_eq!(all[4]["by"], "deploy-bot");
    // No connection info given to the router: the address is unknown, and says so.
    assert_eq!(all[3]["peer"], Value::Null);
    ledger.reset();
}

#[tokio::test]
async fn an_unknown_token_is_refused_and_leaves_no_record() {
    let _shared = crate::support::shared().await;
    let app = app();
    let (ledger, _clock) = breaker("audit.refused");
    trip(&ledger);
    let before = events(&app, "/breakers/audit.refused/events").await;
    let (status, _, body) = send(
        &app,
        post("/breakers/audit.refused/reset", Some("guess"), ""),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "wrong token");
    assert_eq!(ledger.state(), State::Open);
    assert_eq!(events(&app, "/breakers/audit.refused/events").await, before);
    // A label is not a token.
    let (status, _, _) = send(
        &app,
        post("/breakers/audit.refused/reset", Some("alice"), ""),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    ledger.reset();
}

#[tokio::test]
async fn a_breakers_ring_keeps_its_last_hundred_events() {
    let _shared = crate::support::shared().await;
    let app = app();
    let (flapping, _clock) = breaker("audit.bound");
    for _ in 0..80 {
        flapping.force_open();
        flapping.reset();
    }
    let (status, _, body) = send(&app, get("/breakers/audit.bound/events")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["kept"], 100);
    let all = body["events"].as_array().unwrap();
    assert_eq!(all.len(), 100);
    // The oldest 60 of the 160 went; the newest is last.
    assert_eq!(all[0]["why"], "forced open");
    assert_eq!(all[99]["why"], "reset");
    assert_eq!(all[99]["to"], "closed");
}

#[tokio::test]
async fn a_keys_events_hold_its_own_changes_and_controls_and_the_familys_hold_every_keys() {
    let _shared = crate::support::shared().await;
    let app = app();
    let family = registry()
        .family::<String>("audit.hosts", || {
            Config::builder().failures(1).build().unwrap()
        })
        .unwrap();
    let (a, b) = ("a.example".to_owned(), "b/é".to_owned());
    let _ = family.call(&a, || Err::<(), _>("HTTP 503"));
    let _ = family.call(&b, || Err::<(), _>("refused"));
    let req = from(
        post("/breakers/audit.hosts/keys/b%2F%C3%A9/reset", Some(BOT), ""),
        "127.0.0.1:9",
    );
    assert_eq!(send(&app, req).await.0, StatusCode::OK);

    let key_b = events(&app, "/breakers/audit.hosts/keys/b%2F%C3%A9/events").await;
    assert_eq!(key_b.len(), 3, "{key_b:?}");
    assert_eq!(key_b[0]["failure"], "refused");
    assert_eq!(key_b[1]["type"], "action");
    assert_eq!(key_b[1]["key"], "b/é");
    assert_eq!(key_b[1]["by"], "deploy-bot");
    assert_eq!(key_b[1]["peer"], "127.0.0.1:9");
    assert_eq!(key_b[2]["why"], "reset");
    assert_eq!(key_b[2]["by"], "deploy-bot");
    let key_a = events(&app, "/breakers/audit.hosts/keys/a.example/events").await;
    assert_eq!(key_a.len(), 1);
    assert_eq!(key_a[0]["key"], "a.example");
    // The family's: every key's, in order.
    let all = events(&app, "/breakers/audit.hosts/events").await;
    let keys: Vec<&str> = all.iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["a.example", "b/é", "b/é", "b/é"]);

    // A key's ring keeps its last 20.
    for _ in 0..15 {
        family.breaker(&a).force_open();
        family.breaker(&a).reset();
    }
    let key_a = events(&app, "/breakers/audit.hosts/keys/a.example/events").await;
    assert_eq!(key_a.len(), 20);
    assert_eq!(key_a[19]["why"], "reset");

    let (status, _, body) = send(&app, get("/breakers/audit.hosts/keys/nope/events")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _, body) = send(&app, get("/breakers/audit.nothing/events")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["error"].as_str().unwrap().contains("audit.nothing"),
        "{body}"
    );
}

/// One logged event's fields: name and value.
type Line = Vec<(String, String)>;

/// A `tracing` subscriber that keeps each event of target `breakerbox::admin` as its fields.
#[derive(Default, Clone)]
struct Lines(std::sync::Arc<std::sync::Mutex<Vec<Line>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl tracing::Subscriber for Lines {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() == "breakerbox::admin" {
            let mut fields = Vec::new();
            event.record(&mut Fields(&mut fields));
            self.0.lock().unwrap().push(fields);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn a_control_is_logged_with_who_used_it_and_from_where() {
    // Alone: `tracing` works out whether a log line is wanted once per call site, and a
    // thread-local subscriber set while another thread first reaches the same line may be
    // left out of that answer.
    let _alone = crate::support::alone().await;
    let app = app();
    let (ledger, _clock) = breaker("audit.logged");
    trip(&ledger);
    let lines = Lines::default();
    let _log = tracing::subscriber::set_default(lines.clone());
    let req = from(
        post("/breakers/audit.logged/reset", Some(ALICE), ""),
        "10.0.0.9:1234",
    );
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    let logged = lines.0.lock().unwrap().clone();
    assert_eq!(logged.len(), 1, "{logged:?}");
    let field = |name: &str| {
        logged[0]
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(
        field("message"),
        Some("reset of circuit breaker 'audit.logged' by 'alice' from 10.0.0.9:1234")
    );
    assert_eq!(field("by"), Some("alice"));
    assert_eq!(field("peer"), Some("10.0.0.9:1234"));
    assert_eq!(field("action"), Some("reset"));
    assert_eq!(field("name"), Some("audit.logged"));
}

#[tokio::test(start_paused = true)]
async fn the_event_streams_state_change_says_which_token_made_it() {
    let _shared = crate::support::shared().await;
    let app = app();
    let (ledger, _clock) = breaker("audit.streamed");
    let res = tower::ServiceExt::oneshot(app.clone(), get("/events"))
        .await
        .unwrap();
    let mut body = res.into_body().into_data_stream();
    let req = post("/breakers/audit.streamed/force-open", Some(ALICE), "");
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    ledger.reset();
    // Other tests' changes share the channel: this breaker's, in order.
    let mut mine = Vec::new();
    while mine.len() < 2 {
        let (name, data) = crate::support::next_event(&mut body).await;
        if name == "state" && data["name"] == "audit.streamed" {
            mine.push(data);
        }
    }
    assert_eq!(mine[0]["to"], "forced-open");
    assert_eq!(mine[0]["by"], "alice");
    // A reset in code: no token, no `by`.
    assert_eq!(mine[1]["to"], "closed");
    assert!(mine[1].get("by").is_none(), "{}", mine[1]);
}

#[tokio::test]
async fn a_controls_record_keeps_the_whole_forwarded_for_chain_with_the_proxys_address_last() {
    let _shared = crate::support::shared().await;
    let app = app();
    let (ledger, _clock) = breaker("audit.forwarded");
    // Three hops, as a client behind two proxies arrives: the last address is the one the
    // proxy in front of this server added, the only one the client cannot write.
    let chain = "198.51.100.23, 2001:db8:85a3::8a2e:370:7334, 203.0.113.7";
    let mut req = post("/breakers/audit.forwarded/force-open", Some(ALICE), "");
    req.headers_mut()
        .insert("x-forwarded-for", chain.parse().unwrap());
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    // A proxy that adds its own header line rather than appending to the client's.
    let mut req = post("/breakers/audit.forwarded/reset", Some(ALICE), "");
    req.headers_mut()
        .append("x-forwarded-for", "10.9.9.9".parse().unwrap());
    req.headers_mut()
        .append("x-forwarded-for", "203.0.113.8".parse().unwrap());
    assert_eq!(send(&app, req).await.0, StatusCode::OK);

    let all = events(&app, "/breakers/audit.forwarded/events").await;
    let actions: Vec<&Value> = all.iter().filter(|e| e["type"] == "action").collect();
    assert_eq!(actions.len(), 2, "{all:?}");
    assert_eq!(actions[0]["forwarded_for"], chain);
    assert_eq!(actions[1]["forwarded_for"], "10.9.9.9, 203.0.113.8");

    // A client that pads the header to push the proxy's address out still leaves it recorded.
    let padding = "10.0.0.1, ".repeat(500);
    let mut req = post("/breakers/audit.forwarded/force-open", Some(ALICE), "");
    req.headers_mut().insert(
        "x-forwarded-for",
        format!("{padding}203.0.113.9").parse().unwrap(),
    );
    assert_eq!(send(&app, req).await.0, StatusCode::OK);
    let all = events(&app, "/breakers/audit.forwarded/events").await;
    let last = all.iter().rev().find(|e| e["type"] == "action").unwrap();
    let recorded = last["forwarded_for"].as_str().unwrap();
    assert!(recorded.ends_with(", 203.0.113.9"), "{recorded}");
    assert!(recorded.len() < 1024, "kept {} bytes", recorded.len());
    ledger.reset();
}
