//! The fleet task's timing after failures, and records it cannot read, against a real
//! `redis-server`. Probe leases that run out are a scenario of the simulator
//! (`sim/scenarios.rs`, `an_idle_fleet_runs_at_most_half_open_calls_probes`): their expiry
//! needs the store's clock and the instances' to move together.

use super::*;

/// A task with this `resync_every`, its store refusing every connection.
fn task_every(every: Duration) -> (Task, Arc<Inner>, mpsc::UnboundedSender<PushInfo>) {
    let url = refused();
    let config = FleetConfig::new(&url)
        .prefix("every")
        .timeout(Duration::from_millis(100))
        .resync_every(every);
    let (task, shared, pushes) = task_with(&url, config);
    shared.connected.store(true, Ordering::Relaxed);
    (task, shared, pushes)
}

/// docs/fleet.md: "within 100 ms after a failure or a disconnection, the task writes what is
/// pending and reads every shared record". A disconnection told by the connection manager
/// while the loop waits for its next resync (`resync_every` after the last one) brings that
/// resync forward: setting `owed` alone would leave `timers.next` where it was.
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
/// retried within 100 ms, not at the next periodic resync, `resync_every` later.
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
    while task.read_record("ping-probe").await.done().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the store never answered"
        );
        tokio::task::yield_now().await;
    }
}

/// A record another (older, newer or hostile) instance wrote in a form this one cannot parse
/// (here an epoch that is not a number) is skipped, and the pass goes on: it is not a store
/// failure, so every later record is read, `tick` (and `Fleet::resync`) answers `true`, and the
/// fleet leaves its fast-retry mode.
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

/// A value of another type under one breaker's key of a real `redis-server` (another
/// application's string, a hash whose epoch is no number) is that breaker's problem alone,
/// under every `on_store_error`: the store still counts as answering, nothing is held, every
/// pass succeeds, another breaker's trip is written, and the junk breaker's own trip is kept
/// and written once the key is gone.
#[tokio::test(flavor = "current_thread")]
async fn a_foreign_value_in_a_real_redis_leaves_the_other_breakers_shared() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    use crate::OnStoreError;
    let policies = [
        OnStoreError::Local,
        OnStoreError::Open,
        OnStoreError::Closed,
    ];
    for (i, policy) in policies.into_iter().enumerate() {
        for string in [true, false] {
            let prefix = format!("junk-{i}-{string}-{}", std::process::id());
            let config = FleetConfig::new(&redis.url)
                .prefix(&prefix)
                .timeout(Duration::from_secs(5))
                .on_store_error(policy);
            let (mut task, shared, _pushes) = task_with(&redis.url, config);
            ready(&mut task).await;
            let config = Config::builder()
                .failures(1)
                .clock(ManualClock::new())
                .build()
                .unwrap();
            let junk = Breaker::new("junk", config.clone());
            let fine = Breaker::new("fine", config);
            share(&mut task, &shared, &junk);
            share(&mut task, &shared, &fine);
            assert!(task.tick().await);
            let mut con = client.get_multiplexed_async_connection().await.unwrap();
            let key = format!("{{{prefix}:junk}}");
            if string {
                let _: () = redis::cmd("SET")
                    .arg(&key)
                    .arg("another app's")
                    .query_async(&mut con)
                    .await
                    .unwrap();
            } else {
                let _: () = redis::cmd("HSET")
                    .arg(&key)
                    .arg(&["epoch", "abc", "state", "open"])
                    .query_async(&mut con)
                    .await
                    .unwrap();
            }
            let context = format!("{policy:?}, a string: {string}");
            let _ = junk.call(|| Err::<(), _>("down"));
            let _ = fine.call(|| Err::<(), _>("down"));
            drain(&mut task, &mut timers()).await;
            for _ in 0..3 {
                assert!(task.tick().await, "{context}: every pass succeeds");
            }
            assert!(shared.connected.load(Ordering::Relaxed), "{context}");
            assert!(!task.holding(), "{context}: nothing held");
            assert_eq!(
                shared.store_errors.load(Ordering::Relaxed),
                0,
                "{context}: {:?}",
                shared.last_error.lock().unwrap()
            );
            let record = task.read_record("fine").await.done().unwrap();
            assert_eq!(
                record.state,
                State::Open,
                "{context}: the other trip is written"
            );
            assert_eq!(
                junk.state(),
                State::Open,
                "{context}: the junk trip is kept here"
            );
            let _: () = redis::cmd("DEL")
                .arg(&key)
                .query_async(&mut con)
                .await
                .unwrap();
            // Its backoff (at most 500 ms, on tokio's clock, which a test with a real server
            // cannot pause) over: the next pass writes it.
            task.tracked.get_mut("junk").unwrap().trouble = None;
            assert!(task.tick().await, "{context}");
            let record = task.read_record("junk").await.done().unwrap();
            assert_eq!(
                record.state,
                State::Open,
                "{context}: written once the key is gone"
            );
        }
    }
}

