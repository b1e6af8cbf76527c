//! The task's order rule, driven one turn at a time: a local change made before the task looks
//! at a published record is never lost to it (docs/fleet.md, "Order").

use core::time::Duration;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Task, Timers};
use crate::fleet::{FleetConfig, Shared, resp3};
use crate::{Breaker, Config, State};

/// A task that is not spawned (the test turns its loop), its published records fed by hand.
fn task(url: &str, prefix: &str) -> (Task, Arc<Shared>, mpsc::UnboundedSender<PushInfo>) {
    let config = FleetConfig::new(url)
        .prefix(prefix)
        .timeout(Duration::from_millis(100));
    let client = redis::Client::open(resp3(url)).unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        config,
        instance: "here".to_owned(),
        tx,
        connected: AtomicBool::new(false),
        pushed: AtomicU64::new(0),
        applied: AtomicU64::new(0),
        store_errors: AtomicU64::new(0),
        resyncs: AtomicU64::new(0),
    });
    let mut task = Task::new(client, shared.clone(), rx);
    let (push_tx, pushes) = mpsc::unbounded_channel();
    task.pushes = pushes;
    (task, shared, push_tx)
}

/// `breaker`, shared as `Fleet::share` does it.
fn share(task: &mut Task, shared: &Arc<Shared>, breaker: &Breaker) {
    let weak = Arc::downgrade(shared);
    let own = breaker.downgrade();
    breaker.on_state_change(move |event| {
        if let (Some(shared), Some(breaker)) = (weak.upgrade(), own.upgrade()) {
            shared.tell(event, Some(&breaker));
        }
    });
    task.track(breaker.name(), breaker.downgrade());
}

/// Another instance's record as the script publishes it: open for a minute, or closed.
fn published(prefix: &str, epoch: u64, state: &str) -> PushInfo {
    let epoch = epoch.to_string();
    let open_until = if state == "open" { "61000" } else { "0" };
    let fields = [
        "payments",
        &epoch,
        state,
        open_until,
        "1000",
        "0",
        "there",
        "1 consecutive failures",
        "",
    ];
    let payload: String = fields.iter().map(|f| format!("{}:{f}", f.len())).collect();
    PushInfo {
        kind: PushKind::Message,
        data: vec![
            Value::BulkString(format!("{prefix}:changes").into_bytes()),
            Value::BulkString(payload.into_bytes()),
        ],
    }
}

fn timers() -> Timers {
    let later = Instant::now() + Duration::from_secs(3600);
    Timers {
        next: later,
        batch: tokio::time::interval_at(later, Duration::from_secs(3600)),
    }
}

/// Turns the loop until no local change and no published record is waiting.
async fn drain(task: &mut Task, timers: &mut Timers) {
    while !task.rx.is_empty() || !task.pushes.is_empty() {
        assert!(task.step(timers).await);
    }
}

/// A loopback port nothing listens on: a store that refuses every connection.
fn refused() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("redis://127.0.0.1:{port}/")
}

#[tokio::test(flavor = "current_thread")]
async fn a_record_published_before_a_local_reset_is_not_taken_on_over_it() {
    let (mut task, shared, pushes) = task(&refused(), "order");
    let breaker = Breaker::new("payments", Config::default());
    share(&mut task, &shared, &breaker);
    let mut timers = timers();
    pushes.send(published("order", 5, "open")).unwrap();
    drain(&mut task, &mut timers).await;
    assert_eq!(breaker.state(), State::Open, "the fleet's trip, taken on");

    // Reset here; before the task has read that change, another instance's re-trip (written
    // before the reset reaches the store) is published.
    breaker.reset();
    pushes.send(published("order", 6, "open")).unwrap();
    drain(&mut task, &mut timers).await;
    assert_eq!(breaker.state(), State::Closed, "the reset stands");
    let pending = task.pending.get("payments").expect("the reset is pending");
    assert_eq!(
        pending.manual.map(|(state, _)| state),
        Some(State::Closed),
        "written over the record when the store answers"
    );
}

/// The server `scripts/test` started, or one of the test's own; `None` (skipped, said so)
/// without `redis-server`, except under CI.
struct TestRedis {
    url: String,
    child: Option<Child>,
}

impl TestRedis {
    fn get() -> Option<TestRedis> {
        if let Ok(url) = std::env::var("BREAKERBOX_TEST_REDIS_URL") {
            return Some(TestRedis { url, child: None });
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match child {
            Ok(child) => Some(TestRedis {
                url: format!("redis://127.0.0.1:{port}/"),
                child: Some(child),
            }),
            Err(e) => {
                let ci = std::env::var("CI").is_ok_and(|v| v == "true");
                assert!(!ci, "redis-server is needed under CI: {e}");
                eprintln!("SKIPPED: no redis-server ({e})");
                None
            }
        }
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_reset_a_record_was_taken_on_over_is_taken_on_again_once_written() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = format!("reimport-{}", std::process::id());
    let (mut task, shared, pushes) = task(&redis.url, &prefix);
    let breaker = Breaker::new("payments", Config::default());
    share(&mut task, &shared, &breaker);
    let mut timers = timers();
    pushes.send(published(&prefix, 5, "open")).unwrap();
    drain(&mut task, &mut timers).await;
    assert_eq!(breaker.state(), State::Open);

    // Reset here, and in the moment before its message reaches the task, the task takes on
    // another instance's older re-trip (nothing tells it yet of the reset).
    breaker.reset();
    task.on_push(published(&prefix, 6, "open"));
    assert_eq!(breaker.state(), State::Open, "the race this test is about");
    // Up to a second for the store (a redis-server of the test's own may still be starting).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        drain(&mut task, &mut timers).await;
        if !task.pending.contains_key("payments") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the store never answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        task.flush().await;
    }
    let record = task.invoke("payments", &["read"]).await.unwrap();
    assert_eq!(
        record.state,
        State::Closed,
        "the reset is the fleet's record"
    );
    assert_eq!(record.reason, "reset");
    assert_eq!(breaker.state(), State::Closed, "and this breaker's again");
}
