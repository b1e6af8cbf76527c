//! `#[circuit_breaker(replay = "fleet")]` (features `replay` and `redis`): three processes of
//! a fleet journal their rejected calls in the fleet's Redis, and each entry is replayed by
//! exactly one of them.
//!
//! The test starts this test binary three times (the ignored test `fleet_instance`), each its
//! own process with its own breaker, fleet and journal, against a real `redis-server` on
//! 127.0.0.1 (`scripts/test`'s, named by `BREAKERBOX_TEST_REDIS_URL`, or one of the test's
//! own; skipped, said so, without one, except under CI).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use breakerbox::fleet::{Fleet, FleetConfig};
use breakerbox::{Rejected, State, circuit_breaker, registry};

const INSTANCES: u32 = 3;
const PER_INSTANCE: u32 = 10;
const NAME: &str = "attr-replay-fleet";

#[derive(Debug)]
enum SendError {
    Down,
    Rejected(Rejected),
}

impl From<Rejected> for SendError {
    fn from(rejected: Rejected) -> Self {
        SendError::Rejected(rejected)
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Down => f.write_str("the service is down"),
            SendError::Rejected(r) => r.fmt(f),
        }
    }
}

static DOWN: AtomicBool = AtomicBool::new(true);

/// Each replay says which instance ran it, on stdout, for the parent to count.
#[circuit_breaker(
    name = "attr-replay-fleet",
    failures = 1,
    open_for = "1h",
    replay = "fleet",
    replay_rate = 10
)]
fn deliver(id: u32) -> Result<(), SendError> {
    if DOWN.load(Ordering::SeqCst) {
        return Err(SendError::Down);
    }
    let instance = std::env::var("BREAKERBOX_FLEET_CHILD").unwrap_or_default();
    println!("REPLAYED {instance} {id}");
    Ok(())
}

/// Waits for `done` on the wall clock: these are real processes on real time. At most
/// `limit`; `false` past it.
async fn until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// One instance of the fleet (run by the test below in a process of its own): journals its
/// calls while its breaker is open, says so, waits for the word to recover, and runs until
/// the fleet has replayed every instance's entries.
#[tokio::test]
#[ignore = "an instance of the fleet test below, started by it in a process of its own"]
async fn fleet_instance() {
    let Ok(child) = std::env::var("BREAKERBOX_FLEET_CHILD") else {
        eprintln!("fleet_instance runs only as a process of the fleet test");
        return;
    };
    let child: u32 = child.parse().unwrap();
    let url = std::env::var("BREAKERBOX_FLEET_URL").unwrap();
    let prefix = std::env::var("BREAKERBOX_FLEET_PREFIX").unwrap();
    let _fleet = Fleet::start(FleetConfig::new(url).prefix(prefix)).unwrap();

    // The first call fails and opens the breaker; the rest are journaled.
    let first = child * 100;
    assert!(matches!(deliver(first), Err(SendError::Down)));
    let breaker = registry().get(NAME).unwrap();
    assert_eq!(breaker.state(), State::Open);
    for id in first + 1..=first + PER_INSTANCE {
        match deliver(id) {
            Err(SendError::Rejected(rejected)) => {
                assert!(
                    rejected.journaled(),
                    "call {id} was not journaled: {rejected}"
                )
            }
            other => panic!("call {id} was not rejected: {other:?}"),
        }
    }
    println!("JOURNALED {child}");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "go");

    DOWN.store(false, Ordering::SeqCst);
    breaker.reset();
    let replay = breakerbox::replay::find(NAME).unwrap();
    let all = u64::from(INSTANCES * PER_INSTANCE);
    let replayed = until(Duration::from_secs(60), || {
        replay.status().counts.replayed >= all
    })
    .await;
    assert!(
        replayed,
        "the fleet replayed {:?} of {all}",
        replay.status()
    );
    println!("DONE {child}");
}

static HANG: AtomicBool = AtomicBool::new(false);

