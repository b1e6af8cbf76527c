//! The fleet journal against a real `redis-server` on 127.0.0.1 (`scripts/test`'s, named by
//! `BREAKERBOX_TEST_REDIS_URL`, or one of the test's own): replayers sharing one stream, an
//! instance that dies holding an entry, TTL, keys, Redis down or silent, a foreign value
//! under the journal's key, and a seeded model of the take/settle/claim protocol.
//!
//! Times: replayers run on tokio's paused time with `TokioClock` as the journal's clock, and
//! the model drives the journal's clock by hand; the claim timeout is on that clock, so no
//! test waits for real time (the silent-Redis test waits its 100 ms timeout).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_replay::{
    Journal, NotJournaled, Pushed, RedisJournal, RedisOptions, Replay, ReplayConfig, Settled,
    StartError, Take,
};
use breakerbox_runtime::{Breaker, Config, Error, TokioClock};

/// The server `scripts/test` started, or one of the test's own; `None` (skipped, said so)
/// without `redis-server`, except under CI.
struct TestRedis {
    url: String,
    child: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match child {
            Ok(child) => {
                let redis = TestRedis {
                    url: format!("redis://127.0.0.1:{port}/"),
                    child: Some(child),
                };
                redis.wait_up();
                Some(redis)
            }
            Err(e) => {
                let ci = std::env::var("CI").is_ok_and(|v| v == "true");
                assert!(!ci, "redis-server is needed under CI: {e}");
                eprintln!("SKIPPED: no redis-server ({e})");
                None
            }
        }
    }

    /// Until the server answers a PING (it starts in a few ms; at most 5 s).
    fn wait_up(&self) {
        let client = redis::Client::open(self.url.as_str()).unwrap();
        for _ in 0..500 {
            if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(100))
                && redis::cmd("PING").query::<String>(&mut con).is_ok()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server at {} did not start", self.url);
    }

    fn stop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn command(&self, cmd: &redis::Cmd) -> redis::Value {
        let client = redis::Client::open(self.url.as_str()).unwrap();
        let mut con = client.get_connection().unwrap();
        cmd.query(&mut con).unwrap()
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A key prefix no other test (or run) uses.
fn prefix(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("bbtest:{}:{nanos:x}:{test}:", std::process::id())
}

fn breaker(name: &str) -> Breaker {
    let config = Config::builder()
        .failures(3)
        .open_for(Duration::from_secs(5))
        .clock(TokioClock)
        .build()
        .unwrap();
    Breaker::new(name, config)
}

/// A long timeout: a loaded machine must not fail a call to a live server.
fn options(redis: &TestRedis, prefix: &str, consumer: &str) -> RedisOptions {
    RedisOptions::new(redis.url.clone())
        .timeout(Duration::from_secs(5))
        .prefix(prefix)
        .consumer(consumer)
        .claim_after(Duration::from_secs(30))
        .poll(Duration::from_millis(200))
}

/// What the replays saw: (replayer, argument), in order.
type Seen = Arc<Mutex<Vec<(&'static str, u32)>>>;

fn replayer(
    breaker: &Breaker,
    options: RedisOptions,
    name: &'static str,
    seen: &Seen,
) -> Replay<u32> {
    let seen = seen.clone();
    Replay::builder(breaker)
        .clock(TokioClock)
        .config(ReplayConfig::new().rate(50))
        .redis(options, move |n: u32| {
            seen.lock().unwrap().push((name, n));
            async { Ok::<_, String>(()) }
        })
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn three_replayers_on_one_stream_replay_every_entry_exactly_once() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("three");
    let seen: Seen = Arc::default();
    let breakers: Vec<Breaker> = (0..3).map(|_| breaker("hooks")).collect();
    let names = ["a", "b", "c"];
    let replays: Vec<Replay<u32>> = breakers
        .iter()
        .zip(names)
        .map(|(b, name)| replayer(b, options(&redis, &prefix, name), name, &seen))
        .collect();
    for b in &breakers {
        b.force_open();
    }
    for n in 0..90u32 {
        let replay = &replays[n as usize % 3];
        let answer = replay.call(n, |_| Ok::<_, String>(()));
        let Err(Error::Rejected(rejected)) = answer else {
            panic!("call {n} ran while forced open");
        };
        assert!(rejected.journaled(), "call {n} was not journaled");
    }
    assert_eq!(replays[0].status().entries, 90, "one journal for the fleet");
    for b in &breakers {
        b.reset();
    }
    tokio::time::sleep(Duration::from_secs(10)).await;

    let seen = seen.lock().unwrap().clone();
    let mut times: BTreeMap<u32, usize> = BTreeMap::new();
    for (_, n) in &seen {
        *times.entry(*n).or_default() += 1;
    }
    assert_eq!(times.len(), 90, "every entry replayed: {seen:?}");
    assert!(times.values().all(|&t| t == 1), "each once: {times:?}");
    for name in names {
        assert!(
            seen.iter().any(|(by, _)| *by == name),
            "replayer {name} replayed none of 90: {seen:?}"
        );
    }
    let status = replays[2].status();
    assert_eq!((status.entries, status.bytes), (0, 0));
    assert_eq!(status.counts.queued, 90);
    assert_eq!(status.counts.replayed, 90);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_entry_held_by_a_replayer_that_died_is_replayed_by_another_after_claim_after() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("claim");
    let first = breaker("mail");
    // The first replayer's replay never ends: it dies holding the entry.
    let started = Arc::new(Mutex::new(0u32));
    let dying = {
        let started = started.clone();
        Replay::builder(&first)
            .clock(TokioClock)
            .redis(options(&redis, &prefix, "dies"), move |_: u32| {
                *started.lock().unwrap() += 1;
                std::future::pending::<Result<(), String>>()
            })
            .unwrap()
    };
    first.force_open();
    let Err(Error::Rejected(rejected)) = dying.call(7, |_| Ok::<_, String>(())) else {
        panic!("ran while open");
    };
    assert!(rejected.journaled());
    first.reset();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        *started.lock().unwrap(),
        1,
        "the first replayer took the entry"
    );
    drop(dying); // its task is aborted mid-replay: the entry stays held by its consumer

    let seen: Seen = Arc::default();
    let second = breaker("mail");
    let _survivor = replayer(&second, options(&redis, &prefix, "lives"), "lives", &seen);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "not taken over before claim_after (30 s after it was taken)"
    );
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(*seen.lock().unwrap(), vec![("lives", 7)], "taken over once");
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(seen.lock().unwrap().len(), 1, "and replayed once");
    assert_eq!(_survivor.status().entries, 0);
}

