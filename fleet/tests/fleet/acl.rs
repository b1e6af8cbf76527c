//! Fleet mode under the least privilege docs/fleet.md gives: an ACL user allowed exactly the
//! fleet's commands, its keys and its channel, on a real `redis-server`. Trips, probe leases,
//! fleet counts, manual control, the re-read pass, heartbeats and quorum trips all run under it
//! with no command denied.

use std::time::{Duration, Instant};

use crate::support::{
    Redis, all_reach, keyed_nodes, nodes_fleet, nodes_with, nodes_with_fleet, redis_server, soon,
};

/// The rule of docs/fleet.md ("Least privilege"), for the prefix `acl`.
const RULE: &[&str] = &[
    "on",
    ">fleet-secret",
    "resetkeys",
    "resetchannels",
    "~{acl:*",
    "&acl:changes",
    "-@all",
    "+hello",
    "+auth",
    "+ping",
    "+subscribe",
    "+evalsha",
    "+script|load",
    "+time",
    "+hmget",
    "+hset",
    "+hgetall",
    "+hdel",
    "+del",
    "+publish",
    "+zadd",
    "+zcard",
    "+zrange",
    "+zremrangebyscore",
    "+zscore",
    "+pexpire",
];

#[test]
fn the_fleet_runs_under_its_least_privilege_acl_user() {
    let _shared = crate::support::shared();
    let Some(bin) = redis_server() else { return };
    let redis = Redis::start(&bin, &[]);
    let mut setuser = vec!["ACL", "SETUSER", "fleet"];
    setuser.extend_from_slice(RULE);
    assert_eq!(redis.cli(&setuser), "OK");
    assert_eq!(redis.cli(&["ACL", "LOG", "RESET"]), "OK");
    let url = redis
        .url()
        .replace("redis://", "redis://fleet:fleet-secret@");
    // A failure rate over a time window (fleet counts: count.lua), short open times (probe
    // leases: probe.lua), one success to close.
    let keys = "failure_rate = 50\nwindow = \"10s\"\nmin_calls = 2\nopen_for = \"300ms\"\nhalf_open_calls = 1\nsuccesses = 1\nprobe_timeout = \"5s\"\n";
    let mut nodes = nodes_with_fleet(&url, "acl", 3, keys, PATIENT);
    // Calls judged while closed are counted fleet-wide; two failures on one node trip it. The
    // fleet's counts (one success, one failure: 50% of 2) may trip it first, a batch (100 ms)
    // after the first failure: then the second call is rejected.
    assert_eq!(nodes[1].cmd("succeed"), "ok closed");
    assert_eq!(nodes[0].cmd("fail"), "ok closed");
    let second = nodes[0].cmd("fail");
    assert!(second == "ok open" || second == "rejected open", "{second}");
    all_reach(&mut nodes, "open", soon()).unwrap();
    assert_eq!(redis.hget("{acl:payments}", "state"), "open");
    // The open time runs out: one instance is granted the lease, probes and closes the fleet.
    let deadline = soon();
    'probe: loop {
        for node in nodes.iter_mut() {
            if node.cmd("succeed") == "ok closed" {
                break 'probe;
            }
        }
        assert!(Instant::now() < deadline, "no instance probed");
        std::thread::sleep(Duration::from_millis(20));
    }
    all_reach(&mut nodes, "closed", soon()).unwrap();
    // Manual control, written with `force`.
    assert_eq!(nodes[2].cmd("force_open"), "ok");
    all_reach(&mut nodes, "forced-open", soon()).unwrap();
    assert_eq!(nodes[1].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    // Nothing was denied, and no store operation failed.
    assert_eq!(redis.cli(&["ACL", "LOG"]), "", "denied commands");
    for node in nodes.iter_mut() {
        let (connected, _, _, store_errors, _) = node.status();
        assert!(connected, "{}", node.name);
        assert_eq!(store_errors, 0, "{}", node.name);
    }
}

