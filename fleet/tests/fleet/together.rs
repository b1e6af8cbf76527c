//! Fleet mode end to end: a real `redis-server` and `fleet_node` processes.
//!
//! Each test starts its own server on a free loopback port (persistence off) and its nodes,
//! and polls with deadlines: no test sleeps for an outcome.

use std::time::{Duration, Instant};

use crate::servers::poll;
use crate::support::{
    Node, Redis, all_reach, config, nodes, nodes_with, probes_through_two_leases, redis_server,
    shared_redis, soon, tempdir,
};

/// How long a node is given to print an event or count a write.
const LIMIT: Duration = Duration::from_secs(5);

#[test]
fn one_trip_opens_every_instance_and_a_reset_on_another_closes_them() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("trip") else {
        return;
    };
    let mut nodes = nodes(&redis.url(), "trip", 3);
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    let key = "{trip:payments}";
    assert_eq!(redis.hget(key, "state"), "open");
    assert_eq!(redis.hget(key, "origin"), "node-0");
    assert_eq!(redis.hget(key, "reason"), "1 consecutive failure");
    assert_eq!(redis.hget(key, "last_failure"), "refused");
    // Open for what remains of the config's 60 s when the trip is written (the trip is
    // written within 10 s here, its node connecting first), on the server's clock.
    let open_until: u64 = redis.hget(key, "open_until").parse().unwrap();
    let changed_at: u64 = redis.hget(key, "changed_at").parse().unwrap();
    let open_for = open_until - changed_at;
    assert!((50_000..=60_000).contains(&open_for), "{open_for} ms");
    // The others were told, as an imported change; nobody else wrote. An event line is printed
    // after the state changed: waited for.
    for node in &nodes[1..] {
        poll(&format!("{}'s open event", node.name), LIMIT, || {
            node.events().last().is_some_and(|e| e.to == "open")
        });
        let events = node.events();
        let last = events.last().unwrap();
        assert_eq!(
            (last.to.as_str(), last.reason.as_str()),
            ("open", "imported")
        );
    }

    assert_eq!(nodes[1].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    assert_eq!(redis.hget(key, "origin"), "node-1");
    assert_eq!(redis.hget(key, "reason"), "reset");
    // node-1 counts its write when the answer comes back, after the others took the reset on.
    poll("node-1's write counted", LIMIT, || nodes[1].status().1 >= 1);
    let pushed: Vec<u64> = nodes.iter_mut().map(|n| n.status().1).collect();
    assert_eq!(pushed, [1, 1, 0], "one write per change, no echo");
}

#[test]
fn force_open_and_disable_on_one_instance_reach_every_instance() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("manual") else {
        return;
    };
    let mut nodes = nodes(&redis.url(), "manual", 3);
    assert_eq!(nodes[2].cmd("force_open"), "ok");
    all_reach(&mut nodes, "forced-open", soon()).unwrap();
    // Forced open: a call is rejected on another instance.
    assert_eq!(nodes[0].cmd("succeed"), "rejected forced-open");
    assert_eq!(nodes[1].cmd("disable"), "ok");
    all_reach(&mut nodes, "disabled", soon()).unwrap();
    // Disabled: failures run and trip nothing anywhere.
    assert_eq!(nodes[0].cmd("fail"), "ok disabled");
    assert_eq!(nodes[0].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    assert_eq!(redis.hget("{manual:payments}", "state"), "closed");
}

#[test]
fn a_redis_cli_override_reaches_every_instance() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("ops") else {
        return;
    };
    let mut nodes = nodes(&redis.url(), "ops", 3);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/src/record.lua");
    // The documented override (docs/fleet.md): the script itself, mode `force`.
    let set = |state: &str| {
        redis.cli(&[
            "--eval",
            script,
            "{ops:payments}",
            ",",
            "force",
            "",
            state,
            "0",
            "0",
            "operator override",
            "",
            "redis-cli",
            "ops:changes",
            "payments",
        ])
    };
    let out = set("forced_open");
    assert!(out.starts_with('1'), "{out}");
    all_reach(&mut nodes, "forced-open", soon()).unwrap();
    set("closed");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    // And the instances go on: a trip after the override opens them all.
    assert_eq!(nodes[1].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
}