fn journal(
    redis: &TestRedis,
    prefix: &str,
    consumer: &str,
    config: &ReplayConfig,
) -> RedisJournal<u32> {
    RedisJournal::open("hooks", options(redis, prefix, consumer), config).unwrap()
}

const S: fn(u64) -> Duration = Duration::from_secs;

#[test]
fn entries_older_than_the_ttl_expire_unreplayed() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("ttl");
    let config = ReplayConfig::new().ttl(S(60));
    let j = journal(&redis, &prefix, "a", &config);
    assert_eq!(j.push(None, 1, S(100)).unwrap(), Pushed::New(1));
    assert_eq!(j.push(None, 2, S(130)).unwrap(), Pushed::New(2));
    // 160 s: the first is 60 s old, the second 30 s.
    let Take::Due(taken) = j.take(S(160)) else {
        panic!("the second entry is due");
    };
    assert_eq!((taken.id, taken.args), (2, 2));
    j.settle(2, Settled::NotRun, S(160));
    let status = j.status();
    assert_eq!((status.entries, status.counts.expired), (1, 1));
    assert!(
        matches!(j.take(S(190)), Take::Wait(_)),
        "the second expired too"
    );
    let status = j.status();
    assert_eq!(
        (status.entries, status.bytes, status.counts.expired),
        (0, 0, 2)
    );
    assert_eq!(status.counts.replayed, 0);
}

#[test]
fn a_journal_whose_counts_were_lost_takes_calls_at_once_after_the_streams_last_id() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("counts");
    let j = journal(&redis, &prefix, "a", &ReplayConfig::new());
    for n in 1..=5 {
        assert_eq!(j.push(None, n, S(100)).unwrap(), Pushed::New(u64::from(n)));
    }
    // The last two replayed: the stream's last id is past every entry it holds.
    let taken: Vec<u64> = (0..5)
        .map(|_| match j.take(S(100)) {
            Take::Due(taken) => taken.id,
            other => panic!("{other:?}"),
        })
        .collect();
    for id in taken {
        let how = if id > 3 {
            Settled::Replayed
        } else {
            Settled::NotRun
        };
        j.settle(id, how, S(100));
    }
    redis.command(redis::cmd("DEL").arg(format!("{prefix}{{hooks}}:counts")));
    assert_eq!(j.push(None, 6, S(101)).unwrap(), Pushed::New(6));
    assert_eq!(j.push(None, 7, S(101)).unwrap(), Pushed::New(7));
    let ids: Vec<u64> = j.entries().iter().map(|e| e.id).collect();
    assert_eq!(ids, [1, 2, 3, 6, 7]);
}

#[test]
fn after_its_stream_and_counts_are_lost_no_new_entry_takes_the_id_of_one_a_replay_holds() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("lost-all");
    let config = ReplayConfig::new();
    let a = journal(&redis, &prefix, "a", &config);
    let b = journal(&redis, &prefix, "b", &config);
    for n in 1..=3 {
        a.push(None, n, S(100)).unwrap();
    }
    // `a` holds entry 1, `b` entry 2, when Redis loses the stream and the counts.
    let (Take::Due(one), Take::Due(two)) = (a.take(S(100)), b.take(S(100))) else {
        panic!("two entries due");
    };
    assert_eq!((one.id, two.id), (1, 2));
    for key in ["stream", "counts"] {
        redis.command(redis::cmd("DEL").arg(format!("{prefix}{{hooks}}:{key}")));
    }
    // New ids pass every id a replay holds (the held set), and what the pusher has seen.
    let Pushed::New(new) = b.push(None, 10, S(101)).unwrap() else {
        panic!("a new entry");
    };
    assert!(
        new > 2,
        "a new entry took the id {new} of an entry a replay holds"
    );
    let Take::Due(taken) = a.take(S(101)) else {
        panic!("the new entry is due");
    };
    assert_eq!((taken.id, taken.args), (new, 10));
    // The end of the old replays settles nothing new.
    a.settle(1, Settled::Replayed, S(102));
    b.settle(2, Settled::NotRun, S(102));
    let entries: Vec<(u64, u32)> = a.entries().iter().map(|e| (e.id, e.attempts)).collect();
    assert_eq!(entries, [(new, 0)], "the new entry stays, held by `a`");
    a.settle(new, Settled::Replayed, S(102));
    assert_eq!(a.status().entries, 0);
}

/// The bytes of the entries the journal lists, as it weighs them.
fn listed_bytes(j: &RedisJournal<u32>) -> usize {
    j.entries().iter().map(|e| e.bytes).sum()
}

