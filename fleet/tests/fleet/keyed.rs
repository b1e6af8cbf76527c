//! A keyed family shared by the fleet (`share = ["hosts"]`): each key's trips and per-key
//! controls reach every instance, a key an instance makes later takes the fleet's state
//! before its first call, key records expire, and an idle instance sends nothing per key.

use std::time::{Duration, Instant};

use crate::servers::poll;
use crate::support::{Redis, keyed_nodes, keyed_nodes_with, redis_server, shared_redis, soon};

/// The record of the `hosts` key `key` under `prefix`.
fn record(prefix: &str, key: &str) -> String {
    format!("{{{prefix}/5:hosts}}:{}:{key}", key.len())
}

/// The family's open keys under `prefix`.
fn open_keys(prefix: &str) -> String {
    format!("{{{prefix}/5:hosts}}:open")
}

/// The keys of keyed families under `prefix` in the store.
fn family_keys(redis: &Redis, prefix: &str) -> Vec<String> {
    let pattern = format!("{{{prefix}/*");
    redis
        .cli(&["--scan", "--pattern", &pattern])
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_key_tripped_on_one_instance_rejects_on_the_others_and_a_reset_by_hand_closes_it_everywhere() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("keyed") else {
        return;
    };
    let mut nodes = keyed_nodes(&redis.url(), "keyed", 3, "");
    // node-1 holds the key already; node-2 has never called it.
    assert_eq!(nodes[1].cmd("ksucceed a.example"), "ok closed");
    assert_eq!(nodes[0].cmd("kfail a.example"), "ok open");
    nodes[1].wait_key("a.example", "open", soon()).unwrap();
    let key = record("keyed", "a.example");
    assert_eq!(redis.hget(&key, "state"), "open");
    assert_eq!(redis.hget(&key, "origin"), "node-0");
    assert_eq!(redis.hget(&key, "last_failure"), "HTTP 503");
    assert_eq!(
        redis.cli(&["ZRANGE", &open_keys("keyed"), "0", "-1"]),
        "a.example"
    );
    // Open a minute, then the probe timeout (a minute), then `key_ttl` (30 s) at most.
    let pttl: i64 = redis.cli(&["PTTL", &key]).parse().unwrap();
    assert!((119_000..=150_000).contains(&pttl), "{pttl} ms");
    // node-1 says who tripped it and why, in its event and its last failure. The event line is
    // printed after the key's state changed: waited for.
    poll("node-1's open event", Duration::from_secs(5), || {
        nodes[1].key_events().last().is_some_and(|e| e.to == "open")
    });
    let last = nodes[1].key_events().last().cloned().unwrap();
    assert_eq!(
        (last.key.as_str(), last.to.as_str(), last.reason.as_str()),
        ("a.example", "open", "imported")
    );
    assert_eq!(last.failure, "node-0: HTTP 503");
    assert_eq!(nodes[1].cmd("klast a.example"), "last node-0: HTTP 503");
    // node-2's first call of the key is rejected: the key took the fleet's state when made.
    assert_eq!(nodes[2].cmd("resync"), "resync true");
    assert_eq!(nodes[2].key_state("a.example"), "none");
    assert_eq!(nodes[2].cmd("ksucceed a.example"), "rejected open");
    assert_eq!(nodes[2].cmd("klast a.example"), "last node-0: HTTP 503");

    // A reset by hand (the registry's per-key control, as the admin's) on node-2 closes it
    // on every instance, and says who did it.
    assert_eq!(nodes[2].cmd("kreset a.example"), "ok");
    for node in nodes.iter_mut() {
        node.wait_key("a.example", "closed", soon()).unwrap();
    }
    assert_eq!(redis.hget(&key, "state"), "closed");
    assert_eq!(redis.hget(&key, "origin"), "node-2");
    assert_eq!(redis.hget(&key, "reason"), "reset");
    poll("node-0's closed event", Duration::from_secs(5), || {
        nodes[0]
            .key_events()
            .last()
            .is_some_and(|e| e.to == "closed")
    });
    let last = nodes[0].key_events().last().cloned().unwrap();
    assert_eq!(
        (last.to.as_str(), last.reason.as_str()),
        ("closed", "imported")
    );
    let explained = nodes[0].cmd("kexplain a.example");
    assert!(
        explained.contains("node-2 changed it (reset)"),
        "{explained}"
    );
    // The closed record expires within `key_ttl`; the family lists no open key.
    let pttl: i64 = redis.cli(&["PTTL", &key]).parse().unwrap();
    assert!((1..=30_000).contains(&pttl), "{pttl} ms");
    assert_eq!(redis.cli(&["EXISTS", &open_keys("keyed")]), "0");
    // Every instance that called it wrote once: node-0 the trip, node-2 the reset. node-2
    // counts its write when the answer comes back, after the others took the reset on.
    poll("node-2's write counted", Duration::from_secs(5), || {
        nodes[2].status().1 >= 1
    });
    let pushed: Vec<u64> = nodes.iter_mut().map(|n| n.status().1).collect();
    assert_eq!(pushed, [1, 0, 1], "one write per change, no echo");
}

