//! Fleet mode under store faults: Redis killed and restarted, stopped and
//! continued, partitioned behind a proxy (latency, stalled and cut connections), flushed, and a
//! subscriber that stops reading.
//!
//! Each test, with three `fleet_node` processes making background calls:
//! - no call waits for the store: the p99 call latency during the fault stays within a generous
//!   multiple of the run's own no-fault p99 (a call that waited for the store would take the
//!   store timeout, 250 ms);
//! - no node panics (each answers every command, and exits cleanly at the end);
//! - local breaking goes on: a failure during the fault opens that node's breaker at once;
//! - every node converges to the fleet's state within 1 s of the store coming back (polled
//!   with a deadline).
//!
//! Each runs [`alone`]: it runs four processes that time their calls, on a machine of two
//! cores.

use std::time::{Duration, Instant};

use crate::support::{
    Node, Proxy, Redis, all_reach, alone, nodes, nodes_fleet, redis_server, soon,
};

/// The worst p99 of the nodes' background calls since the last reading, in ns. A node hands
/// its samples over 32 calls at a time, so on a loaded machine a short window can hold none
/// yet: each node is read again (polling, with a deadline) until it has some.
fn p99(nodes: &mut [Node]) -> u64 {
    nodes
        .iter_mut()
        .map(|n| {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let (_, p99, _, calls) = n.lat();
                if calls > 0 {
                    return p99;
                }
                assert!(
                    Instant::now() < deadline,
                    "{}: no background call measured",
                    n.name
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        })
        .max()
        .unwrap()
}

/// Waits (polling, with a deadline) until `node` has re-read every record `n` more times:
/// a measuring window of about `n` resync periods.
fn resyncs(node: &mut Node, n: u64) {
    let start = node.status().4;
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.status().4 < start + n {
        assert!(Instant::now() < deadline, "{}: no resync", node.name);
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `node` has seen `n` more failed store operations.
fn more_errors(node: &mut Node, n: u64) {
    let start = node.status().3;
    let deadline = Instant::now() + Duration::from_secs(10);
    while node.status().3 < start + n {
        assert!(
            Instant::now() < deadline,
            "{}: no more store errors",
            node.name
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until `node` has seen the store fail.
fn sees_failure(node: &mut Node) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (connected, _, _, errors, _) = node.status();
        if !connected && errors > 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{}: never saw the store fail",
            node.name
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The bound on the fault's p99: 20× the no-fault p99 plus 5 ms of scheduling noise on a
/// loaded machine, far below the 250 ms a call waiting for the store would take.
fn assert_no_wait(base: u64, fault: u64, what: &str) {
    let bound = base * 20 + 5_000_000;
    assert!(
        fault <= bound,
        "{what}: p99 call latency {fault} ns during the fault, over {bound} ns (no-fault p99 {base} ns)"
    );
    eprintln!("{what}: p99 call {base} ns without the fault, {fault} ns during it");
}

/// A fault that cuts the nodes off the store: node-0 trips alone meanwhile, the others stay
/// closed; once `restore` returns (the store answers), every node is open within 1 s.
fn cut_off(
    what: &str,
    redis: &mut Redis,
    proxy: Option<&Proxy>,
    url: &str,
    fault: impl FnOnce(&mut Redis, Option<&Proxy>),
    restore: impl FnOnce(&mut Redis, Option<&Proxy>),
) {
    cut_off_store(
        what,
        url,
        Duration::from_secs(1),
        redis,
        |r| fault(r, proxy),
        |r| restore(r, proxy),
        |_| {},
    );
}

/// A fault that cuts the nodes at `url` off `store` (Redis, PostgreSQL): node-0 trips alone
/// meanwhile, the others stay closed, calls never wait; once `restore` returns (the store
/// answers), every node is open within `within`, `returned` checks the store, and the fleet
/// goes on.
pub(crate) fn cut_off_store<S>(
    what: &str,
    url: &str,
    within: Duration,
    store: &mut S,
    fault: impl FnOnce(&mut S),
    restore: impl FnOnce(&mut S),
    returned: impl FnOnce(&S),
) {
    let mut nodes = nodes(url, what, 3);
    for n in nodes.iter_mut() {
        assert_eq!(n.cmd("traffic on"), "ok");
    }
    // The fleet works before the fault.
    assert_eq!(nodes[1].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    assert_eq!(nodes[2].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    resyncs(&mut nodes[0], 1);
    let base = p99(&mut nodes);

    fault(store);
    for n in nodes.iter_mut() {
        sees_failure(n);
    }
    assert_eq!(nodes[0].cmd("fail"), "ok open", "local breaking goes on");
    assert_eq!(
        nodes[1].state(),
        "closed",
        "cut off: nothing reached node-1"
    );
    more_errors(&mut nodes[1], 3); // the failing store's retries, while calls go on
    assert_eq!(nodes[1].state(), "closed");
    let during = p99(&mut nodes);

    restore(store);
    let back = Instant::now();
    all_reach(&mut nodes, "open", back + within).unwrap_or_else(|e| {
        panic!("{what}: not converged within {within:?} of the store's return: {e}")
    });
    assert_no_wait(base, during, what);
    returned(store);
    // And the fleet goes on.
    assert_eq!(nodes[2].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    for n in nodes.iter_mut() {
        assert_eq!(n.cmd("traffic off"), "ok");
    }
}

/// `on_store_error = policy`: the fleet is open; Redis is killed; within 2 s every node is
/// held `held` (a failure answers `failed`, and calls never wait); Redis restarts; within 1 s
/// every node is open again (its own state given back), and the fleet goes on.
fn held_while_the_store_is_down(policy: &str, held: &str, failed: &str) {
    let Some(bin) = redis_server() else { return };
    let _alone = alone();
    let mut redis = Redis::start(&bin, &[]);
    let prefix = format!("hold-{policy}");
    let fleet_keys = format!("on_store_error = \"{policy}\"\n");
    let mut nodes = nodes_fleet(&redis.url(), &prefix, 3, &fleet_keys);
    for n in nodes.iter_mut() {
        assert_eq!(n.cmd("traffic on"), "ok");
    }
    assert_eq!(nodes[1].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    resyncs(&mut nodes[0], 1);
    let base = p99(&mut nodes);

    redis.kill();
    all_reach(&mut nodes, held, Instant::now() + Duration::from_secs(2))
        .unwrap_or_else(|e| panic!("{policy}: not held {held} within 2 s of the kill: {e}"));
    for n in nodes.iter_mut() {
        assert_eq!(n.cmd("fail"), failed, "{}", n.name);
    }
    more_errors(&mut nodes[1], 3); // the failing store's retries: still held
    assert_eq!(nodes[1].state(), held);
    let during = p99(&mut nodes);

    redis.restart();
    let back = Instant::now();
    all_reach(&mut nodes, "open", back + Duration::from_secs(1)).unwrap_or_else(|e| {
        panic!("{policy}: not given back within 1 s of the store's return: {e}")
    });
    assert_no_wait(base, during, policy);
    // Nothing held was written: the store never heard of forced-open or disabled. The
    // record vanished with the restart (no persistence) and is written again as open.
    let key = format!("{{{prefix}:payments}}");
    let deadline = soon();
    while redis.hget(&key, "state") != "open" {
        assert!(
            Instant::now() < deadline,
            "{policy}: the record not written again"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // And the fleet goes on.
    assert_eq!(nodes[2].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    for n in nodes.iter_mut() {
        assert_eq!(n.cmd("traffic off"), "ok");
    }
}

#[test]
fn on_store_error_open_rejects_every_call_until_the_store_returns() {
    held_while_the_store_is_down("open", "forced-open", "rejected forced-open");
}

#[test]
fn on_store_error_closed_admits_every_call_until_the_store_returns() {
    held_while_the_store_is_down("closed", "disabled", "ok disabled");
}

#[test]
fn redis_killed_and_restarted_mid_traffic() {
    let Some(bin) = redis_server() else { return };
    let _alone = alone();
    let mut redis = Redis::start(&bin, &[]);
    let url = redis.url();
    cut_off(
        "kill",
        &mut redis,
        None,
        &url,
        |r, _| r.kill(),
        |r, _| r.restart(),
    );
}

#[test]
fn redis_stopped_then_continued() {
    let Some(bin) = redis_server() else { return };
    let _alone = alone();
    let mut redis = Redis::start(&bin, &[]);
    let url = redis.url();
    cut_off(
        "stop",
        &mut redis,
        None,
        &url,
        |r, _| r.signal("-STOP"),
        |r, _| r.signal("-CONT"),
    );
}

#[test]
fn a_partition_behind_a_proxy_with_latency_and_cut_connections() {
    let Some(bin) = redis_server() else { return };
    let _alone = alone();
    let mut redis = Redis::start(&bin, &[]);
    let proxy = Proxy::start(redis.port);
    let url = proxy.url();
    cut_off(
        "partition",
        &mut redis,
        Some(&proxy),
        &url,
        |_, p| {
            let p = p.unwrap();
            p.delay(400); // beyond the 250 ms timeout: every operation times out
            p.cut(); // and every connection drops; new ones get the same latency
        },
        |_, p| {
            let p = p.unwrap();
            p.delay(0);
            p.cut(); // the slow connections go; the nodes reconnect
        },
    );
    // While the partition stalls (no byte through, connections held open), the same holds.
    drop(proxy);
    let proxy = Proxy::start(redis.port);
    let url = proxy.url();
    cut_off(
        "stall",
        &mut redis,
        Some(&proxy),
        &url,
        |_, p| p.unwrap().stall(true),
        |_, p| p.unwrap().stall(false),
    );
}

#[test]
fn flushall_loses_the_records_and_the_open_fleet_writes_them_again() {
    let Some(bin) = redis_server() else { return };
    let _alone = alone();
    let redis = Redis::start(&bin, &[]);
    let mut nodes = nodes(&redis.url(), "flush", 3);
    for n in nodes.iter_mut() {
        assert_eq!(n.cmd("traffic on"), "ok");
    }
    resyncs(&mut nodes[0], 1);
    let base = p99(&mut nodes);
    assert_eq!(nodes[0].cmd("force_open"), "ok");
    all_reach(&mut nodes, "forced-open", soon()).unwrap();
    assert_eq!(redis.cli(&["FLUSHALL"]), "OK");
    let flushed = Instant::now();
    assert_eq!(nodes[1].cmd("fail"), "rejected forced-open");
    // Within one resync period (1 s) and the 1 s bound, a node writes the record again.
    let deadline = flushed + Duration::from_secs(2);
    while redis.hget("{flush:payments}", "state") != "forced_open" {
        assert!(
            Instant::now() < deadline,
            "the record was not written again"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    all_reach(&mut nodes, "forced-open", soon()).unwrap();
    resyncs(&mut nodes[0], 1);
    let during = p99(&mut nodes);
    assert_no_wait(base, during, "flushall");
    assert_eq!(nodes[2].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
}

#[test]
fn a_subscriber_that_stops_reading_catches_up_within_a_second() {
    let Some(bin) = redis_server() else { return };
    let _alone = alone();
    let redis = Redis::start(&bin, &[]);
    let mut nodes = nodes(&redis.url(), "slow", 3);
    for n in nodes.iter_mut() {
        assert_eq!(n.cmd("traffic on"), "ok");
    }
    resyncs(&mut nodes[0], 1);
    let base = p99(&mut nodes[..2]);
    // node-2 stops reading anything (its process is stopped) while the fleet changes 40 times.
    nodes[2].signal("-STOP");
    for i in 0..20 {
        assert_eq!(nodes[i % 2].cmd("force_open"), "ok");
        nodes[..2]
            .iter_mut()
            .try_for_each(|n| n.wait_state("forced-open", soon()))
            .unwrap();
        assert_eq!(nodes[(i + 1) % 2].cmd("reset"), "ok");
        nodes[..2]
            .iter_mut()
            .try_for_each(|n| n.wait_state("closed", soon()))
            .unwrap();
    }
    assert_eq!(nodes[0].cmd("disable"), "ok");
    nodes[..2]
        .iter_mut()
        .try_for_each(|n| n.wait_state("disabled", soon()))
        .unwrap();
    let during = p99(&mut nodes[..2]);
    nodes[2].signal("-CONT");
    let back = Instant::now();
    nodes[2]
        .wait_state("disabled", back + Duration::from_secs(1))
        .unwrap_or_else(|e| panic!("the slow subscriber did not catch up within 1 s: {e}"));
    assert_no_wait(base, during, "slow subscriber");
}