#[test]
fn quorum_trips_and_heartbeats_run_under_the_same_acl_user() {
    let _shared = crate::support::shared();
    let Some(bin) = redis_server() else { return };
    let redis = Redis::start(&bin, &[]);
    let mut setuser = vec!["ACL", "SETUSER", "fleet"];
    setuser.extend_from_slice(RULE);
    assert_eq!(redis.cli(&setuser), "OK");
    assert_eq!(redis.cli(&["ACL", "LOG", "RESET"]), "OK");
    let url = redis
        .url()
        .replace("redis://", "redis://fleet:fleet-secret@");
    // quorum.lua (reports, the quorum's write) and heartbeat.lua (heartbeats, the fleet view).
    let mut nodes = nodes_fleet(
        &url,
        "acl",
        3,
        &format!("fleet_trip = \"quorum\"\nquorum = 2\nresync_every = \"200ms\"\n{PATIENT}"),
    );
    let deadline = soon();
    while nodes[0].instances().2.len() != 3 {
        assert!(Instant::now() < deadline, "not every instance beat");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    let deadline = soon();
    while nodes[0].instances().1 != "1/2/3" {
        assert!(Instant::now() < deadline, "node-0's report was not tallied");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(nodes[1].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    assert_eq!(redis.cli(&["ACL", "LOG"]), "", "denied commands");
    for node in nodes.iter_mut() {
        let (connected, _, _, store_errors, _) = node.status();
        assert!(connected, "{}", node.name);
        assert_eq!(store_errors, 0, "{}", node.name);
    }
}

/// The store's timeout for the tests that count store errors: a denied command fails at once,
/// and a slow answer on a loaded machine must not count as one.
const PATIENT: &str = "timeout = \"5s\"\n";

/// What the rule of docs/fleet.md adds for shared keyed families: their keys, and the
/// commands their records' expiry and open-key lists take.
const KEYED_RULE: &[&str] = &["~{acl/*", "+persist", "+zrem"];

#[test]
fn a_shared_keyed_family_runs_under_the_same_acl_user() {
    let _shared = crate::support::shared();
    let Some(bin) = redis_server() else { return };
    let redis = Redis::start(&bin, &[]);
    let mut setuser = vec!["ACL", "SETUSER", "fleet"];
    setuser.extend_from_slice(RULE);
    setuser.extend_from_slice(KEYED_RULE);
    assert_eq!(redis.cli(&setuser), "OK");
    assert_eq!(redis.cli(&["ACL", "LOG", "RESET"]), "OK");
    let url = redis
        .url()
        .replace("redis://", "redis://fleet:fleet-secret@");
    let mut nodes = keyed_nodes(&url, "acl", 2, PATIENT);
    // A trip (record.lua with its expiry and open-key list), a key made later (the open keys
    // read), a forced open (PERSIST) and a reset (ZREM).
    assert_eq!(nodes[0].cmd("kfail a.example"), "ok open");
    let deadline = soon();
    while redis.hget("{acl/5:hosts}:9:a.example", "state") != "open" {
        assert!(Instant::now() < deadline, "the trip was not written");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(nodes[1].cmd("resync"), "resync true");
    assert_eq!(nodes[1].cmd("ksucceed a.example"), "rejected open");
    assert_eq!(nodes[1].cmd("kforce a.example"), "ok");
    nodes[0]
        .wait_key("a.example", "forced-open", soon())
        .unwrap();
    assert_eq!(nodes[0].cmd("kreset a.example"), "ok");
    nodes[1].wait_key("a.example", "closed", soon()).unwrap();
    assert_eq!(redis.cli(&["ACL", "LOG"]), "", "denied commands");
    for node in nodes.iter_mut() {
        let (connected, _, _, store_errors, _) = node.status();
        assert!(connected, "{}", node.name);
        assert_eq!(store_errors, 0, "{}", node.name);
    }
}

#[test]
fn a_wrong_password_is_a_store_error_not_a_panic() {
    let _shared = crate::support::shared();
    let Some(bin) = redis_server() else { return };
    let redis = Redis::start(&bin, &[]);
    let mut setuser = vec!["ACL", "SETUSER", "fleet"];
    setuser.extend_from_slice(RULE);
    assert_eq!(redis.cli(&setuser), "OK");
    let url = redis.url().replace("redis://", "redis://fleet:wrong@");
    let mut nodes = nodes_with(&url, "acl", 1, "failures = 1\n");
    // The breaker decides alone: calls go on, the trip is local, the store is unreachable.
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    let deadline = soon();
    loop {
        let (connected, _, _, store_errors, _) = nodes[0].status();
        if !connected && store_errors > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "never told the store failed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(nodes[0].state(), "open");
}