#[test]
fn a_fleet_journal_whose_counts_were_lost_still_keeps_within_max_bytes() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("lost-bytes");
    // Each entry (a one-byte argument) weighs 33 bytes: room for ten.
    let config = ReplayConfig::new().max_bytes(330);
    let j = journal(&redis, &prefix, "a", &config);
    for n in 1..=5 {
        j.push(None, n, S(100)).unwrap();
    }
    assert_eq!(listed_bytes(&j), 165);
    redis.command(redis::cmd("DEL").arg(format!("{prefix}{{hooks}}:counts")));
    let mut taken = 0;
    for n in 6..=20 {
        match j.push(None, n, S(101)) {
            Ok(_) => taken += 1,
            Err(NotJournaled::Full) => {}
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(taken, 5, "room for five more, not for fifteen");
    assert_eq!(listed_bytes(&j), 330);
    assert_eq!(
        j.status().bytes,
        330,
        "the status weighs what the stream holds"
    );
    // Replaying them all leaves nothing weighed.
    while let Take::Due(t) = j.take(S(102)) {
        j.settle(t.id, Settled::Replayed, S(102));
    }
    assert_eq!((j.status().entries, j.status().bytes), (0, 0));
}

#[test]
fn a_fleet_journal_whose_keys_were_lost_still_journals_a_queued_key_once() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("lost-keys");
    let config = ReplayConfig::new();
    let j = journal(&redis, &prefix, "a", &config);
    assert_eq!(
        j.push(Some("order-1".into()), 1, S(100)).unwrap(),
        Pushed::New(1)
    );
    assert_eq!(
        j.push(Some("order-2".into()), 2, S(100)).unwrap(),
        Pushed::New(2)
    );
    // Redis loses the keys' hash (evicted, deleted): the stream still holds both entries.
    redis.command(redis::cmd("DEL").arg(format!("{prefix}{{hooks}}:keys")));
    assert_eq!(
        j.push(Some("order-1".into()), 3, S(101)).unwrap(),
        Pushed::Duplicate(1),
        "a queued key is journaled once"
    );
    // And with the counts lost as well.
    redis.command(redis::cmd("DEL").arg(format!("{prefix}{{hooks}}:keys")));
    redis.command(redis::cmd("DEL").arg(format!("{prefix}{{hooks}}:counts")));
    assert_eq!(
        j.push(Some("order-2".into()), 4, S(102)).unwrap(),
        Pushed::Duplicate(2)
    );
    // Replayed, the key is free again, and each entry's key goes with it.
    while let Take::Due(t) = j.take(S(103)) {
        j.settle(t.id, Settled::Replayed, S(103));
    }
    assert_eq!(j.status().entries, 0);
    assert!(matches!(
        j.push(Some("order-1".into()), 5, S(104)).unwrap(),
        Pushed::New(_)
    ));
    assert_eq!(
        redis.command(redis::cmd("HLEN").arg(format!("{prefix}{{hooks}}:keys"))),
        redis::Value::Int(1),
        "the keys' hash holds the one queued key"
    );
}

#[test]
fn a_full_fleet_journal_whose_stream_was_lost_takes_calls_again() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("lost-stream");
    let config = ReplayConfig::new().max_bytes(330);
    let j = journal(&redis, &prefix, "a", &config);
    for n in 1..=10 {
        j.push(None, n, S(100)).unwrap();
    }
    assert!(matches!(j.push(None, 11, S(100)), Err(NotJournaled::Full)));
    // Redis loses the stream (evicted, deleted): its entries, and the bytes they weighed.
    redis.command(redis::cmd("DEL").arg(format!("{prefix}{{hooks}}:stream")));
    for n in 12..=21 {
        j.push(None, n, S(101))
            .unwrap_or_else(|e| panic!("call {n} refused by an empty journal: {e:?}"));
    }
    assert_eq!(j.status().bytes, 330);
    assert!(matches!(j.push(None, 22, S(101)), Err(NotJournaled::Full)));
}

#[test]
fn an_entry_held_by_an_instance_that_died_after_the_held_set_was_lost_is_replayed_by_another() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("lost-held");
    let config = ReplayConfig::new().ttl(S(3600));
    let a = journal(&redis, &prefix, "a", &config);
    let b = journal(&redis, &prefix, "b", &config);
    a.push(None, 1, S(100)).unwrap();
    let Take::Due(held) = a.take(S(100)) else {
        panic!("the entry is due");
    };
    assert_eq!(held.id, 1);
    // Redis loses the held set (evicted, deleted), then `a` dies holding the entry.
    redis.command(redis::cmd("DEL").arg(format!("{prefix}{{hooks}}:held")));
    drop(a);
    // Seen by `b` as held from its next take on: taken over `claim_after` (30 s) later.
    assert!(!matches!(b.take(S(101)), Take::Due(_)), "held by `a`");
    assert!(!matches!(b.take(S(130)), Take::Due(_)), "held by `a`");
    let Take::Due(taken) = b.take(S(132)) else {
        panic!("the entry of the instance that died is never replayed");
    };
    assert_eq!((taken.id, taken.args), (1, 1));
    b.settle(taken.id, Settled::Replayed, S(132));
    assert_eq!(b.status().entries, 0);
}

#[test]
fn a_key_queued_by_any_instance_deduplicates_a_call_on_another() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("keys");
    let config = ReplayConfig::new();
    let a = journal(&redis, &prefix, "a", &config);
    let b = journal(&redis, &prefix, "b", &config);
    assert_eq!(
        a.push(Some("order-1".into()), 10, S(1)).unwrap(),
        Pushed::New(1)
    );
    assert_eq!(
        b.push(Some("order-1".into()), 11, S(2)).unwrap(),
        Pushed::Duplicate(1)
    );
    assert_eq!(
        b.push(Some("order-2".into()), 12, S(3)).unwrap(),
        Pushed::New(2)
    );
    let status = a.status();
    assert_eq!((status.entries, status.counts.deduplicated), (2, 1));
    let Take::Due(taken) = b.take(S(4)) else {
        panic!("due");
    };
    assert_eq!(
        (taken.id, taken.key.as_deref(), taken.args),
        (1, Some("order-1"), 10)
    );
    // Held by b, still queued: still a duplicate.
    assert_eq!(
        a.push(Some("order-1".into()), 13, S(5)).unwrap(),
        Pushed::Duplicate(1)
    );
    b.settle(1, Settled::Replayed, S(5));
    // Replayed: the key is free again.
    assert_eq!(
        a.push(Some("order-1".into()), 14, S(6)).unwrap(),
        Pushed::New(3)
    );
    let keys: Vec<Option<String>> = a.entries().into_iter().map(|e| e.key).collect();
    assert_eq!(
        keys,
        [Some("order-2".to_owned()), Some("order-1".to_owned())]
    );
}

