//! The fleet task's timing, unreadable records and probe leases: tests an adversarial review
//! wrote, each failing before its fix; `an_expired_lease_leaves_its_holder_no_probe` still
//! does (ignored).

use super::*;

/// A task with this `resync_every`, its store refusing every connection.
fn task_every(every: Duration) -> (Task, Arc<Shared>, mpsc::UnboundedSender<PushInfo>) {
    let (mut task, shared, pushes) = task(&refused(), "every");
    let config = shared.config.clone().resync_every(every);
    let shared = Arc::new(Shared {
        config,
        instance: "here".to_owned(),
        tx: shared.tx.clone(),
        connected: AtomicBool::new(true),
        pushed: AtomicU64::new(0),
        applied: AtomicU64::new(0),
        store_errors: AtomicU64::new(0),
        resyncs: AtomicU64::new(0),
        held: std::sync::Mutex::new(None),
    });
    task.shared = shared.clone();
    (task, shared, pushes)
}

/// docs/fleet.md: "within 100 ms after a failure or a disconnection, the task writes what is
/// pending and reads every shared record". A disconnection told by the connection manager
/// while the loop waits for its next resync (`resync_every` after the last one) brings that
/// resync forward (before the fix `owed` was set, but `timers.next` was kept).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_disconnection_brings_the_next_resync_within_100ms() {
    let (mut task, _shared, pushes) = task_every(Duration::from_secs(30));
    // As after a successful pass: the next one in `resync_every`.
    let mut timers = timers();
    timers.next = Instant::now() + Duration::from_secs(30);
    pushes
        .send(PushInfo {
            kind: PushKind::Disconnection,
            data: vec![],
        })
        .unwrap();
    drain(&mut task, &mut timers).await;
    assert!(task.owed, "the disconnection owes a re-read");
    let wait = timers.next - Instant::now();
    assert!(
        wait <= Duration::from_millis(100),
        "next re-read in {wait:?}, not within 100 ms"
    );
}

/// The same for a local change whose write fails (the store refuses): it is kept pending and
/// retried within 100 ms (before the fix, at the next periodic resync, `resync_every` later).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failed_write_is_retried_within_100ms() {
    let (mut task, shared, _pushes) = task_every(Duration::from_secs(30));
    let breaker = Breaker::new("payments", Config::default());
    share(&mut task, &shared, &breaker);
    let mut timers = timers();
    timers.next = Instant::now() + Duration::from_secs(30);
    breaker.force_open();
    drain(&mut task, &mut timers).await;
    assert!(task.pending.contains_key("payments"), "kept pending");
    assert!(task.owed);
    let wait = timers.next - Instant::now();
    assert!(
        wait <= Duration::from_millis(100),
        "the pending write is retried in {wait:?}, not within 100 ms"
    );
}

/// Until the store answers (a redis-server of the test's own may still be starting).
async fn ready(task: &mut Task) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while task.invoke("ping-probe", &["read"]).await.done().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the store never answered"
        );
        tokio::task::yield_now().await;
    }
}

/// A record another (older, newer or hostile) instance wrote in a form this one cannot parse
/// (here an epoch that is not a number) is skipped, and the pass goes on. Before the fix the
/// re-read took it for a store failure: the pass stopped there, every later record went
/// unread, `tick` (and `Fleet::resync`) answered `false` for ever though the store answered,
/// and the fleet stayed in its fast-retry mode.
#[tokio::test(flavor = "current_thread")]
async fn a_malformed_record_does_not_stall_every_resync() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = format!("malformed-{}", std::process::id());
    let (mut task, shared, _pushes) = task_timed(&redis.url, &prefix, Duration::from_secs(5));
    ready(&mut task).await;
    let breaker = Breaker::new("payments", Config::default());
    share(&mut task, &shared, &breaker);
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("HSET")
        .arg(format!("{{{prefix}:payments}}"))
        .arg(&[
            "epoch",
            "v2-1700000000000",
            "state",
            "open",
            "open_until",
            "0",
        ])
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(
        task.tick().await,
        "the store answers; one bad record must not fail the pass"
    );
    assert!(!task.owed);
}

