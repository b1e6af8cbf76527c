//! Fleet mode's numbers for BENCHMARKS.md: trip propagation across processes, and
//! the Redis commands each instance sends in a steady closed state. A measurement, not a test:
//! ignored by default, it asserts nothing about time and prints what it measured.
//!
//!   FLEET_NODES=3 cargo test -p breakerbox-fleet --release --test fleet numbers:: -- --ignored --nocapture
//!   FLEET_NODES=8 cargo test -p breakerbox-fleet --release --test fleet numbers:: -- --ignored --nocapture
//!
//! `FLEET_TRAFFIC=fast` makes the steady-state traffic about 1 M successful calls a second per
//! instance (default: one ignored call every 200 µs), and `FLEET_RATE=1` gives `payments` a
//! failure rate over a 10 s time window, whose counts the fleet batches to Redis (Redis counts
//! the commands after one window of traffic, so that old buckets leave it meanwhile).

use std::time::{Duration, Instant};

use crate::support::{
    Node, Redis, all_reach, idle_rates, nodes, nodes_with, percentile, redis_server,
};

/// Polls until every node but the first has printed `count` events, returns their last ones'
/// wall times.
pub(crate) fn last_events(nodes: &[Node], count: usize, to: &str) -> Vec<u128> {
    let deadline = Instant::now() + Duration::from_secs(10);
    nodes[1..]
        .iter()
        .map(|n| {
            loop {
                let events = n.events();
                if events.len() >= count {
                    let e = &events[count - 1];
                    assert_eq!(e.to, to, "{}: {e:?}", n.name);
                    return e.wall_ns;
                }
                assert!(Instant::now() < deadline, "{}: no event {count}", n.name);
                std::thread::sleep(Duration::from_micros(200));
            }
        })
        .collect()
}