#[test]
fn failed_replays_back_off_then_become_dead_letters_that_can_be_retried() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("dead");
    let config = ReplayConfig::new().attempts(2).backoff(S(10), S(60));
    let a = journal(&redis, &prefix, "a", &config);
    let b = journal(&redis, &prefix, "b", &config);
    a.push(Some("k".into()), 5, S(1)).unwrap();
    let Take::Due(taken) = a.take(S(2)) else {
        panic!()
    };
    a.settle(taken.id, Settled::Failed, S(2));
    // Backing off until 12 s, on any instance.
    assert!(matches!(b.take(S(5)), Take::Wait(at) if at <= S(12)));
    let Take::Due(again) = b.take(S(12)) else {
        panic!("due after the backoff")
    };
    assert_eq!((again.id, again.attempts), (taken.id, 1));
    b.settle(again.id, Settled::Failed, S(12));
    let status = a.status();
    assert_eq!((status.entries, status.dead_letters), (0, 1));
    assert_eq!((status.counts.failed, status.counts.dead_lettered), (2, 1));
    let dead = a.dead_letters();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].id, dead[0].attempts, dead[0].key.as_deref()),
        (1, 2, Some("k"))
    );
    assert_eq!(b.retry_dead_letters(S(20)), 1);
    let Take::Due(revived) = a.take(S(20)) else {
        panic!("revived")
    };
    assert_eq!((revived.args, revived.attempts), (5, 0));
    a.settle(revived.id, Settled::Failed, S(20));
    let Take::Due(last) = a.take(S(40)) else {
        panic!()
    };
    a.settle(last.id, Settled::Failed, S(40));
    assert_eq!(a.drop_dead_letters(), 1);
    assert_eq!(a.status().dead_letters, 0);
}

#[test]
fn a_full_fleet_journal_refuses_or_drops_the_oldest_and_counts_it() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let refuse = journal(
        &redis,
        &prefix("refuse"),
        "a",
        &ReplayConfig::new().max_entries(2),
    );
    refuse.push(None, 1, S(1)).unwrap();
    refuse.push(None, 2, S(1)).unwrap();
    assert!(matches!(
        refuse.push(None, 3, S(1)),
        Err(NotJournaled::Full)
    ));
    assert_eq!(refuse.status().counts.refused, 1);

    let config = ReplayConfig::new()
        .max_entries(2)
        .when_full(breakerbox_replay::WhenFull::DropOldest);
    let drop = journal(&redis, &prefix("drop"), "a", &config);
    for n in 1..=3 {
        drop.push(None, n, S(1)).unwrap();
    }
    let status = drop.status();
    assert_eq!((status.entries, status.counts.dropped), (2, 1));
    let ids: Vec<u64> = drop.entries().iter().map(|e| e.id).collect();
    assert_eq!(ids, [2, 3]);
}

#[tokio::test(flavor = "current_thread")]
async fn with_redis_down_calls_are_refused_with_the_reason_and_counted() {
    let Some(mut redis) = TestRedis::own() else {
        return;
    };
    let prefix = prefix("down");
    let breaker = breaker("pay");
    let replay = Replay::builder(&breaker)
        .redis(
            options(&redis, &prefix, "a").timeout(Duration::from_millis(200)),
            |_: u32| async { Ok::<_, String>(()) },
        )
        .unwrap();
    let journal = replay.journal_ref().clone();
    breaker.force_open();
    let Err(Error::Rejected(r)) = replay.call(1, |_| Ok::<_, String>(())) else {
        panic!()
    };
    assert!(r.journaled());
    assert_eq!(replay.status().entries, 1);
    redis.stop();

    let Err(Error::Rejected(r)) = replay.call(2, |_| Ok::<_, String>(())) else {
        panic!()
    };
    assert!(!r.journaled(), "not journaled with Redis down");
    let Err(NotJournaled::Store(why)) = journal.push(None, 3, S(1)) else {
        panic!("refused with the store's reason");
    };
    assert!(why.contains("replay journal `pay`"), "{why}");
    let status = replay.status();
    assert_eq!(status.counts.refused, 2, "both refusals counted");
    assert_eq!(status.entries, 1, "the last status read");
    assert!(journal.store_error().is_some_and(|e| e == why));

    // Opening against no server is an error naming the reason.
    let nothing = RedisOptions::new(format!("redis://127.0.0.1:{}/", free_port()));
    let Err(StartError::Store(why)) =
        Replay::builder(&breaker).redis(nothing, |_: u32| async { Ok::<_, String>(()) })
    else {
        panic!("opened with no Redis");
    };
    assert!(why.contains("Redis failed"), "{why}");
}

#[test]
fn a_redis_that_never_answers_fails_the_call_after_the_timeout() {
    // Accepts connections and never says a word.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}/", silent.local_addr().unwrap());
    let options = RedisOptions::new(url).timeout(Duration::from_millis(100));
    let Err(breakerbox_replay::RedisJournalError::Store(why)) =
        RedisJournal::<u32>::open("slow", options, &ReplayConfig::new())
    else {
        panic!("opened against a silent server");
    };
    assert!(why.contains("did not answer within 100ms"), "{why}");
}

