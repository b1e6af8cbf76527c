//! The task's order rule, driven one turn at a time: a local change made before the task looks
//! at a published record is never lost to it (docs/fleet.md, "Order").

use core::time::Duration;
use std::pin::{Pin, pin};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;

use redis::{PushInfo, PushKind, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::run::TaskTimers;
use super::state::Task;
use crate::FleetConfig;
use crate::record::Record;
use crate::shared::{Inner, Message};
use breakerbox_runtime::Reason;
use breakerbox_runtime::{Breaker, Config, ManualClock, State};

/// A task that is not spawned (the test turns its loop), its published records fed by hand.
fn task(url: &str, prefix: &str) -> (Task, Arc<Inner>, mpsc::UnboundedSender<PushInfo>) {
    task_timed(url, prefix, Duration::from_millis(100))
}

/// The same, with the store's `timeout`.
fn task_timed(
    url: &str,
    prefix: &str,
    timeout: Duration,
) -> (Task, Arc<Inner>, mpsc::UnboundedSender<PushInfo>) {
    task_with(url, FleetConfig::new(url).prefix(prefix).timeout(timeout))
}

/// The same, with the whole fleet config.
fn task_with(
    url: &str,
    config: FleetConfig,
) -> (Task, Arc<Inner>, mpsc::UnboundedSender<PushInfo>) {
    let _ = url;
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Inner {
        config,
        instance: "here".to_owned(),
        holder: "here@1.0".to_owned(),
        tx,
        connected: AtomicBool::new(false),
        pushed: AtomicU64::new(0),
        applied: AtomicU64::new(0),
        store_errors: AtomicU64::new(0),
        resyncs: AtomicU64::new(0),
        pending: AtomicU64::new(0),
        shared: AtomicU64::new(0),
        held: std::sync::Mutex::new(None),
        last_error: std::sync::Mutex::new(None),
        live: std::sync::Mutex::new(Default::default()),
        tallies: std::sync::Mutex::new(Default::default()),
        keyed: std::sync::Mutex::new(Default::default()),
        family_suffix: String::new(),
        listened: Default::default(),
    });
    let mut task = Task::new(shared.clone(), rx);
    let (push_tx, pushes) = mpsc::unbounded_channel();
    task.pushes = crate::store::Feed::redis(pushes);
    (task, shared, push_tx)
}

/// `breaker`, shared as `Fleet::share` does it.
fn share(task: &mut Task, shared: &Arc<Inner>, breaker: &Breaker) {
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
    message(prefix, &fields)
}

/// web-2's record of a trip of `payments` at epoch 7, as its script publishes it on
/// `<prefix>:changes`: open 4 s from the server's time 1000 ms, after "HTTP 503".
fn web2_trip(prefix: &str) -> PushInfo {
    message(
        prefix,
        &[
            "payments",
            "7",
            "open",
            "5000",
            "1000",
            "0",
            "web-2",
            "1 consecutive failures",
            "HTTP 503",
        ],
    )
}

/// A record's fields as a fleet's script publishes them on `<prefix>:changes`.
fn message(prefix: &str, fields: &[&str]) -> PushInfo {
    let payload: String = fields.iter().map(|f| format!("{}:{f}", f.len())).collect();
    PushInfo {
        kind: PushKind::Message,
        data: vec![
            Value::BulkString(format!("{prefix}:changes").into_bytes()),
            Value::BulkString(payload.into_bytes()),
        ],
    }
}

fn timers() -> TaskTimers {
    let later = Instant::now() + Duration::from_secs(3600);
    TaskTimers {
        next: later,
        batch: tokio::time::interval_at(later, Duration::from_secs(3600)),
    }
}

