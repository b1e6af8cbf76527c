//! What the admin tests share: breakers on a manual clock, requests, and their answers.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use breakerbox_runtime::{Breaker, Config, ManualClock, State, registry};
use futures_util::StreamExt;
use serde_json::Value;
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tower::ServiceExt;

pub const TOKEN: &str = "correct horse battery staple";

/// A registry breaker `name` on a manual clock: opens after 2 failures, for 30 s.
pub fn breaker(name: &str) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    assert!(
        registry().set_clock(name, clock.clone()),
        "{name} exists already"
    );
    let config = Config::builder()
        .failures(2)
        .open_for(Duration::from_secs(30))
        .build()
        .unwrap();
    (registry().get_or_create(name, || config), clock)
}

pub fn trip(breaker: &Breaker) {
    for _ in 0..2 {
        let _ = breaker.call(|| Err::<(), _>("server answered 500"));
    }
    assert_eq!(breaker.state(), State::Open);
}

pub fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

pub fn post(path: &str, token: Option<&str>, body: &str) -> Request<Body> {
    let mut req = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    if let Some(token) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    req.body(Body::from(body.to_owned())).unwrap()
}

/// Sends `req`; the status, the headers and the body as JSON (`Value::String` if not JSON).
pub async fn send(app: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, headers, body)
}

pub fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {list}"))
}

/// The next server-sent event of `GET /events`: its name and its data as JSON.
pub async fn next_event(
    body: &mut (impl futures_util::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
) -> (String, Value) {
    let frame = body.next().await.expect("the stream goes on").unwrap();
    let text = std::str::from_utf8(&frame).unwrap();
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} in {text:?}"))
            .to_owned()
    };
    (
        field("event: "),
        serde_json::from_str(&field("data: ")).unwrap(),
    )
}

/// The tests that count the events on the admin's process-wide channel run alone; every other
/// test holds this shared, so that none of its changes reaches their count.
static STREAM: RwLock<()> = RwLock::const_new(());

/// Held by a test that counts the events on the process-wide channel: no other test runs.
pub async fn alone() -> RwLockWriteGuard<'static, ()> {
    STREAM.write().await
}

/// Held by every other test: they run together, and never beside one that runs [`alone`].
pub async fn shared() -> RwLockReadGuard<'static, ()> {
    STREAM.read().await
}