#[test]
fn per_key_force_open_disable_and_trip_for_reach_every_instance() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("keyedhand") else {
        return;
    };
    let mut nodes = keyed_nodes(&redis.url(), "keyedhand", 2, "");
    for node in nodes.iter_mut() {
        assert_eq!(node.cmd("ksucceed b.example"), "ok closed");
    }
    let key = record("keyedhand", "b.example");
    assert_eq!(nodes[0].cmd("kforce b.example"), "ok");
    nodes[1]
        .wait_key("b.example", "forced-open", soon())
        .unwrap();
    // Forced open, the key keeps its record until a reset.
    assert_eq!(redis.cli(&["PTTL", &key]), "-1");
    assert_eq!(nodes[1].cmd("kdisable b.example"), "ok");
    nodes[0].wait_key("b.example", "disabled", soon()).unwrap();
    assert_eq!(redis.cli(&["PTTL", &key]), "-1");
    assert_eq!(nodes[0].cmd("ktrip b.example 5000"), "ok");
    nodes[1].wait_key("b.example", "open", soon()).unwrap();
    let pttl: i64 = redis.cli(&["PTTL", &key]).parse().unwrap();
    assert!((60_000..=95_000).contains(&pttl), "{pttl} ms");
    assert_eq!(nodes[1].cmd("kreset b.example"), "ok");
    nodes[0].wait_key("b.example", "closed", soon()).unwrap();
}