/// Turns the loop until no local change and no published record is waiting.
async fn drain(task: &mut Task, timers: &mut TaskTimers) {
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

/// A record the feed could not carry whole (its name only) is read by the next pass, which
/// comes soon (a re-read is owed); a name the fleet does not share changes nothing.
#[tokio::test(flavor = "current_thread")]
async fn a_record_sent_as_its_name_is_read_again_soon() {
    let (mut task, shared, _pushes) = task(&refused(), "stale");
    let breaker = Breaker::new("payments", Config::default());
    share(&mut task, &shared, &breaker);
    task.owed = false;
    task.tracked.get_mut("payments").unwrap().read = true;
    task.on_event(crate::store::Event::Stale("elsewhere".to_owned()));
    assert!(!task.owed, "not shared here: nothing owed");
    task.on_event(crate::store::Event::Stale("payments".to_owned()));
    assert!(task.owed, "a re-read is owed");
    assert!(!task.tracked["payments"].read, "payments is read by it");
    assert!(task.period() <= Duration::from_millis(100), "within 100 ms");
}

/// Another instance's trip, taken on here, reports the fleet's next probe (the record's open
/// time) in `export_state`, a rejection's `retry_after`, `metrics` and `explain`, not the
/// `probe_timeout` longer this instance holds it open for the fleet's probe leases.
#[tokio::test(flavor = "current_thread")]
async fn a_trip_taken_on_reports_the_fleets_next_probe_not_the_local_hold() {
    let (mut task, shared, pushes) = task(&refused(), "next");
    let config = Config::builder()
        .clock(ManualClock::new())
        .open_for(Duration::from_secs(4))
        .build()
        .unwrap();
    let breaker = Breaker::new("payments", config);
    share(&mut task, &shared, &breaker);
    let mut timers = timers();
    // Open for 4 s from the server's time 1000 ms.
    pushes.send(web2_trip("next")).unwrap();
    drain(&mut task, &mut timers).await;
    let four = Some(Duration::from_secs(4));
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.export_state().open_remaining, four);
    assert_eq!(breaker.metrics().retry_after, four);
    assert_eq!(breaker.explain().next_probe_in, four);
    let Err(rejected) = breaker.try_acquire() else {
        panic!("open");
    };
    assert_eq!(rejected.retry_after(), four);
    use breakerbox_runtime::__integrations::BreakerExt;
    assert_eq!(
        breaker.held_state().open_remaining,
        Some(Duration::from_secs(64)),
        "held here one probe_timeout longer, waiting for a lease"
    );
}

/// Another instance's trip, taken on here, tells who tripped it and why: its failure as
/// `last_failure` ("web-2: HTTP 503"), in `explain()` and in the event of the opening.
#[tokio::test(flavor = "current_thread")]
async fn a_trip_taken_on_tells_who_tripped_it_and_its_failure() {
    let (mut task, shared, pushes) = task(&refused(), "why");
    let breaker = Breaker::new("payments", Config::default());
    share(&mut task, &shared, &breaker);
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = events.clone();
    breaker.on_state_change(move |e| seen.lock().unwrap().push(e.clone()));
    let mut timers = timers();
    pushes.send(web2_trip("why")).unwrap();
    drain(&mut task, &mut timers).await;
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.last_failure().as_deref(), Some("web-2: HTTP 503"));
    let text = breaker.explain().to_string();
    assert!(
        text.contains(
            "because web-2 tripped it (1 consecutive failures); last failure: 'web-2: HTTP 503'"
        ),
        "{text}"
    );
    assert!(!text.contains("imported"), "{text}");
    let events = events.lock().unwrap();
    let opened = events.last().expect("the opening told");
    assert_eq!(
        (opened.to, opened.reason, opened.failure.as_deref()),
        (State::Open, Reason::Imported, Some("web-2: HTTP 503"))
    );
    assert_eq!(
        opened.origin.as_deref(),
        Some("web-2 tripped it (1 consecutive failures)")
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
    let record = task.read_record("payments").await.done().unwrap();
    assert_eq!(
        record.state,
        State::Closed,
        "the reset is the fleet's record"
    );
    assert_eq!(record.reason, "reset");
    assert_eq!(breaker.state(), State::Closed, "and this breaker's again");
}

/// Two breakers, shared with a task whose first pass has read their records: another
/// instance's reset (closed, origin `there`), taken on. Their epochs are returned.
async fn two_shared(
    url: &str,
    prefix: &str,
) -> (
    Task,
    Arc<Inner>,
    mpsc::UnboundedSender<PushInfo>,
    [Breaker; 2],
    [u64; 2],
) {
    // A timeout no store round trip on a loaded machine reaches: every pass here succeeds.
    let (mut task, shared, pushes) = task_timed(url, prefix, Duration::from_secs(5));
    // Open times on a clock that stands still, so a record's open time is exactly the trip's.
    let config = Config::builder().clock(ManualClock::new()).build().unwrap();
    let breakers = ["payments", "search"].map(|name| Breaker::new(name, config.clone()));
    for b in &breakers {
        share(&mut task, &shared, b);
    }
    // Up to five seconds for the store (a redis-server of the test's own may still be
    // starting); a pass that fails waits on nothing but the store's answer or refusal.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !task.tick().await {
        assert!(
            std::time::Instant::now() < deadline,
            "the store never answered"
        );
    }
    let mut epochs = [0; 2];
    for (epoch, b) in epochs.iter_mut().zip(&breakers) {
        *epoch = there(&mut task, b.name(), "force", 0, "closed", "reset")
            .await
            .epoch;
    }
    assert!(task.tick().await);
    for (epoch, b) in epochs.iter().zip(&breakers) {
        assert_eq!(task.tracked[b.name()].applied, *epoch, "taken on");
    }
    (task, shared, pushes, breakers, epochs)
}