#[test]
fn a_foreign_value_under_the_stream_key_fails_that_journal_only() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("foreign");
    let config = ReplayConfig::new();
    let hooks = journal(&redis, &prefix, "a", &config);
    let other: RedisJournal<u32> =
        RedisJournal::open("other", options(&redis, &prefix, "a"), &config).unwrap();
    hooks.push(None, 1, S(1)).unwrap();
    redis.command(redis::cmd("DEL").arg(hooks.stream_key()));
    redis.command(
        redis::cmd("SET")
            .arg(hooks.stream_key())
            .arg("not a stream"),
    );

    let Err(NotJournaled::Store(why)) = hooks.push(None, 2, S(2)) else {
        panic!("journaled under a foreign value");
    };
    assert!(
        why.contains("WRONGTYPE") && why.contains(hooks.stream_key()),
        "{why}"
    );
    assert!(
        matches!(hooks.take(S(3)), Take::Wait(_)),
        "no entry, no panic"
    );
    assert_eq!(
        other.push(None, 3, S(2)).unwrap(),
        Pushed::New(1),
        "the other journal works"
    );
    // Not taken for the store down: the next call tries again, and fails the same way.
    assert!(matches!(hooks.push(None, 4, S(4)), Err(NotJournaled::Store(w)) if w == why));
    let Err(breakerbox_replay::RedisJournalError::Store(why)) =
        RedisJournal::<u32>::open("hooks", options(&redis, &prefix, "b"), &config)
    else {
        panic!("opened over a foreign value");
    };
    assert!(why.contains("WRONGTYPE"), "{why}");
}

/// xorshift64*: the model's dice, the same for a seed everywhere.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The model's view of one queued entry.
#[derive(Debug)]
struct Modeled {
    key: Option<String>,
    attempts: u32,
    next_try: Duration,
    /// (instance, taken at)
    held: Option<(usize, Duration)>,
}

