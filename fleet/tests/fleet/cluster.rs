//! On a Redis Cluster (`redis+cluster://`) of three masters: one slot per breaker, a moved
//! slot, a killed node.

use std::time::Duration;

use breakerbox_fleet::{FleetConfig, FleetTrip, Quorum};
use breakerbox_runtime::State;

use crate::instances::{Instances, fail, runtime};
use crate::servers::Cluster;
use crate::support::{redis_server, shared};

#[test]
fn every_script_of_a_breaker_keeps_its_keys_on_one_cluster_slot() {
    let _machine = shared();
    let Some(bin) = redis_server() else { return };
    let cluster = Cluster::start(&bin, 3, 0);
    for name in ["payments", "a}b", "{x}", "}{", "über", "with space", ""] {
        let record = format!("{{breakerbox:{name}}}");
        // probe.lua's leases, heartbeat.lua's heartbeats, quorum.lua's open reports.
        for what in ["probes", "live", "opens"] {
            assert_eq!(
                cluster.keyslot(&record),
                cluster.keyslot(&format!("{record}:{what}")),
                "breaker `{name}`, {what}"
            );
        }
    }
}

/// Names whose records sit on three different masters.
fn spread(cluster: &Cluster, prefix: &str) -> Vec<String> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for i in 0.. {
        let name = format!("b{i}");
        let owner = cluster.owner(cluster.keyslot(&format!("{{{prefix}:{name}}}")));
        if !found.iter().any(|(o, _)| *o == owner) {
            found.push((owner, name));
        }
        if found.len() == 3 {
            break;
        }
    }
    found.sort();
    found.into_iter().map(|(_, n)| n).collect()
}

#[test]
fn a_cluster_fleet_shares_across_moved_slots_and_a_killed_node() {
    let _machine = shared();
    let Some(bin) = redis_server() else { return };
    let mut cluster = Cluster::start(&bin, 3, 0);
    let names = spread(&cluster, "clu");
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let rt = runtime();
    let _guard = rt.enter();
    let url = format!(
        "redis+cluster://{}",
        cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    );
    let fleet = Instances::connect(&rt, 3, &refs, |_| {
        FleetConfig::new(&url)
            .prefix("clu")
            .resync_every(Duration::from_millis(500))
    });
    // A trip on each master's breaker reaches everyone.
    for j in 0..3 {
        fail(&fleet.breakers[j][j]);
        fleet.all(j, State::Open, Duration::from_secs(10));
    }
    // A moved slot: the record goes with it, and a reset reaches everyone through the new node.
    let key0 = format!("{{clu:{}}}", names[0]);
    let slot = cluster.keyslot(&key0);
    let from = cluster.owner(slot);
    cluster.move_slot(slot, (from + 1) % 3);
    fleet.breakers[1][0].reset();
    fleet.all(0, State::Closed, Duration::from_secs(10));
    assert_eq!(
        cluster.nodes[(from + 1) % 3].cli(&["HGET", &key0, "origin"]),
        "i1"
    );
    // A killed node (breaker 2's; breakers 0 and 1 are on another now): the breakers on the
    // others go on sharing.
    let dead = cluster.owner(cluster.keyslot(&format!("{{clu:{}}}", names[2])));
    assert_ne!(dead, cluster.owner(slot));
    cluster.nodes[dead].kill();
    fleet.breakers[0][1].reset();
    fleet.all(1, State::Closed, Duration::from_secs(10));
    // The dead node's breaker decides alone meanwhile; its reset is written once the node is
    // back (restarted empty, with its slots), and reaches everyone.
    fleet.breakers[0][2].reset();
    assert_eq!(fleet.breakers[1][2].state(), State::Open);
    cluster.nodes[dead].restart();
    fleet.all(2, State::Closed, Duration::from_secs(10));
    assert_eq!(
        cluster.nodes[dead].cli(&["HGET", &format!("{{clu:{}}}", names[2]), "origin"]),
        "i0"
    );
}

#[test]
fn quorum_trips_and_heartbeats_run_on_a_cluster() {
    let _machine = shared();
    let Some(bin) = redis_server() else { return };
    let cluster = Cluster::start(&bin, 3, 0);
    let rt = runtime();
    let _guard = rt.enter();
    let url = format!(
        "redis+cluster://{}",
        cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    );
    let fleet = Instances::connect(&rt, 3, &["payments"], |_| {
        FleetConfig::new(&url)
            .prefix("cq")
            .resync_every(Duration::from_millis(200))
            .fleet_trip(FleetTrip::Quorum(Quorum::Instances(2)))
    });
    crate::servers::poll("three live instances", Duration::from_secs(5), || {
        fleet.fleets[0]
            .instances()
            .first()
            .is_some_and(|b| b.instances.len() == 3)
    });
    fail(&fleet.breakers[0][0]);
    crate::servers::poll("node 0's report tallied", Duration::from_secs(5), || {
        fleet.fleets[0].instances()[0].last_tally == Some((1, 2, 3))
    });
    for i in 1..3 {
        assert!(rt.block_on(fleet.fleets[i].resync()));
        assert_eq!(fleet.breakers[i][0].state(), State::Closed, "instance {i}");
    }
    fail(&fleet.breakers[1][0]);
    fleet.all(0, State::Open, Duration::from_secs(10));
}

/// Propagation in a Cluster of three masters (the record on one, `PUBLISH` reaching subscribers
/// on the others), three instances in this process, 200 trip–reset rounds. A measurement for
/// BENCHMARKS.md.
#[test]
#[ignore = "a measurement: run it with --ignored --nocapture"]
fn propagation_in_a_cluster() {
    let _machine = crate::support::alone();
    let Some(bin) = redis_server() else { return };
    let cluster = Cluster::start(&bin, 3, 0);
    let rt = runtime();
    let _guard = rt.enter();
    let url = format!(
        "redis+cluster://{}",
        cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    );
    let fleet = Instances::connect(&rt, 3, &["payments"], |_| {
        FleetConfig::new(&url).prefix("clp")
    });
    let (p50, p99, max) = crate::instances::propagation(&fleet, 0, 200);
    println!(
        "cluster of 3 masters, 3 instances, 200 trips: propagation p50 {p50:?}, p99 {p99:?}, max {max:?}"
    );
}