/// Another instance's write of `name`'s record: the record script run as instance `there`
/// (through this task's connection, which leaves the task's own view of the record as it was).
async fn there(
    task: &mut Task,
    name: &str,
    mode: &str,
    over: u64,
    state: &str,
    reason: &str,
) -> Record {
    let open_ms = if state == "open" { 60_000 } else { 0 };
    let state = match state {
        "open" => State::Open,
        "forced_open" => State::ForcedOpen,
        "disabled" => State::Disabled,
        _ => State::Closed,
    };
    let mut change = task.change_of(
        name,
        mode == "force",
        over,
        state,
        open_ms,
        0,
        reason.to_owned(),
        String::new(),
    );
    change.instance = "there".to_owned();
    task.write_record(name, change)
        .await
        .done()
        .expect("the store answers")
}

/// Polls `future` once, as `.await` would (its waker registered), and hands back the poll.
async fn poll_once<F: Future>(mut future: Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await
}

/// A trip told while a re-read pass is under way is written by that pass before it reads the
/// next batch of records, and before it takes on the records of the batch it was reading
/// (`resync.rs`, `read_all`), as the loop writes it before it looks at a published record: so another instance's trip made from the record before it (a `cas` over that
/// record) is refused and takes this one on, and this instance keeps its own. A pass that read
/// every record first wrote nothing told meanwhile until it ended, a store round trip per
/// shared breaker later; a write made from the older record in that time won over the trip
/// (its open time, reason and origin replaced this instance's).
///
/// The pass is polled by hand: its first poll stops in the read of its first batch (nothing
/// is pending, it has subscribed; both records are in it), the only moment the trips can be
/// told during it without a hook in the task. Both breakers trip then, after their records
/// were read.
#[tokio::test(flavor = "current_thread")]
async fn a_trip_told_during_a_resync_pass_is_written_before_the_next_record_is_read() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = format!("told-{}", std::process::id());
    let (mut task, shared, _pushes, breakers, before) = two_shared(&redis.url, &prefix).await;
    let applied = shared.applied.load(Ordering::Relaxed);
    let resyncs = shared.resyncs.load(Ordering::Relaxed);
    // The service answers 503 with `Retry-After: 600`, on both breakers, mid-pass.
    let retry_after = Duration::from_secs(600);
    let ok = {
        let mut pass = pin!(task.tick());
        assert!(
            poll_once(pass.as_mut()).await.is_pending(),
            "the pass waits on the store for its first record"
        );
        for b in &breakers {
            b.trip_for(retry_after);
        }
        pass.await
    };
    assert!(ok, "every store operation of the pass succeeded");
    assert_eq!(shared.resyncs.load(Ordering::Relaxed), resyncs + 1);

    for (b, before) in breakers.iter().zip(before) {
        let record = task.read_record(b.name()).await.done().unwrap();
        assert_eq!(
            (record.state, record.origin.as_str(), record.reason.clone()),
            (
                State::Open,
                "here",
                Reason::TripFor(retry_after).to_string()
            ),
            "{}: the trip told during the pass is the fleet's record once it ends",
            b.name()
        );
        let theirs = there(
            &mut task,
            b.name(),
            "cas",
            before,
            "open",
            "5 consecutive failures",
        )
        .await;
        assert!(
            !theirs.changed,
            "{}: a trip made from the record before this one's is refused",
            b.name()
        );
    }
    drain(&mut task, &mut timers()).await;
    for b in &breakers {
        assert_eq!(b.state(), State::Open, "{}", b.name());
        assert_eq!(
            b.export_state().open_remaining,
            Some(retry_after),
            "{}: open for the trip's own time",
            b.name()
        );
    }
    assert_eq!(
        shared.applied.load(Ordering::Relaxed),
        applied,
        "no record was taken on over the trips"
    );
}