#[test]
fn simultaneous_trips_make_one_record_and_every_instance_takes_it() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("race") else {
        return;
    };
    let mut nodes = nodes(&redis.url(), "race", 4);
    for round in 0..5 {
        // Four trips at once: each instance's write compares the epoch it last saw.
        for node in nodes.iter_mut() {
            node.send("fail");
        }
        for node in nodes.iter_mut() {
            // Tripped here, or already opened by another's trip.
            let answer = node.answer();
            assert!(
                answer == "ok open" || answer == "rejected open",
                "round {round}: {answer}"
            );
        }
        all_reach(&mut nodes, "open", soon()).unwrap();
        // Every instance ends on the record's epoch: a resync changes nothing more.
        for node in nodes.iter_mut() {
            assert_eq!(node.cmd("resync"), "resync true");
        }
        let origin = redis.hget("{race:payments}", "origin");
        assert!(origin.starts_with("node-"), "{origin}");
        let pushed: u64 = nodes.iter_mut().map(|n| n.status().1).sum();
        assert_eq!(
            pushed,
            2 * round + 1,
            "round {round}: exactly one trip written"
        );
        assert_eq!(nodes[0].cmd("reset"), "ok");
        all_reach(&mut nodes, "closed", soon()).unwrap();
        // A resync runs after every write the node's task had to make: the counts are final.
        for node in nodes.iter_mut() {
            assert_eq!(node.cmd("resync"), "resync true");
        }
        let pushed: u64 = nodes.iter_mut().map(|n| n.status().1).sum();
        assert_eq!(pushed, 2 * round + 2);
    }
}

#[test]
fn a_misspelt_fleet_key_stops_the_node_with_did_you_mean() {
    let _shared = crate::support::shared();
    let dir = tempdir();
    let path = dir.join("misspelt.toml");
    std::fs::write(
        &path,
        "[fleet]\nurl = \"redis://127.0.0.1:1/\"\nshares = [\"pay*\"]\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fleet_node"))
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(":3: [fleet] unknown key `shares`; did you mean `share`?"),
        "{err}"
    );
}

#[test]
fn instances_started_before_the_store_decide_alone_then_converge_when_it_starts() {
    // Alone, as the fault tests: its bound is real time on a machine the others would load.
    let _alone = crate::support::alone();
    let Some(bin) = redis_server() else { return };
    let mut redis = Redis::start(&bin, &[]);
    let url = redis.url();
    redis.kill();
    let dir = tempdir();
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| {
            let name = format!("node-{i}");
            Node::start(&config(&dir, &url, "late", &name), &name)
        })
        .collect();
    assert_eq!(
        nodes[0].cmd("fail"),
        "ok open",
        "local breaking without a store"
    );
    assert_eq!(nodes[1].state(), "closed");
    redis.restart();
    let back = Instant::now();
    all_reach(&mut nodes, "open", back + Duration::from_secs(1))
        .unwrap_or_else(|e| panic!("not converged 1 s after the store started: {e}"));
    assert_eq!(redis.hget("{late:payments}", "origin"), "node-0");
}