#[test]
fn keys_that_tripped_and_closed_leave_no_record_behind() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("keyedttl") else {
        return;
    };
    let mut nodes = keyed_nodes(
        &redis.url(),
        "keyedttl",
        2,
        "key_ttl = \"300ms\"\nresync_every = \"100ms\"\n",
    );
    assert!(family_keys(&redis, "keyedttl").is_empty());
    assert_eq!(nodes[0].cmd("kmany 50 fail"), "ok 50");
    let deadline = soon();
    while redis.cli(&["ZCARD", &open_keys("keyedttl")]) != "50" {
        assert!(
            Instant::now() < deadline,
            "the open keys are not all listed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Open a minute, then the probe timeout: the open records outlive both, by `key_ttl`. (The
    // TTL runs down from k7's write, some 40 writes before the last: 10 s allowed for them.)
    let pttl: i64 = redis
        .cli(&["PTTL", &record("keyedttl", "k7")])
        .parse()
        .unwrap();
    assert!((110_000..=120_300).contains(&pttl), "{pttl} ms");
    nodes[1].wait_key("k7", "none", soon()).unwrap();
    reset_all(&mut nodes[0], 50);
    // Each closed record expires `key_ttl` after its reset, on Redis's own clock; the list of
    // open keys empties, so the store holds nothing of the family.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = family_keys(&redis, "keyedttl");
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A key made after its record expired starts closed, and trips and writes again.
    assert_eq!(nodes[1].cmd("ksucceed k7"), "ok closed");
    assert_eq!(nodes[0].cmd("kfail k7"), "ok open");
    nodes[1].wait_key("k7", "open", soon()).unwrap();
}

/// Resets the keys `k0` to `k<n-1>` by hand and waits until none is open. A trip's write that
/// lands as the reset is made may hold a key open a moment longer, until the reset is written
/// and the key takes the written record on.
fn reset_all(node: &mut crate::support::Node, n: usize) {
    assert!(node.cmd(&format!("kmany {n} reset")).starts_with("ok "));
    let deadline = soon();
    loop {
        let open = (0..n)
            .filter(|i| node.key_state(&format!("k{i}")) == "open")
            .count();
        if open == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{open} keys still open");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The commands Redis counts (`INFO commandstats`), but the `INFO` and `CONFIG RESETSTAT`
/// that read them; and of them, the `HMGET`s (a record's read).
fn commands(redis: &Redis) -> (u64, u64) {
    let stats = redis.cli(&["INFO", "commandstats"]);
    let calls = |l: &str| {
        l.split("calls=")
            .nth(1)?
            .split(',')
            .next()?
            .parse::<u64>()
            .ok()
    };
    let all = stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_"))
        .filter(|l| !l.starts_with("cmdstat_info:") && !l.starts_with("cmdstat_config|"))
        .filter_map(calls)
        .sum();
    let hmget = stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_hmget:"))
        .filter_map(calls)
        .sum();
    (all, hmget)
}

#[test]
fn an_idle_instance_holding_a_thousand_keys_sends_no_command_per_key() {
    let _shared = crate::support::shared();
    let Some(bin) = redis_server() else { return };
    // Its own server: commandstats count every client's commands.
    let redis = Redis::start(&bin, &[]);
    let fleet = "key_ttl = \"200ms\"\nresync_every = \"200ms\"\n";
    let mut nodes = keyed_nodes(&redis.url(), "idlekeys", 1, fleet);
    // A thousand keys that tripped and were reset (tracked, closed), then called again.
    assert_eq!(nodes[0].cmd("kmany 1000 fail"), "ok 1000");
    reset_all(&mut nodes[0], 1000);
    assert_eq!(nodes[0].cmd("kmany 1000 succeed"), "ok 0");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !family_keys(&redis, "idlekeys").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the closed records did not expire"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The passes counted from before the reset of the counts to after their reading: every
    // command counted is of one of them, or of the one in flight when the counts are read.
    let passes = |node: &mut crate::support::Node| node.status().4;
    let from = passes(&mut nodes[0]);
    assert_eq!(redis.cli(&["CONFIG", "RESETSTAT"]), "OK");
    poll("5 passes", Duration::from_secs(10), || {
        passes(&mut nodes[0]) >= from + 5
    });
    let (all, hmget) = commands(&redis);
    let counted = passes(&mut nodes[0]) - from + 1;
    // Each pass: `TIME` and the `HMGET` of `payments`, then `TIME` and the family's open
    // keys (`ZRANGE`): 4 commands.
    assert!(all <= counted * 4, "{all} commands in {counted} passes");
    assert!(hmget <= counted, "{hmget} records read in {counted} passes");
}

#[test]
fn under_a_quorum_a_key_opens_the_fleet_once_enough_instances_have_it_open() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("keyedq") else {
        return;
    };
    let fleet = "fleet_trip = \"quorum\"\nquorum = 2\n";
    let mut nodes = keyed_nodes(&redis.url(), "keyedq", 3, fleet);
    for node in nodes.iter_mut() {
        assert_eq!(node.cmd("ksucceed q.example"), "ok closed");
        assert_eq!(node.cmd("ksucceed other.example"), "ok closed");
    }
    let key = record("keyedq", "q.example");
    let reports = format!("{key}:opens");
    // One instance's trip is its own: reported, the fleet's record not opened.
    assert_eq!(nodes[0].cmd("kfail q.example"), "ok open");
    let deadline = soon();
    while redis.cli(&["ZCARD", &reports]) != "1" {
        assert!(Instant::now() < deadline, "no report of node-0's trip");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_ne!(redis.hget(&key, "state"), "open");
    assert_eq!(nodes[1].key_state("q.example"), "closed");
    assert_eq!(nodes[2].key_state("q.example"), "closed");
    // Another key of the family counts apart: node-1's trip of it reports that key only.
    assert_eq!(nodes[1].cmd("kfail other.example"), "ok open");
    // The second instance open on this key makes the quorum: every instance opens it, and
    // its record expires as any key's.
    assert_eq!(nodes[1].cmd("kfail q.example"), "ok open");
    nodes[2].wait_key("q.example", "open", soon()).unwrap();
    assert_eq!(redis.hget(&key, "state"), "open");
    assert!(
        redis
            .hget(&key, "reason")
            .starts_with("quorum: 2 of 3 instances open"),
        "{}",
        redis.hget(&key, "reason")
    );
    let pttl: i64 = redis.cli(&["PTTL", &key]).parse().unwrap();
    assert!((119_000..=150_000).contains(&pttl), "{pttl} ms");
    assert_eq!(
        redis.cli(&["ZRANGE", &open_keys("keyedq"), "0", "-1"]),
        "q.example"
    );
    assert_eq!(nodes[2].key_state("other.example"), "closed");
}

/// Writes the `hosts` key `key`'s record under `prefix` as `state` with `record.lua`, as an
/// instance would, but publishes it where no instance listens: a change whose message was lost.
fn write_unheard(redis: &Redis, prefix: &str, key: &str, state: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/src/record.lua");
    let record = record(prefix, key);
    let probes = format!("{record}:probes");
    let ttl = if state == "open" { "120000" } else { "30000" };
    let out = redis.cli(&[
        "--eval",
        script,
        &record,
        &probes,
        &open_keys(prefix),
        ",",
        "force",
        "",
        state,
        "60000",
        "0",
        "operator",
        "HTTP 503",
        "redis-cli",
        "nobody-listens:changes",
        key,
        ttl,
        key,
    ]);
    assert!(out.starts_with('1'), "{out}");
}

#[test]
fn a_key_change_whose_message_was_lost_is_found_by_the_next_re_read() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("keyedlost") else {
        return;
    };
    let mut nodes = keyed_nodes(&redis.url(), "keyedlost", 2, "");
    assert_eq!(nodes[0].cmd("ksucceed held.example"), "ok closed");
    write_unheard(&redis, "keyedlost", "held.example", "open");
    write_unheard(&redis, "keyedlost", "new.example", "open");
    // A re-read finds both among the family's open keys: the key held here opens, and a key
    // made after it takes the fleet's state on.
    assert_eq!(nodes[0].cmd("resync"), "resync true");
    assert_eq!(nodes[0].key_state("held.example"), "open");
    assert_eq!(
        nodes[0].cmd("klast held.example"),
        "last redis-cli: HTTP 503"
    );
    assert_eq!(nodes[1].cmd("resync"), "resync true");
    assert_eq!(
        nodes[1].key_state("new.example"),
        "none",
        "a record makes no key"
    );
    assert_eq!(nodes[1].cmd("ksucceed new.example"), "rejected open");
    // Closes whose messages were lost: the key held open here is re-read; a key the fleet
    // held open and this instance does not hold is forgotten, so a key made later is closed.
    write_unheard(&redis, "keyedlost", "held.example", "closed");
    write_unheard(&redis, "keyedlost", "gone.example", "open");
    assert_eq!(nodes[1].cmd("resync"), "resync true");
    write_unheard(&redis, "keyedlost", "gone.example", "closed");
    assert_eq!(nodes[0].cmd("resync"), "resync true");
    assert_eq!(nodes[0].key_state("held.example"), "closed");
    assert_eq!(nodes[1].cmd("resync"), "resync true");
    assert_eq!(nodes[1].cmd("ksucceed gone.example"), "ok closed");
    assert_eq!(
        redis.cli(&["ZRANGE", &open_keys("keyedlost"), "0", "-1"]),
        "new.example"
    );
}

#[test]
fn a_key_whose_open_time_ran_out_is_probed_by_one_instance_and_closes_everywhere() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("keyedprobe") else {
        return;
    };
    let hosts =
        "open_for = \"300ms\"\nhalf_open_calls = 1\nsuccesses = 1\nprobe_timeout = \"5s\"\n";
    let mut nodes = keyed_nodes_with(&redis.url(), "keyedprobe", 3, "", hosts);
    for node in nodes.iter_mut() {
        assert_eq!(node.cmd("ksucceed p.example"), "ok closed");
    }
    assert_eq!(nodes[0].cmd("kfail p.example"), "ok open");
    for node in nodes.iter_mut() {
        node.wait_key("p.example", "open", soon()).unwrap();
    }
    // The open time runs out: one instance is granted the key's lease and probes (every
    // instance alone would wait out its hold, 300 ms and the 5 s probe timeout, past the
    // deadline); until its probe closes the key, the others keep rejecting.
    let deadline = soon();
    'probe: loop {
        for node in nodes.iter_mut() {
            match node.cmd("ksucceed p.example").as_str() {
                "ok closed" => break 'probe,
                "rejected open" | "rejected half-open" => {}
                other => panic!("{}: {other}", node.name),
            }
        }
        assert!(Instant::now() < deadline, "no instance probed");
        std::thread::sleep(Duration::from_millis(20));
    }
    for node in nodes.iter_mut() {
        node.wait_key("p.example", "closed", soon()).unwrap();
    }
    let key = record("keyedprobe", "p.example");
    assert_eq!(redis.hget(&key, "state"), "closed");
    assert_eq!(redis.cli(&["EXISTS", &format!("{key}:probes")]), "0");
}