#[test]
#[ignore = "a measurement: run it with --ignored --nocapture"]
fn propagation_and_steady_state_commands() {
    let _alone = crate::support::alone();
    let Some(bin) = redis_server() else { return };
    let n: usize = std::env::var("FLEET_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let trips: usize = std::env::var("FLEET_TRIPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let fast = std::env::var("FLEET_TRAFFIC").is_ok_and(|v| v == "fast");
    let rate = std::env::var("FLEET_RATE").is_ok_and(|v| v == "1");
    let redis = Redis::start(&bin, &[]);
    let mut nodes = if rate {
        // Trips on its first failure too (min_calls 1, 50 %), so the propagation loop is the same.
        let keys = "failure_rate = 50\nwindow = \"10s\"\nmin_calls = 1\nopen_for = \"60s\"\n";
        nodes_with(&redis.url(), "numbers", n, keys)
    } else {
        nodes(&redis.url(), "numbers", n)
    };

    // Trip propagation: node-0's trip (its event's wall time) to each other node's imported
    // open event, the moment from which it rejects. Same host, same clock.
    let mut delays = Vec::with_capacity(trips * (n - 1));
    for i in 0..trips {
        assert_eq!(nodes[0].cmd("fail"), "ok open");
        let tripped = nodes[0].events()[2 * i].wall_ns;
        for at in last_events(&nodes, 2 * i + 1, "open") {
            delays.push(at.saturating_sub(tripped));
        }
        assert_eq!(nodes[0].cmd("reset"), "ok");
        last_events(&nodes, 2 * i + 2, "closed");
    }
    let p50 = percentile(&mut delays, 0.5);
    let p99 = percentile(&mut delays, 0.99);
    let max = *delays.iter().max().unwrap();
    println!(
        "fleet of {n}: trip propagation over {trips} trips ({} samples): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        delays.len(),
        p50 as f64 / 1e6,
        p99 as f64 / 1e6,
        max as f64 / 1e6
    );

    // Steady closed state, with every node making background calls: the commands Redis counts
    // over 10 s, per instance and second.
    all_reach(
        &mut nodes,
        "closed",
        Instant::now() + Duration::from_secs(5),
    )
    .unwrap();
    for node in nodes.iter_mut() {
        let on = if fast { "traffic fast" } else { "traffic on" };
        assert_eq!(node.cmd(on), "ok");
    }
    if rate {
        // One window (10 s) of traffic first, so that buckets leave the window (and are
        // deleted, one `HDEL` per bucket fleet-wide) while Redis counts: the steady state.
        std::thread::sleep(Duration::from_secs(10));
        for node in nodes.iter_mut() {
            node.lat(); // the calls are counted from here
        }
    }
    assert_eq!(redis.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let stats = redis.cli(&["INFO", "commandstats"]);
    let secs = start.elapsed().as_secs_f64();
    let mut total = 0u64;
    let mut lines = Vec::new();
    for line in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
        let name = line.split(':').next().unwrap();
        let calls: u64 = line
            .split("calls=")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        if name == "cmdstat_info" || name == "cmdstat_config|resetstat" {
            continue; // ours
        }
        total += calls;
        lines.push(format!("{name}={calls}"));
    }
    let mut calls = 0;
    for node in nodes.iter_mut() {
        calls += node.lat().3;
        assert_eq!(node.cmd("traffic off"), "ok");
    }
    println!(
        "fleet of {n}, steady closed state: {:.2} Redis commands per instance per second with one shared {} breaker ({}; {:.0} background calls per second per instance)",
        total as f64 / n as f64 / secs,
        if rate {
            "failure-rate"
        } else {
            "consecutive-failure"
        },
        lines.join(" "),
        calls as f64 / n as f64 / secs
    );
}

/// Propagation with a single Redis node, three instances in this process (the same harness as
/// the Sentinel and Cluster measurements, `instances::propagation`), 200 trip–reset rounds.
#[test]
#[ignore = "a measurement: run it with --ignored --nocapture"]
fn propagation_single_node_in_process() {
    let _alone = crate::support::alone();
    let Some(bin) = redis_server() else { return };
    let redis = Redis::start(&bin, &[]);
    let rt = crate::instances::runtime();
    let _guard = rt.enter();
    let url = redis.url();
    let fleet = crate::instances::Instances::connect(&rt, 3, &["payments"], |_| {
        breakerbox_fleet::FleetConfig::new(&url).prefix("onep")
    });
    let (p50, p99, max) = crate::instances::propagation(&fleet, 0, 200);
    println!(
        "single node, 3 instances, 200 trips: propagation p50 {p50:?}, p99 {p99:?}, max {max:?}"
    );
}

/// Redis's count of every command since the last `CONFIG RESETSTAT` (`INFO commandstats`, a
/// script's own commands included), ours left out.
fn commands(redis: &Redis) -> u64 {
    let stats = redis.cli(&["INFO", "commandstats"]);
    stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_"))
        .filter(|l| !l.starts_with("cmdstat_info:") && !l.starts_with("cmdstat_config|"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The commands one idle instance sends Redis a second, for 1, 100 and 10 000 shared breakers,
/// with `fleet_trip = "any"` and under a quorum, all closed and with one open (tripped here,
/// `open_for` 60 s). `FLEET_WINDOW` (seconds, default 5) sets how long each is counted.
///
///   cargo test -p breakerbox-fleet --release --test fleet numbers::idle -- --ignored --nocapture
#[test]
#[ignore = "a measurement: run it with --ignored --nocapture"]
fn idle_instance_commands_per_second_by_shared_breakers() {
    let _alone = crate::support::alone();
    let Some(bin) = redis_server() else { return };
    let window: u64 = std::env::var("FLEET_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let redis = Redis::start(&bin, &[]);
    idle_rates(
        redis.url(),
        &[1, 100, 10_000],
        window,
        || assert_eq!(redis.cli(&["CONFIG", "RESETSTAT"]), "OK"),
        || commands(&redis),
        |mode, n, open, rate| {
            println!(
                "idle instance, {mode} {n:>6} shared breakers, {open}: {rate:.2} Redis commands per second"
            )
        },
    );
}