#[test]
fn after_the_open_time_exactly_half_open_calls_probes_run_fleet_wide() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("lease") else {
        return;
    };
    // Two probe slots (so two leases fleet-wide, one probe each), one success to close, and
    // leases that outlive the test.
    let keys = "failures = 1\nopen_for = \"300ms\"\nhalf_open_calls = 2\nsuccesses = 1\nprobe_timeout = \"60s\"\n";
    let mut nodes = nodes_with(&redis.url(), "lease", 4, keys);
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    // Once the fleet's open time has run out, the two leases are taken: every free one goes
    // to the first instance to ask.
    let leases = "{lease:payments}:probes";
    let deadline = soon();
    while redis.cli(&["ZCARD", leases]) != "2" {
        assert!(Instant::now() < deadline, "no two leases");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Both to one process, which runs one probe per lease while the others reject: two
    // fleet-wide, exactly. The probes succeed: the holder closes, and so the fleet, and the
    // leases are dropped.
    let members = redis.cli(&["ZRANGE", leases, "0", "-1"]);
    probes_through_two_leases(&mut nodes, &members.lines().collect::<Vec<_>>());
    assert_eq!(
        redis.cli(&["EXISTS", leases]),
        "0",
        "the close drops the leases"
    );
}

#[test]
fn the_fleets_summed_failures_trip_it_when_no_instance_alone_sees_min_calls() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("counts") else {
        return;
    };
    // 50% over 10 s from 10 calls: each of three instances sees 4 failures, under min_calls.
    let keys = "failure_rate = 50\nwindow = \"10s\"\nmin_calls = 10\nopen_for = \"60s\"\n";
    let mut nodes = nodes_with(&redis.url(), "counts", 3, keys);
    // Counts are the fleet's from the moment a node shares the breaker: once it has read the
    // record (its first resync, which finds the registry's breaker first).
    for node in nodes.iter_mut() {
        node.wait_resync(soon());
    }
    // Under min_calls here: no node trips alone. The fleet's counts may trip it a batch after
    // node-2's second failure (10 calls), before its last ones: those are rejected.
    for node in nodes.iter_mut() {
        for _ in 0..4 {
            let answer = node.cmd("fail");
            assert!(
                answer == "ok closed" || answer == "rejected open",
                "{}: under min_calls here: {answer}",
                node.name
            );
        }
    }
    // Within a batch or two (100 ms each), the fleet's 12 failures trip every instance.
    all_reach(&mut nodes, "open", soon()).unwrap();
    let reason = redis.hget("{counts:payments}", "reason");
    assert_eq!(reason, "fleet failure rate 100%");
}

/// The fleet's summed counts of `prefix`'s `payments`, kept in its record: `(calls, epoch the
/// counts belong to)`.
fn fleet_counts(redis: &Redis, prefix: &str) -> (u64, String) {
    let all = redis.cli(&["HGETALL", &format!("{{{prefix}:payments}}")]);
    let lines: Vec<&str> = all.lines().collect();
    let mut calls = 0;
    let mut epoch = String::new();
    for pair in lines.chunks(2) {
        match pair {
            [field, value] if *field == "counts_epoch" => epoch = value.to_string(),
            [field, value] if field.ends_with(":c") => calls += value.parse::<u64>().unwrap(),
            _ => {}
        }
    }
    (calls, epoch)
}