/// Three instances take, settle, fail, crash and come back on one stream, on a clock the test
/// moves, in an order a seed picks. After every step the store must agree with a model of the
/// protocol: an entry is held by at most one instance, it is taken from another only once
/// held `claim_after`, an entry is due to someone whenever the model says one is, the counts
/// add up; and at the end, every entry journaled was replayed exactly once or dead-lettered.
#[test]
fn the_claim_and_ack_protocol_keeps_its_invariants_under_seeded_schedules() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    const CLAIM: Duration = Duration::from_secs(30);
    let config = ReplayConfig::new()
        .attempts(3)
        .backoff(S(2), S(8))
        .ttl(S(1_000_000));
    let seeds: u64 = std::env::var("BREAKERBOX_REPLAY_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let mut total_lost = 0;
    for seed in 1..=seeds {
        let prefix = prefix(&format!("model{seed}"));
        let mut dice = Dice(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut generation = 0;
        let open = |i: usize, generation: &mut u32| -> RedisJournal<u32> {
            *generation += 1;
            let options =
                options(&redis, &prefix, &format!("i{i}-{generation}")).claim_after(CLAIM);
            RedisJournal::open("model", options, &config).unwrap()
        };
        let mut instances: Vec<RedisJournal<u32>> =
            (0..3).map(|i| open(i, &mut generation)).collect();
        // What each instance holds (the replayer holds one at a time).
        let mut holding: Vec<Option<u64>> = vec![None; 3];
        let mut model: BTreeMap<u64, Modeled> = BTreeMap::new();
        let mut args: HashMap<u64, u32> = HashMap::new();
        let mut replayed: HashMap<u64, u32> = HashMap::new();
        let mut dead: BTreeSet<u64> = BTreeSet::new();
        let mut next_id = 1;
        let mut now = S(1000);
        let mut failed = 0;
        let mut lost = 0;
        let trace = |step: usize, what: &str| format!("seed {seed} step {step}: {what}");

        for step in 0..150 {
            let i = dice.below(3) as usize;
            match dice.below(10) {
                0..=2 => {
                    let key = (dice.below(2) == 0).then(|| format!("k{}", dice.below(6)));
                    let arg = dice.below(1000) as u32;
                    let pushed = instances[i].push(key.clone(), arg, now).unwrap();
                    let queued = key
                        .as_ref()
                        .and_then(|k| model.iter().find(|(_, e)| e.key.as_ref() == Some(k)));
                    match queued {
                        Some((&id, _)) => {
                            assert_eq!(pushed, Pushed::Duplicate(id), "{}", trace(step, "dup"))
                        }
                        None => {
                            assert_eq!(pushed, Pushed::New(next_id), "{}", trace(step, "push"));
                            model.insert(
                                next_id,
                                Modeled {
                                    key,
                                    attempts: 0,
                                    next_try: now,
                                    held: None,
                                },
                            );
                            args.insert(next_id, arg);
                            next_id += 1;
                        }
                    }
                }
                3..=5 if holding[i].is_none() => {
                    // Every take first sends entries held `claim_after` back to the queue.
                    for e in model.values_mut() {
                        if e.held.is_some_and(|(_, at)| at + CLAIM <= now) {
                            e.held = None;
                        }
                    }
                    let available: Vec<u64> = model
                        .iter()
                        .filter(|(_, e)| e.next_try <= now && e.held.is_none())
                        .map(|(id, _)| *id)
                        .collect();
                    match instances[i].take(now) {
                        Take::Due(taken) => {
                            assert!(
                                available.contains(&taken.id),
                                "{}",
                                trace(
                                    step,
                                    &format!(
                                        "took {}, held or not due: {:?}",
                                        taken.id,
                                        model.get(&taken.id)
                                    )
                                )
                            );
                            let e = model.get_mut(&taken.id).unwrap();
                            assert_eq!(taken.args, args[&taken.id]);
                            assert_eq!(taken.attempts, e.attempts);
                            e.held = Some((i, now));
                            holding[i] = Some(taken.id);
                        }
                        Take::Wait(_) | Take::Empty => assert!(
                            available.is_empty(),
                            "{}",
                            trace(step, &format!("nothing due, but {available:?} are"))
                        ),
                    }
                }
                6..=7 => {
                    let Some(id) = holding[i].take() else {
                        continue;
                    };
                    let how = match dice.below(3) {
                        0 => Settled::Replayed,
                        1 => Settled::Failed,
                        _ => Settled::NotRun,
                    };
                    instances[i].settle(id, how, now);
                    // Held by another now, or back in the queue: the store ignores this end.
                    let Some(e) = model
                        .get_mut(&id)
                        .filter(|e| e.held.is_some_and(|(h, _)| h == i))
                    else {
                        lost += 1;
                        continue;
                    };
                    e.held = None;
                    match how {
                        Settled::Replayed => {
                            model.remove(&id);
                            *replayed.entry(id).or_default() += 1;
                        }
                        Settled::Failed => {
                            failed += 1;
                            e.attempts += 1;
                            if e.attempts >= 3 {
                                model.remove(&id);
                                dead.insert(id);
                            } else {
                                e.next_try = now + S(2 << (e.attempts - 1)).min(S(8));
                            }
                        }
                        _ => {}
                    }
                }
                8 => {
                    // The instance dies, holding what it holds, and comes back as a new consumer.
                    holding[i] = None;
                    instances[i] = open(i, &mut generation);
                }
                _ => now += Duration::from_millis(dice.below(20_000)),
            }
            let status = instances[0].status();
            let counts = status.counts;
            assert_eq!(status.entries, model.len(), "{}", trace(step, "entries"));
            assert_eq!(status.dead_letters, dead.len(), "{}", trace(step, "dead"));
            assert_eq!(counts.queued, next_id - 1, "{}", trace(step, "queued"));
            assert_eq!(
                counts.replayed,
                replayed.len() as u64,
                "{}",
                trace(step, "replayed")
            );
            assert_eq!(counts.failed, failed, "{}", trace(step, "failed"));
        }
        // Drain: time passes, the survivors replay everything left.
        now += CLAIM + S(60);
        loop {
            let mut progress = false;
            for j in &instances {
                if let Take::Due(taken) = j.take(now) {
                    j.settle(taken.id, Settled::Replayed, now);
                    *replayed.entry(taken.id).or_default() += 1;
                    model.remove(&taken.id);
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        assert!(model.is_empty(), "seed {seed}: left {model:?}");
        for id in 1..next_id {
            let times = replayed.get(&id).copied().unwrap_or(0);
            let buried = dead.contains(&id);
            assert!(
                (times == 1 && !buried) || (times == 0 && buried),
                "seed {seed}: entry {id} replayed {times} times, dead: {buried}"
            );
        }
        assert_eq!(instances[1].status().entries, 0);
        total_lost += lost;
    }
    assert!(
        total_lost > 0,
        "no seed had a replay end after its entry was taken over"
    );
}

#[test]
fn an_url_fleet_mode_does_not_take_is_an_error_naming_its_scheme() {
    for (url, says) in [
        ("http://127.0.0.1:6379/", "unknown scheme `http`"),
        ("127.0.0.1:6379", "want redis://, rediss://"),
        ("redis+sentinel://127.0.0.1:26379", "no master name"),
        ("redis+cluster://", "no host"),
    ] {
        let Err(breakerbox_replay::RedisJournalError::Url(why)) =
            RedisJournal::<u32>::open("urls", RedisOptions::new(url), &ReplayConfig::new())
        else {
            panic!("{url} opened");
        };
        assert!(why.contains(says), "{url}: {why}");
    }
    // The password is not shown.
    let Err(breakerbox_replay::RedisJournalError::Url(why)) = RedisJournal::<u32>::open(
        "urls",
        RedisOptions::new("ftp://user:s3cret@h:1/"),
        &ReplayConfig::new(),
    ) else {
        panic!("ftp opened");
    };
    assert!(
        why.contains("user:***@h:1") && !why.contains("s3cret"),
        "{why}"
    );
}

/// The least-privilege rule of docs/replay.md for a journal under `prefix`: its keys, and the
/// commands its script runs.
fn journal_rule(prefix: &str) -> Vec<String> {
    let rule = "-@all +hello +auth +ping +evalsha +script|load +type +xgroup|create +xadd +xack \
        +xclaim +xdel +xlen +xpending +xrange +xreadgroup +zadd +zrangebyscore +zrem +zscore \
        +hdel +hget +hincrby +hset +del +xinfo|stream +time +zrange";
    let mut args = vec!["resetkeys".to_owned(), format!("~{prefix}*")];
    args.extend(rule.split_whitespace().map(str::to_owned));
    args
}

/// Every bulk string in a reply, as text.
fn texts(value: &redis::Value, out: &mut Vec<String>) {
    match value {
        redis::Value::BulkString(b) => out.push(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => out.push(s.clone()),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            items.iter().for_each(|v| texts(v, out))
        }
        redis::Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            texts(k, out);
            texts(v, out);
        }),
        _ => {}
    }
}

#[test]
fn an_acl_user_under_the_documented_rule_runs_every_operation_and_a_wrong_password_is_the_error() {
    let Some(redis) = TestRedis::get() else {
        return;
    };
    let prefix = prefix("acl");
    let user = format!("bbjournal{}", std::process::id());
    let mut setuser = redis::cmd("ACL");
    setuser
        .arg("SETUSER")
        .arg(&user)
        .arg("reset")
        .arg("on")
        .arg(">pa ss");
    setuser.arg(journal_rule(&prefix));
    redis.command(&setuser);
    let at = redis.url.trim_start_matches("redis://");
    let with = |password: &str| {
        RedisOptions::new(format!("redis://{user}:{password}@{at}"))
            .timeout(Duration::from_secs(5))
            .prefix(&prefix)
    };
    let config = ReplayConfig::new().attempts(2).backoff(S(1), S(1));
    // The password percent-encoded in the URL.
    let journal: RedisJournal<u32> = RedisJournal::open("acl", with("pa%20ss"), &config).unwrap();
    let due = |at: u64| match journal.take(S(at)) {
        Take::Due(taken) => taken.id,
        other => panic!("nothing due at {at}: {other:?}"),
    };
    // Every path of the script: a first take, a failure and its backoff, a take from the
    // queue, a replay that did not run, a dead letter, its retry, a replay, a drop.
    assert_eq!(journal.push(None, 1, S(1)).unwrap(), Pushed::New(1));
    journal.settle(due(2), Settled::Failed, S(2));
    journal.settle(due(4), Settled::NotRun, S(4));
    journal.settle(due(5), Settled::Failed, S(5));
    assert_eq!(journal.dead_letters().len(), 1);
    assert_eq!(journal.retry_dead_letters(S(6)), 1);
    assert_eq!(journal.entries().len(), 1);
    journal.settle(due(7), Settled::Replayed, S(7));
    journal.push(Some("k".to_owned()), 2, S(8)).unwrap();
    journal.settle(due(8), Settled::Failed, S(8));
    journal.settle(due(10), Settled::Failed, S(10));
    assert_eq!(journal.drop_dead_letters(), 1);
    let status = journal.status();
    assert_eq!((status.entries, status.dead_letters), (0, 0));
    assert_eq!(
        (
            status.counts.queued,
            status.counts.replayed,
            status.counts.failed
        ),
        (2, 1, 4)
    );
    assert_eq!(journal.store_error(), None, "no operation was refused");
    let mut log = Vec::new();
    texts(&redis.command(redis::cmd("ACL").arg("LOG")), &mut log);
    assert!(!log.contains(&user), "the ACL log names the user: {log:?}");

    let wrong = RedisJournal::<u32>::open("acl", with("wrong"), &config);
    redis.command(redis::cmd("ACL").arg("DELUSER").arg(&user));
    let Err(breakerbox_replay::RedisJournalError::Store(why)) = wrong else {
        panic!("opened with a wrong password");
    };
    assert!(
        why.contains("WRONGPASS") || why.contains("invalid username-password"),
        "{why}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_hung_redis_delays_replays_never_the_runtimes_other_tasks() {
    let Some(redis) = TestRedis::own() else {
        return;
    };
    let pid = redis.child.as_ref().unwrap().id();
    let prefix = prefix("hung");
    let breaker = breaker("hung");
    let timeout = Duration::from_secs(1);
    let options = options(&redis, &prefix, "a").timeout(timeout);
    let _replay = replayer(&breaker, options, "a", &Seen::default());
    // Redis hangs while the breaker is closed and nothing is journaled: the replayer keeps
    // asking it for entries.
    let stop = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stop.success());
    // A task of the application's, on the same (one) thread: 100 ticks of 10 ms.
    let mut late = Duration::ZERO;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    for _ in 0..100 {
        let before = std::time::Instant::now();
        tick.tick().await;
        late = late.max(before.elapsed());
    }
    let cont = Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(cont.success());
    assert!(
        late < timeout / 2,
        "a 10 ms tick waited {late:?} behind the journal"
    );
}

/// Stops (`SIGSTOP`) or continues (`SIGCONT`) the test's own server, and waits (at most 5 s)
/// until it has (a signal is delivered after `kill` returns).
fn signal(redis: &TestRedis, signal: &str) {
    let pid = redis.child.as_ref().unwrap().id();
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {signal} {pid}");
    let stopped = signal == "-STOP";
    for _ in 0..500 {
        // `/proc/<pid>/stat`: `pid (name) state …`, the state `T` when stopped.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next());
        if (state == Some("T")) == stopped {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("redis-server {pid} did not take {signal}");
}

/// A task of the application's on the runtime's one thread: every 10 ms, a call through a
/// closed breaker's replay, until `stop`. The longest gap between two ticks, and the longest
/// call.
fn application(
    closed: Replay<u32>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(Duration, Duration)> {
    tokio::spawn(async move {
        let (mut gap, mut call) = (Duration::ZERO, Duration::ZERO);
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        let mut n = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let before = std::time::Instant::now();
            tick.tick().await;
            gap = gap.max(before.elapsed());
            let started = std::time::Instant::now();
            let answer = closed
                .call_async(n, |n| async move { Ok::<_, String>(n) })
                .await;
            assert_eq!(answer.ok(), Some(n), "a closed breaker's call ran");
            assert_eq!(closed.call(n, Ok::<_, String>).ok(), Some(n));
            call = call.max(started.elapsed());
            n += 1;
        }
        (gap, call)
    })
}

/// Waits (real time, at most 10 s) until the journal's Redis answers again.
async fn until_answering(replay: &Replay<u32>) -> breakerbox_replay::JournalStatus {
    for _ in 0..200 {
        if let Ok(status) = replay.try_status() {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the journal's Redis did not answer again");
}

#[tokio::test(flavor = "current_thread")]
async fn with_a_hung_redis_rejected_calls_are_refused_in_bounded_time_and_never_journaled_later() {
    let Some(redis) = TestRedis::own() else {
        return;
    };
    let prefix = prefix("hung-calls");
    let timeout = Duration::from_secs(1);
    let open = breaker("hung-open");
    let replay = replayer(
        &open,
        options(&redis, &prefix, "a").timeout(timeout),
        "a",
        &Seen::default(),
    );
    let closed = breaker("hung-closed");
    let closed_replay = replayer(
        &closed,
        options(&redis, &prefix, "b").timeout(timeout),
        "b",
        &Seen::default(),
    );
    open.force_open();
    let Err(Error::Rejected(r)) = replay
        .call_async(0, |_| async { Ok::<_, String>(()) })
        .await
    else {
        panic!("ran while forced open")
    };
    assert!(r.journaled(), "journaled while Redis answers");

    signal(&redis, "-STOP");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let app = application(closed_replay.clone(), stop.clone());
    // Three calls rejected while Redis hangs: the first waits for the journal's timeout, the
    // next are refused at once (Redis is known not to answer).
    let mut waits = Vec::new();
    for n in 1..=3 {
        let started = std::time::Instant::now();
        let answer = replay
            .call_async(n, |_| async { Ok::<_, String>(()) })
            .await;
        waits.push(started.elapsed());
        let Err(Error::Rejected(r)) = answer else {
            panic!("ran while forced open")
        };
        assert!(!r.journaled(), "call {n} told journaled with Redis stopped");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (gap, call) = app.await.unwrap();
    signal(&redis, "-CONT");

    assert!(
        waits[0] < timeout + SLACK,
        "the first refusal took {:?}",
        waits[0]
    );
    assert!(
        waits[1..].iter().all(|w| *w < timeout / 2),
        "refusals while Redis is known not to answer waited: {waits:?}"
    );
    assert!(
        gap < timeout / 2,
        "the application's 10 ms tick waited {gap:?} behind the journal"
    );
    assert!(call < timeout / 2, "a closed breaker's call took {call:?}");
    // Redis runs the first refused push once it continues: too late, it journals nothing.
    let status = until_answering(&replay).await;
    assert_eq!(
        status.entries, 1,
        "only the call told journaled is queued: {status:?}"
    );
    assert_eq!(status.counts.queued, 1);
    assert_eq!(status.counts.refused, 3, "the three refusals counted");
    let ids: Vec<u64> = replay.entries().iter().map(|e| e.id).collect();
    assert_eq!(ids, [1]);
}

/// The scheduling a thread may take on a loaded machine, beyond a wait's bound. (What waits
/// on a hung Redis when it should not waits a whole timeout or more, so the tests here bound
/// such waits by half the timeout; their timeouts are a second, so that half of one is room
/// for a loaded machine.)
const SLACK: Duration = Duration::from_millis(400);

#[tokio::test(flavor = "current_thread")]
async fn a_sync_call_and_status_made_as_redis_stops_answering_wait_at_most_one_timeout() {
    let Some(redis) = TestRedis::own() else {
        return;
    };
    let prefix = prefix("hung-sync");
    let timeout = Duration::from_secs(1);
    let open = breaker("hung-sync");
    let replay = replayer(
        &open,
        options(&redis, &prefix, "a").timeout(timeout),
        "a",
        &Seen::default(),
    );
    let other = breaker("hung-sync");
    let watched = replayer(
        &other,
        options(&redis, &prefix, "b").timeout(timeout),
        "b",
        &Seen::default(),
    );
    // Both replayers idle (their breakers open); each journal has talked to Redis.
    open.force_open();
    other.force_open();
    let Err(Error::Rejected(r)) = replay.call(0, |_| Ok::<_, String>(())) else {
        panic!("ran while forced open")
    };
    assert!(r.journaled(), "journaled while Redis answers");
    assert_eq!(watched.status().entries, 1);

    signal(&redis, "-STOP");
    // On the runtime's one thread, which nothing else uses meanwhile: each journal's first
    // operation after Redis stopped.
    let started = std::time::Instant::now();
    let answer = replay.call(1, |_| Ok::<_, String>(()));
    let call = started.elapsed();
    let started = std::time::Instant::now();
    let status = watched.status();
    let status_wait = started.elapsed();
    signal(&redis, "-CONT");

    let Err(Error::Rejected(r)) = answer else {
        panic!("ran while forced open")
    };
    assert!(!r.journaled(), "told journaled with Redis stopped");
    assert_eq!(status.entries, 1, "the last status read: {status:?}");
    for (what, waited) in [("call", call), ("status", status_wait)] {
        assert!(
            waited >= timeout * 3 / 4 && waited < timeout + SLACK,
            "the {what} waited {waited:?}, the timeout being {timeout:?}"
        );
    }
    // Redis runs the refused push once it continues: too late, it journals nothing.
    let status = until_answering(&replay).await;
    assert_eq!(status.entries, 1, "{status:?}");
    assert_eq!(status.counts.refused, 1, "{status:?}");
}

#[tokio::test(flavor = "current_thread")]
async fn with_a_hung_redis_status_and_dead_letter_operations_fail_in_bounded_time() {
    let Some(redis) = TestRedis::own() else {
        return;
    };
    let prefix = prefix("hung-admin");
    let timeout = Duration::from_secs(1);
    let open = breaker("hung-admin");
    let replay = replayer(
        &open,
        options(&redis, &prefix, "a").timeout(timeout),
        "a",
        &Seen::default(),
    );
    let handle = replay.handle();
    let closed = breaker("hung-admin-closed");
    let closed_replay = replayer(
        &closed,
        options(&redis, &prefix, "b").timeout(timeout),
        "b",
        &Seen::default(),
    );
    open.force_open();
    let Err(Error::Rejected(r)) = replay.call(7, |_| Ok::<_, String>(())) else {
        panic!("ran while forced open")
    };
    assert!(r.journaled());
    assert_eq!(handle.status_async().await.unwrap().entries, 1);
    assert_eq!(handle.dead_letters_async().await.unwrap(), []);

    signal(&redis, "-STOP");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let app = application(closed_replay.clone(), stop.clone());
    let bound = timeout + SLACK;
    let started = std::time::Instant::now();
    let status = handle.status_async().await;
    let first = started.elapsed();
    let why = status.expect_err("a status with Redis stopped");
    assert!(
        why.to_string().contains("replay journal `hung-admin`"),
        "{why}"
    );
    // Every operation after it fails at once, with the reason, until Redis answers again.
    tokio::time::sleep(timeout).await;
    let started = std::time::Instant::now();
    let dead = handle.dead_letters_async().await;
    let retried = handle.retry_dead_letters_async().await;
    let dropped = handle.drop_dead_letters_async().await;
    let try_status = replay.try_status();
    let last = replay.status();
    let rest = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (gap, call) = app.await.unwrap();
    signal(&redis, "-CONT");

    assert!(first < bound, "the status took {first:?}");
    assert!(rest < timeout / 2, "the rest took {rest:?}");
    for failed in [
        dead.map(drop).unwrap_err(),
        retried.map(drop).unwrap_err(),
        dropped.map(drop).unwrap_err(),
        try_status.map(drop).unwrap_err(),
    ] {
        assert_eq!(failed, why, "the same reason");
    }
    assert_eq!(last.entries, 1, "status() is the last status read");
    assert_eq!(handle.store_error(), Some(why.to_string()));
    assert!(
        gap < timeout / 2,
        "the application's 10 ms tick waited {gap:?} behind the journal"
    );
    assert!(call < timeout / 2, "a closed breaker's call took {call:?}");
    assert_eq!(until_answering(&replay).await.entries, 1);
    assert_eq!(handle.dead_letters_async().await.unwrap(), []);
}