/// The kill test's function: while `HANG`, its replay says which entry it holds and never
/// ends (the process is killed holding it).
#[circuit_breaker(
    name = "attr-replay-fleet-kill",
    failures = 1,
    open_for = "1h",
    replay = "fleet",
    replay_claim_after = "2s"
)]
fn hold(id: u32) -> Result<(), SendError> {
    if DOWN.load(Ordering::SeqCst) {
        return Err(SendError::Down);
    }
    if HANG.load(Ordering::SeqCst) {
        println!("HOLDING {id}");
        loop {
            std::thread::park();
        }
    }
    println!("REPLAYED {id}");
    Ok(())
}

/// The kill test's instances (run by it in processes of their own): the first journals one
/// call, takes it for a replay when told and hangs in it; the second, started after the first
/// was killed, replays it.
#[tokio::test]
#[ignore = "an instance of the kill test below, started by it in a process of its own"]
async fn fleet_kill_instance() {
    let Ok(role) = std::env::var("BREAKERBOX_FLEET_ROLE") else {
        eprintln!("fleet_kill_instance runs only as a process of the kill test");
        return;
    };
    let url = std::env::var("BREAKERBOX_FLEET_URL").unwrap();
    let prefix = std::env::var("BREAKERBOX_FLEET_PREFIX").unwrap();
    let _fleet = Fleet::start(FleetConfig::new(url).prefix(prefix)).unwrap();
    if role == "first" {
        assert!(matches!(hold(0), Err(SendError::Down)));
        let Err(SendError::Rejected(rejected)) = hold(1) else {
            panic!("call 1 was not rejected");
        };
        assert!(rejected.journaled(), "{rejected}");
        println!("JOURNALED");
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).unwrap();
        HANG.store(true, Ordering::SeqCst);
        DOWN.store(false, Ordering::SeqCst);
        registry().get("attr-replay-fleet-kill").unwrap().reset();
        // The replay of entry 1 hangs; the parent kills this process.
        std::future::pending::<()>().await;
    }
    DOWN.store(false, Ordering::SeqCst);
    // The first call starts this instance's replay, off the call path (and runs: the service
    // is up).
    assert!(hold(0).is_ok());
    let found = until(Duration::from_secs(60), || {
        breakerbox::replay::find("attr-replay-fleet-kill").is_some()
    })
    .await;
    assert!(found, "the replay did not start");
    let replay = breakerbox::replay::find("attr-replay-fleet-kill").unwrap();
    let replayed = until(Duration::from_secs(60), || {
        replay.status().counts.replayed >= 1
    })
    .await;
    assert!(replayed, "not replayed: {:?}", replay.status());
    assert_eq!(replay.status().entries, 0);
    println!("DONE");
}

/// The server `scripts/test` started, or one of the test's own (killed when dropped).
struct TestRedis {
    url: String,
    child: Option<Child>,
}

impl TestRedis {
    fn get() -> Option<TestRedis> {
        if let Ok(url) = std::env::var("BREAKERBOX_TEST_REDIS_URL") {
            return Some(TestRedis { url, child: None });
        }
        TestRedis::own()
    }

    /// A server of the test's own (one it may stop).
    fn own() -> Option<TestRedis> {
        let port = TcpListener::bind("127.0.0.1:0")
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
            Ok(child) => {
                let deadline = Instant::now() + Duration::from_secs(5);
                while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                    assert!(Instant::now() < deadline, "redis-server did not start");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Some(TestRedis {
                    url: format!("redis://127.0.0.1:{port}/"),
                    child: Some(child),
                })
            }
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

/// A child's stdout lines that say something to the parent (from their first word of
/// `JOURNALED`, `REPLAYED`, `HOLDING`, `DONE`: libtest may write before it on the line), as
/// they come.
fn lines(child: &mut Child, tx: std::sync::mpsc::Sender<(u32, String)>, n: u32) {
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { break };
            let at = ["JOURNALED", "REPLAYED", "HOLDING", "DONE"]
                .iter()
                .filter_map(|word| line.find(word))
                .min();
            let Some(at) = at else { continue };
            if tx.send((n, line[at..].trim_end().to_owned())).is_err() {
                break;
            }
        }
    });
}