#[test]
fn while_the_store_is_down_a_shared_familys_keys_decide_alone_whatever_the_policy() {
    let Some(bin) = redis_server() else { return };
    let _alone = crate::support::alone();
    let mut redis = Redis::start(&bin, &[]);
    let mut nodes = keyed_nodes(&redis.url(), "keyedhold", 1, "on_store_error = \"open\"\n");
    // A key that tripped and was reset (the fleet's task tracks it), and one never changed.
    assert_eq!(nodes[0].cmd("kfail t.example"), "ok open");
    assert_eq!(nodes[0].cmd("kreset t.example"), "ok");
    let key = record("keyedhold", "t.example");
    let deadline = soon();
    while redis.hget(&key, "reason") != "reset" {
        assert!(Instant::now() < deadline, "the reset was not written");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(nodes[0].cmd("ksucceed u.example"), "ok closed");
    redis.kill();
    // The single breaker is held forced open; every key, tracked or not, new or not, decides
    // alone: admitted, and tripped by its own failure.
    nodes[0].wait_state("forced-open", soon()).unwrap();
    assert_eq!(nodes[0].cmd("ksucceed t.example"), "ok closed");
    assert_eq!(nodes[0].cmd("ksucceed u.example"), "ok closed");
    assert_eq!(nodes[0].cmd("ksucceed v.example"), "ok closed");
    assert_eq!(nodes[0].cmd("kfail t.example"), "ok open");
    // The store back, that trip is written.
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(5);
    while redis.hget(&key, "state") != "open" {
        assert!(
            Instant::now() < deadline,
            "the trip made during the outage was not written"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    nodes[0].wait_state("closed", soon()).unwrap();
}

/// A key whose probe timeout is past any clock (`Duration::MAX`, possible from code though not
/// from a config file) is still written when it trips: its record's life is one the store can
/// count, and the record expires. Once its open time runs out, its probe lease is granted.
#[test]
fn a_key_with_a_probe_timeout_past_any_clock_is_written_and_probed_through_its_lease() {
    use breakerbox_fleet::{Fleet, FleetConfig};
    use breakerbox_runtime::{Config, Outcome, State, registry};
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("keyedmax") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let keys = registry()
        .family::<String>("maxhosts", || {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_millis(500))
                .probe_timeout(Duration::MAX)
                .build()
                .unwrap()
        })
        .unwrap();
    let config = FleetConfig::new(redis.url())
        .prefix("keyedmax")
        .share("maxhosts");
    let fleet = rt.block_on(Fleet::connect(config)).unwrap();
    keys.try_acquire("m.example")
        .unwrap()
        .record(Outcome::Failure);
    assert_eq!(keys.get("m.example").map(|b| b.state()), Some(State::Open));
    let key = "{keyedmax/8:maxhosts}:9:m.example";
    poll("the trip's record", Duration::from_secs(5), || {
        redis.hget(key, "state") == "open"
    });
    let pttl: i64 = redis.cli(&["PTTL", key]).parse().unwrap();
    assert!(pttl > 0, "{pttl} ms");
    poll("a probe, through the lease", Duration::from_secs(5), || {
        keys.try_acquire("m.example").is_ok()
    });
    drop(fleet);
}