/// An instance that tripped keeps its own failure once it has taken its own record on (as
/// written, and as a re-read pass reads it back): `last_failure` and `explain()` say what
/// failed here, and the record tells the others who tripped it and why.
#[tokio::test(flavor = "current_thread")]
async fn the_instance_that_tripped_keeps_its_own_failure_after_reading_its_record() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = format!("own-{}", std::process::id());
    let (mut task, _shared, _pushes, breakers, _) = two_shared(&redis.url, &prefix).await;
    let b = &breakers[0];
    while b.state() == State::Closed {
        b.try_acquire().unwrap().failure_with(&"HTTP 503");
    }
    drain(&mut task, &mut timers()).await;
    let record = task.read_record(b.name()).await.done().unwrap();
    assert_eq!(
        (
            record.state,
            record.origin.as_str(),
            record.last_failure.as_str()
        ),
        (State::Open, "here", "HTTP 503"),
        "the record tells who tripped it and why"
    );
    assert!(task.tick().await, "a re-read pass");
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.last_failure().as_deref(), Some("HTTP 503"));
    let text = b.explain().to_string();
    assert!(text.contains("last failure: 'HTTP 503'"), "{text}");
    assert!(!text.contains("imported"), "{text}");
}

/// `Fleet::resync` asked for while a re-read pass is under way (the periodic one, say) is
/// answered by a whole pass begun after the ask, with its result: the pass under way read some
/// records before the ask (a user who overwrote one with `redis-cli` and then asked must see
/// it read), and the ask is not left queued either. The ask is made in the read of the first
/// of two records, polled by hand as in the test above.
#[tokio::test(flavor = "current_thread")]
async fn a_resync_asked_for_during_a_pass_is_answered_by_a_whole_pass_after_it() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = format!("asked-{}", std::process::id());
    let (mut task, shared, _pushes, _breakers, _) = two_shared(&redis.url, &prefix).await;
    let resyncs = shared.resyncs.load(Ordering::Relaxed);
    let (done, mut answer) = oneshot::channel();
    let ok = {
        let mut pass = pin!(task.tick());
        assert!(
            poll_once(pass.as_mut()).await.is_pending(),
            "the pass waits on the store for its first record"
        );
        // What `Fleet::resync` sends.
        shared.tx.send(Message::Resync(done)).unwrap();
        pass.await
    };
    assert!(ok);
    assert_eq!(
        answer.try_recv(),
        Ok(true),
        "answered with the next pass's result when it ends"
    );
    assert_eq!(
        shared.resyncs.load(Ordering::Relaxed),
        resyncs + 2,
        "the pass under way, then a whole one for the ask"
    );
    assert!(task.rx.is_empty(), "nothing left queued for another pass");
}

// The re-read after a failure, and records this instance cannot read.
mod timing;

/// The task keeps nothing per key once each import's event is taken in: a stream of keys of a
/// shared family opened by other instances' records leaves no entry behind, however many keys
/// the family has seen.
#[tokio::test(flavor = "current_thread")]
async fn imports_into_a_familys_keys_leave_nothing_behind_once_told() {
    let (mut task, shared, _pushes) = task(&refused(), "imports");
    let mut timers = timers();
    for i in 0..100 {
        let name = crate::keys::key_name("hosts", &format!("k{i}"));
        let breaker = Breaker::new(format!("hosts[k{i}]"), Config::default());
        let weak = Arc::downgrade(&shared);
        let told = name.clone();
        breaker.on_state_change(move |event| {
            if let Some(shared) = weak.upgrade() {
                shared.tell_as(&told, event, None);
            }
        });
        task.track(&name, breaker.downgrade());
        let mut record = Record::none(1_000);
        record.epoch = 5;
        record.state = State::Open;
        record.open_until_ms = 61_000;
        record.origin = "there".to_owned();
        task.on_event(crate::store::Event::Written(name.clone(), record));
        assert_eq!(breaker.state(), State::Open, "taken on");
        while let Ok(message) = task.rx.try_recv() {
            task.note(message);
        }
        drop(breaker);
    }
    drain(&mut task, &mut timers).await;
    assert_eq!(task.own_imports.len(), 0, "entries kept per key");
}
