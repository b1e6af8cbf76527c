//! Through Redis Sentinel (`redis+sentinel://`): a master, a replica and three sentinels; the
//! master SIGKILLed.

use std::time::{Duration, Instant};

use breakerbox_fleet::FleetConfig;
use breakerbox_runtime::State;

use crate::instances::{Instances, fail, runtime};
use crate::servers::{Sentinels, poll};
use crate::support::{alone, redis_server};

/// p99 of `samples`.
fn p99(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[(samples.len() * 99 / 100).min(samples.len() - 1)]
}

#[test]
fn a_sentinel_failover_loses_no_transition_and_no_call_waits() {
    let _machine = alone();
    let Some(bin) = redis_server() else { return };
    let mut setup = Sentinels::start(&bin);
    let rt = runtime();
    let _guard = rt.enter();
    let url = setup.url();
    let fleet = Instances::connect(&rt, 3, &["pay"], |_| {
        FleetConfig::new(&url)
            .prefix("sen")
            .resync_every(Duration::from_millis(500))
    });
    fail(&fleet.breakers[0][0]);
    fleet.all(0, State::Open, Duration::from_secs(10));
    let master = setup.master_port().unwrap();
    // The trip is on the replica too before the master dies (replication is asynchronous:
    // a write the master acknowledged and never passed on is lost with it, by Redis).
    poll("the trip replicated", Duration::from_secs(10), || {
        setup
            .data
            .iter()
            .filter(|n| n.port != master)
            .all(|n| n.cli(&["HGET", "{sen:pay}", "state"]) == "open")
    });

    // Calls on one instance all along, timed.
    let caller = fleet.breakers[2][0].clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let calls = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut took = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                let _ = caller.call(|| Ok::<_, &str>(()));
                took.push(t.elapsed());
                std::thread::sleep(Duration::from_micros(200));
            }
            took
        })
    };
    let mut before = Vec::new();
    for _ in 0..2000 {
        let t = Instant::now();
        let _ = fleet.breakers[1][0].call(|| Ok::<_, &str>(()));
        before.push(t.elapsed());
    }

    let killed = Instant::now();
    setup
        .data
        .iter_mut()
        .find(|n| n.port == master)
        .unwrap()
        .kill();
    // Made while the master is gone: pending on instance 1, written once the fleet reaches the
    // new master.
    fleet.breakers[1][0].reset();
    let failover = {
        poll("the failover", Duration::from_secs(20), || {
            setup.master_port().is_some_and(|p| p != master)
        });
        killed.elapsed()
    };
    fleet.all(0, State::Closed, Duration::from_secs(20));
    let converged = killed.elapsed();
    let new_master = setup.master_port().unwrap();
    let node = setup.data.iter().find(|n| n.port == new_master).unwrap();
    poll(
        "the reset on the new master",
        Duration::from_secs(10),
        || node.cli(&["HGET", "{sen:pay}", "state"]) == "closed",
    );
    assert_eq!(node.cli(&["HGET", "{sen:pay}", "origin"]), "i1");
    // And the fleet goes on after it: a trip on the new master reaches everyone.
    fail(&fleet.breakers[2][0]);
    fleet.all(0, State::Open, Duration::from_secs(10));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut during = calls.join().unwrap();
    let (base, worst) = (p99(&mut before), p99(&mut during));
    eprintln!(
        "sentinel: failover {failover:?}, every instance converged {converged:?} after the kill \
         ({:?} after the failover); call p99 {worst:?} (before: {base:?})",
        converged.saturating_sub(failover)
    );
    assert!(
        worst < base * 20 + Duration::from_millis(5),
        "calls waited: p99 {worst:?} against {base:?}"
    );
    assert!(
        converged.saturating_sub(failover) < Duration::from_secs(2),
        "converged {converged:?} after the kill, failover {failover:?}"
    );
}

/// Propagation through Sentinel (the master the sentinels name), three instances in this
/// process, 200 trip–reset rounds. A measurement for BENCHMARKS.md.
#[test]
#[ignore = "a measurement: run it with --ignored --nocapture"]
fn propagation_through_sentinel() {
    let _machine = alone();
    let Some(bin) = redis_server() else { return };
    let setup = Sentinels::start(&bin);
    let rt = runtime();
    let _guard = rt.enter();
    let url = setup.url();
    let fleet = Instances::connect(&rt, 3, &["pay"], |_| FleetConfig::new(&url).prefix("senp"));
    let (p50, p99, max) = crate::instances::propagation(&fleet, 0, 200);
    println!("sentinel, 3 instances, 200 trips: propagation p50 {p50:?}, p99 {p99:?}, max {max:?}");
}