/// A task like `task_timed`'s, writing as instance `instance`.
fn task_as(url: &str, prefix: &str, instance: &str) -> (Task, Arc<Shared>) {
    let (mut task, shared, _pushes) = task_timed(url, prefix, Duration::from_secs(5));
    let shared = Arc::new(Shared {
        config: shared.config.clone(),
        instance: instance.to_owned(),
        tx: shared.tx.clone(),
        connected: AtomicBool::new(false),
        pushed: AtomicU64::new(0),
        applied: AtomicU64::new(0),
        store_errors: AtomicU64::new(0),
        resyncs: AtomicU64::new(0),
        held: std::sync::Mutex::new(None),
    });
    task.shared = shared.clone();
    (task, shared)
}

/// Fleet-wide half-open, `half_open_calls = 1`: instance `a` is granted the one lease and its
/// breaker the probe budget 1, but no call comes to `a` before the lease expires
/// (`probe_timeout`, on the server's clock: here the lease's score is set in the past, as that
/// time passing would). Instance `b` asks then and is granted the lease. Nothing takes `a`'s
/// budget back: its breaker still admits a probe, so both instances probe at once, two probes
/// fleet-wide where docs/fleet.md promises "at most `half_open_calls`" and "one lease is one
/// probe call". Expected: an instance whose leases expired does not probe without asking again.
#[ignore = "defect: an expired lease's probe budget stays: its holder and the next lease holder both probe"]
#[tokio::test(flavor = "current_thread")]
async fn an_expired_lease_leaves_its_holder_no_probe() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = format!("lease-{}", std::process::id());
    let (mut a, shared_a) = task_as(&redis.url, &prefix, "a");
    let (mut b, shared_b) = task_as(&redis.url, &prefix, "b");
    ready(&mut a).await;
    // One clock for both breakers, moved by hand.
    let clock = ManualClock::new();
    let config = Config::builder()
        .half_open_calls(1)
        .successes(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let breaker_a = Breaker::new("payments", config.clone());
    let breaker_b = Breaker::new("payments", config);
    share(&mut a, &shared_a, &breaker_a);
    share(&mut b, &shared_b, &breaker_b);
    assert!(a.tick().await && b.tick().await);
    // The fleet's trip, whose open time has run out (on the server's clock).
    there(
        &mut a,
        "payments",
        "force",
        0,
        "open",
        "5 consecutive failures",
    )
    .await;
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let key = format!("{{{prefix}:payments}}");
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg(&["open_until", "1"])
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(a.tick().await && b.tick().await);
    assert_eq!(
        (breaker_a.state(), breaker_b.state()),
        (State::Open, State::Open)
    );

    a.probe_due().await;
    let leases = lease_holders(&mut con, &key).await;
    assert_eq!(leases, ["a#1"], "a holds the one lease");
    // probe_timeout passes on the server with no call at `a`: its lease expires.
    let _: () = redis::cmd("ZADD")
        .arg(format!("{key}:probes"))
        .arg(1)
        .arg("a#1")
        .query_async(&mut con)
        .await
        .unwrap();
    b.probe_due().await;
    let leases = lease_holders(&mut con, &key).await;
    assert_eq!(leases, ["b#1"], "b holds the one lease now");

    // A moment later on the breakers' clock (their lease imports left them no open time).
    clock.advance(Duration::from_millis(1));
    let probe_b = breaker_b.try_acquire();
    assert!(probe_b.is_ok(), "b, the lease holder, probes");
    let probe_a = breaker_a.try_acquire();
    assert!(
        probe_a.is_err(),
        "a's lease expired and b holds the only one, yet a probes too: two probes fleet-wide"
    );
}

/// The leases held on `key`'s record, oldest first.
async fn lease_holders(con: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(format!("{key}:probes"))
        .arg(0)
        .arg(-1)
        .query_async(con)
        .await
        .unwrap()
}