/// The re-read pass at scale, for BENCHMARKS.md: the time of one pass over 100, 1 000 and
/// 10 000 shared breakers, each with a record, on this machine's `redis-server`, the commands
/// Redis counts for it, and this process's memory for the shared breakers. A measurement, not
/// a test: ignored by default, it asserts nothing about time and prints what it measured.
///
///   cargo test -p breakerbox-fleet --profile sim --lib resync_pass_numbers -- --ignored --nocapture
#[tokio::test(flavor = "current_thread")]
#[ignore = "a measurement for BENCHMARKS.md; run by hand"]
async fn resync_pass_numbers() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let client = redis::Client::open(redis.url.as_str()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    for n in [100usize, 1_000, 10_000] {
        let prefix = format!("scale-{n}-{}", std::process::id());
        let rss_before = rss_kib();
        let (mut task, shared, _pushes) = task_timed(&redis.url, &prefix, Duration::from_secs(5));
        ready(&mut task).await;
        let config = Config::builder().clock(ManualClock::new()).build().unwrap();
        let breakers: Vec<Breaker> = (0..n)
            .map(|i| Breaker::new(format!("b{i}"), config.clone()))
            .collect();
        for b in &breakers {
            share(&mut task, &shared, b);
        }
        // Every breaker gets a record, as a fleet that has run for a while has.
        for b in &breakers {
            let mut change = task.change_of(
                b.name(),
                true,
                0,
                State::Closed,
                0,
                0,
                "reset".to_owned(),
                String::new(),
            );
            change.instance = "there".to_owned();
            task.write_record(b.name(), change).await.done().unwrap();
        }
        assert!(task.tick().await);
        let rss_after = rss_kib();
        let calls_before = commands_counted(&mut con).await;
        let passes = 5;
        let start = std::time::Instant::now();
        for _ in 0..passes {
            assert!(task.tick().await);
        }
        let per_pass = start.elapsed() / passes;
        let commands = (commands_counted(&mut con).await - calls_before) / u64::from(passes);
        println!(
            "{{\"resync_pass\": {{\"breakers\": {n}, \"ms_per_pass\": {:.2}, \"redis_commands_per_pass\": {commands}, \"batch\": {}, \"rss_kib_for_breakers_and_fleet\": {}}}}}",
            per_pass.as_secs_f64() * 1e3,
            crate::task::state::READ_BATCH,
            rss_after.saturating_sub(rss_before)
        );
    }
}

/// The commands a pass sends, as Redis counts them (`EVALSHA`, `HMGET`, `TIME`; `INFO` itself
/// is counted too, once a call, and subtracts out).
async fn commands_counted(con: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(con)
        .await
        .unwrap();
    ["evalsha", "hmget", "time"]
        .iter()
        .map(|name| {
            info.lines()
                .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
                .and_then(|rest| rest.split(',').next())
                .and_then(|c| c.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// This process's resident memory in KiB (Linux), 0 elsewhere.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4)
}