#[test]
fn three_processes_of_a_fleet_replay_each_journaled_call_exactly_once() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("bbtest:attr:{}:{nanos:x}", std::process::id());
    let (tx, rx) = std::sync::mpsc::channel();
    let mut children: Vec<Child> = (1..=INSTANCES)
        .map(|n| {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args(["fleet_instance", "--exact", "--ignored", "--nocapture"])
                .env("BREAKERBOX_FLEET_CHILD", n.to_string())
                .env("BREAKERBOX_FLEET_URL", &redis.url)
                .env("BREAKERBOX_FLEET_PREFIX", &prefix)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            lines(&mut child, tx.clone(), n);
            child
        })
        .collect();
    drop(tx);

    let mut replayed: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut journaled = 0;
    let mut done = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while done < INSTANCES {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((n, line)) = rx.recv_timeout(left) else {
            panic!(
                "the instances did not finish: {journaled} journaled, {done} done, replayed {replayed:?}"
            );
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["JOURNALED", _] => {
                journaled += 1;
                if journaled == INSTANCES {
                    // Every instance's calls are in the journal: all recover at once.
                    for child in &mut children {
                        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
                    }
                }
            }
            ["REPLAYED", by, id] => {
                assert_eq!(by.parse::<u32>().unwrap(), n);
                replayed.entry(id.parse().unwrap()).or_default().push(n);
            }
            ["DONE", _] => done += 1,
            _ => {}
        }
    }
    for mut child in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "an instance failed: {status}");
    }
    let expected: Vec<u32> = (1..=INSTANCES)
        .flat_map(|n| n * 100 + 1..=n * 100 + PER_INSTANCE)
        .collect();
    assert_eq!(
        replayed.keys().copied().collect::<Vec<_>>(),
        expected,
        "every journaled call replayed (and the calls that ran, none): {replayed:?}"
    );
    assert!(
        replayed.values().all(|by| by.len() == 1),
        "each exactly once: {replayed:?}"
    );
    let mut replayers: Vec<u32> = replayed.values().map(|by| by[0]).collect();
    replayers.sort_unstable();
    replayers.dedup();
    let foreign = replayed
        .iter()
        .filter(|(id, by)| **id / 100 != by[0])
        .count();
    assert!(
        replayers.len() >= 2 && foreign > 0,
        "the instances shared the replays ({foreign} entries replayed by an instance other than the one that journaled them): {replayed:?}"
    );
}

/// Runs `fleet_kill_instance` as `role`, its stdout lines sent to `tx`.
fn kill_instance(
    role: &str,
    redis: &TestRedis,
    prefix: &str,
    tx: std::sync::mpsc::Sender<(u32, String)>,
) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["fleet_kill_instance", "--exact", "--ignored", "--nocapture"])
        .env("BREAKERBOX_FLEET_ROLE", role)
        .env("BREAKERBOX_FLEET_URL", &redis.url)
        .env("BREAKERBOX_FLEET_PREFIX", prefix)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    lines(&mut child, tx, u32::from(role == "again"));
    child
}

#[test]
fn an_entry_held_by_a_process_killed_with_sigkill_is_replayed_after_a_restart() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let prefix = format!("bbtest:kill:{}:{nanos:x}", std::process::id());
    let (tx, rx) = std::sync::mpsc::channel();
    let mut first = kill_instance("first", &redis, &prefix, tx.clone());
    let next = |what: &str| {
        let (_, line) = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no {what} within 60 s"));
        line
    };
    let mut line = next("JOURNALED");
    while line != "JOURNALED" {
        line = next("JOURNALED");
    }
    writeln!(first.stdin.as_mut().unwrap(), "go").unwrap();
    while line != "HOLDING 1" {
        line = next("HOLDING 1");
    }
    // SIGKILL, mid-replay: the entry stays pending on the dead instance's consumer.
    first.kill().unwrap();
    assert!(!first.wait().unwrap().success());

    let mut again = kill_instance("again", &redis, &prefix, tx);
    let mut seen = Vec::new();
    loop {
        let line = next("DONE");
        if line == "DONE" {
            break;
        }
        if line.starts_with("REPLAYED") {
            seen.push(line);
        }
    }
    assert!(again.wait().unwrap().success());
    assert_eq!(
        seen,
        ["REPLAYED 0", "REPLAYED 1"],
        "the restarted instance ran its own call, then replayed the dead one's entry once"
    );
}