#[test]
fn a_reset_clears_the_fleets_counts_so_failures_from_before_it_do_not_trip_it_again() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("countreset") else {
        return;
    };
    // 50% over 10 s from 3 calls.
    let keys = "failure_rate = 50\nwindow = \"10s\"\nmin_calls = 3\nopen_for = \"60s\"\n";
    let mut nodes = nodes_with(&redis.url(), "countreset", 2, keys);
    for node in nodes.iter_mut() {
        node.wait_resync(soon());
    }
    // Two calls, one failed, reach the fleet's counts; the third (a failure) trips node-0.
    assert_eq!(nodes[0].cmd("succeed"), "ok closed");
    assert_eq!(nodes[0].cmd("fail"), "ok closed");
    let deadline = soon();
    while fleet_counts(&redis, "countreset").0 < 2 {
        assert!(
            Instant::now() < deadline,
            "the batch never reached the store"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    // A reset from the other instance closes the fleet...
    assert_eq!(nodes[1].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    let reset = redis.hget("{countreset:payments}", "epoch");
    assert_eq!(redis.hget("{countreset:payments}", "reason"), "reset");
    // ...and one failure after it is one call of three needed: no trip. Counted with the
    // failures from before the reset (2 of 3, or 3 of 4, calls failed), it would trip.
    assert_eq!(nodes[1].cmd("fail"), "ok closed");
    let deadline = soon();
    loop {
        let state = redis.hget("{countreset:payments}", "state");
        let (calls, epoch) = fleet_counts(&redis, "countreset");
        if state != "closed" || (epoch == reset && calls >= 1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node-1's batch never reached the store"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        redis.hget("{countreset:payments}", "state"),
        "closed",
        "re-tripped by counts from before the reset: {}",
        redis.hget("{countreset:payments}", "reason")
    );
    assert_eq!(fleet_counts(&redis, "countreset"), (1, reset));
    for node in nodes.iter_mut() {
        assert_eq!(node.state(), "closed", "{}", node.name);
    }
}

/// The commands Redis counts (`INFO commandstats`, the scripts' own commands included), but
/// the `INFO` and `CONFIG RESETSTAT` that read them.
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

#[test]
fn a_count_batch_costs_redis_four_commands_and_any_record_write_empties_the_window() {
    let _shared = crate::support::shared();
    let Some(bin) = redis_server() else { return };
    // Its own server: commandstats count every client's commands.
    let redis = Redis::start(&bin, &[]);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/");
    let (record, count) = (format!("{dir}record.lua"), format!("{dir}count.lua"));
    let key = "{cost:payments}";
    let write = |state: &str, reason: &str| {
        let out = redis.cli(&[
            "--eval",
            &record,
            key,
            ",",
            "force",
            "",
            state,
            "0",
            "0",
            reason,
            "",
            "redis-cli",
            "cost:changes",
            "payments",
        ]);
        assert!(out.starts_with('1'), "{out}");
        redis.hget(key, "epoch")
    };
    // A batch as an instance sends it: 1000 calls, `failed` of them failed, judged under
    // `epoch`; 50% over a window of 1000 s (buckets of 100 s: none leaves the window here),
    // from 10 calls. Returns the script's reply: tripped, the window's calls and failures.
    let batch = |failed: &str, epoch: &str| {
        let out = redis.cli(&[
            "--eval",
            &count,
            key,
            ",",
            "1000",
            failed,
            "1000000",
            "100000",
            "10",
            "50",
            "60000",
            "node-0",
            "cost:changes",
            "payments",
            epoch,
        ]);
        out.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let first = write("closed", "reset");
    assert_eq!(redis.cli(&["CONFIG", "RESETSTAT"]), "OK");
    for i in 1..=10 {
        assert_eq!(batch("0", &first), ["0", &(i * 1000).to_string(), "0"]);
    }
    // Each: the script call, TIME, HGETALL and HSET of the record.
    assert_eq!(commands(&redis), 40);
    // The documented redis-cli override writes the record, and knows nothing of the counts:
    // the 10 000 calls counted under the old record do not count under the new one.
    let second = write("closed", "operator reset");
    assert_ne!(first, second);
    assert_eq!(
        batch("400", &first),
        ["0", "0", "0"],
        "judged under the old record"
    );
    assert_eq!(batch("400", &second), ["0", "1000", "400"]);
    // 600 failures of 2000 calls more: the fleet's 1000 of 2000 trip the record.
    assert_eq!(batch("600", &second), ["1", "2000", "1000"]);
    assert_eq!(redis.hget(key, "state"), "open");
    assert_eq!(redis.hget(key, "reason"), "fleet failure rate 50%");
    // The trip leaves the record's own fields, without counts.
    let fields = redis.cli(&["HKEYS", key]);
    let mut fields: Vec<&str> = fields.lines().collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "changed_at",
            "epoch",
            "last_failure",
            "open_until",
            "origin",
            "reason",
            "reopens",
            "state"
        ]
    );
}