#[circuit_breaker(name = "attr-replay-fleet-hung", failures = 1, replay = "fleet")]
fn quick(id: u32) -> Result<u32, SendError> {
    Ok(id)
}

/// Sends `signal` to process `pid`.
fn signal(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

#[tokio::test]
#[allow(
    clippy::await_holding_lock,
    reason = "the lock keeps the other in-process fleet tests out, on their own threads"
)]
async fn a_hung_redis_never_holds_the_calls_of_a_closed_breaker() {
    let _turn = fleet_in_process();
    let Some(redis) = TestRedis::own() else {
        return;
    };
    let pid = redis.child.as_ref().unwrap().id();
    let prefix = format!("bbtest:hung:{}:", std::process::id());
    let fleet = Fleet::start(FleetConfig::new(redis.url.clone()).prefix(prefix)).unwrap();
    // Redis hangs: connections stay open, nothing answers.
    signal("-STOP", pid);
    let mut slowest = Duration::ZERO;
    // Calls for 1.5 s of real time: the journal's start is tried again each second.
    for id in 0..30 {
        let began = Instant::now();
        assert_eq!(quick(id).unwrap(), id);
        slowest = slowest.max(began.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal("-CONT", pid);
    drop(fleet);
    assert!(
        slowest < JOURNAL_TIMEOUT / 2,
        "a call of a closed breaker took {slowest:?}"
    );
}

/// The tests that start a fleet in this process (the fleet journal is the running fleet's)
/// take turns.
static FLEET_IN_PROCESS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fleet_in_process() -> std::sync::MutexGuard<'static, ()> {
    FLEET_IN_PROCESS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The fleet journal's timeout (`RedisOptions`'s default, the attribute's journal's). What
/// waits on a hung Redis when it should not waits this long or more, so the tests here bound
/// such waits by half of it: room for a loaded machine's scheduling.
const JOURNAL_TIMEOUT: Duration = Duration::from_millis(500);

/// A task of the application's on the runtime's one thread, ticking every 10 ms until `stop`
/// (running once this returns): the longest gap between two ticks.
async fn ticking(stop: std::sync::Arc<AtomicBool>) -> tokio::task::JoinHandle<Duration> {
    let (running, ticks) = tokio::sync::oneshot::channel();
    let app = tokio::spawn(async move {
        let mut gap = Duration::ZERO;
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        let _ = running.send(());
        while !stop.load(Ordering::SeqCst) {
            let before = Instant::now();
            tick.tick().await;
            gap = gap.max(before.elapsed());
        }
        gap
    });
    ticks.await.unwrap();
    app
}

#[circuit_breaker(name = "attr-replay-fleet-async", failures = 1, replay = "fleet")]
async fn post(id: u32) -> Result<u32, SendError> {
    Ok(id)
}

#[tokio::test(flavor = "current_thread")]
#[allow(
    clippy::await_holding_lock,
    reason = "the lock keeps the other in-process fleet tests out, on their own threads"
)]
async fn an_async_fn_journals_without_holding_its_runtime_thread_while_redis_hangs() {
    let _turn = fleet_in_process();
    let Some(redis) = TestRedis::own() else {
        return;
    };
    let pid = redis.child.as_ref().unwrap().id();
    let prefix = format!("bbtest:hung-async:{}:", std::process::id());
    let fleet = Fleet::start(FleetConfig::new(redis.url.clone()).prefix(prefix)).unwrap();
    // The first call starts the journal; a call rejected while it starts waits for it.
    assert_eq!(post(0).await.unwrap(), 0);
    registry()
        .get("attr-replay-fleet-async")
        .unwrap()
        .force_open();
    let Err(SendError::Rejected(rejected)) = post(1).await else {
        panic!("call 1 ran while forced open");
    };
    assert!(rejected.journaled(), "journaled while Redis answers");

    // Redis hangs: connections stay open, nothing answers.
    signal("-STOP", pid);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let app = ticking(stop.clone()).await;
    let mut waits = Vec::new();
    for id in 2..=4 {
        let began = Instant::now();
        let answer = post(id).await;
        waits.push(began.elapsed());
        let Err(SendError::Rejected(rejected)) = answer else {
            panic!("call {id} ran while forced open");
        };
        assert!(
            !rejected.journaled(),
            "call {id} told journaled with Redis stopped"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let gap = app.await.unwrap();
    signal("-CONT", pid);

    assert!(
        gap < JOURNAL_TIMEOUT / 2,
        "the application's 10 ms tick waited {gap:?} behind the journal"
    );
    assert!(
        waits[0] < JOURNAL_TIMEOUT + Duration::from_millis(250),
        "the first refusal took {:?}",
        waits[0]
    );
    assert!(
        waits[1..].iter().all(|w| *w < JOURNAL_TIMEOUT / 2),
        "refusals while Redis is known not to answer waited: {waits:?}"
    );
    // Once Redis answers again: only the call told journaled is queued, the three refusals
    // counted.
    let replay = breakerbox::replay::find("attr-replay-fleet-async").unwrap();
    let mut status = replay.status_async().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while status.is_err() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        status = replay.status_async().await;
    }
    let status = status.expect("Redis answers again");
    assert_eq!(status.entries, 1, "{status:?}");
    assert_eq!(status.counts.queued, 1, "{status:?}");
    assert_eq!(status.counts.refused, 3, "{status:?}");
    drop(fleet);
}

#[circuit_breaker(name = "attr-replay-fleet-async-start", failures = 1, replay = "fleet")]
async fn post_early(id: u32) -> Result<u32, SendError> {
    Ok(id)
}

#[tokio::test(flavor = "current_thread")]
#[allow(
    clippy::await_holding_lock,
    reason = "the lock keeps the other in-process fleet tests out, on their own threads"
)]
async fn an_async_fn_waits_for_its_journal_to_open_without_holding_its_runtime_thread() {
    let _turn = fleet_in_process();
    let Some(redis) = TestRedis::own() else {
        return;
    };
    let pid = redis.child.as_ref().unwrap().id();
    let prefix = format!("bbtest:hung-start:{}:", std::process::id());
    let fleet = Fleet::start(FleetConfig::new(redis.url.clone()).prefix(prefix)).unwrap();
    // Redis hangs before the journal opens: its start waits for Redis's answer, off the call
    // path.
    signal("-STOP", pid);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let app = ticking(stop.clone()).await;
    let began = Instant::now();
    assert_eq!(post_early(0).await.unwrap(), 0);
    let first = began.elapsed();
    registry()
        .get("attr-replay-fleet-async-start")
        .unwrap()
        .force_open();
    // A rejected call waits for the start under way, which fails: not journaled.
    let began = Instant::now();
    let Err(SendError::Rejected(rejected)) = post_early(1).await else {
        panic!("call 1 ran while forced open");
    };
    let rejected_wait = began.elapsed();
    assert!(!rejected.journaled(), "told journaled with Redis stopped");
    stop.store(true, Ordering::SeqCst);
    let gap = app.await.unwrap();
    signal("-CONT", pid);
    drop(fleet);

    assert!(
        first < JOURNAL_TIMEOUT / 2,
        "the call that started the journal took {first:?}"
    );
    assert!(
        gap < JOURNAL_TIMEOUT / 2,
        "the application's 10 ms tick waited {gap:?} behind the journal's start"
    );
    assert!(
        rejected_wait < JOURNAL_TIMEOUT + Duration::from_millis(250),
        "the rejected call waited {rejected_wait:?} for the start"
    );
}
