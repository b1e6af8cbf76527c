//! The fleet's deterministic simulator.
//!
//! Several instances run the production fleet code (`Fleet`, its task with its ordering rules,
//! leases, counts, holds, give-back and resync, and the three Lua scripts themselves) against
//! a model store, on one current-thread tokio runtime with paused time. Every source of
//! nondeterminism is behind a seam: the store (`net.rs`, a `Wire`), time (tokio's paused
//! clock, which the breakers read too), and one seed that chooses every delay, fault and call.
//! `world.rs` has the run and its invariants; a failing seed replays exactly, with a
//! step-by-step trace:
//!
//! ```text
//! BREAKERBOX_SIM_SEED=<seed> cargo test -p breakerbox-fleet --lib sim:: -- --nocapture
//! ```
//!
//! `BREAKERBOX_SIM_SEEDS` (default 200) sets how many seeds each of the two seeded tests runs
//! (the single breakers' world, `world.rs`, and the keyed family's, `keyed.rs`), from
//! `BREAKERBOX_SIM_FIRST` (default 0); `BREAKERBOX_SIM_KEYED_SEEDS`, if set, the keyed
//! family's alone (each of its seeds costs about 2.5 of the other's). `scripts/test` runs
//! 10 000 and 5 000.

mod conformance;
mod harness;
mod interleavings;
mod keyed;
mod keyed_scenarios;
mod model;
mod net;
mod quorum_trips;
mod scenarios;
mod setup;
mod world;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn replay_command(seed: u64, test: &str) -> String {
    format!(
        "BREAKERBOX_SIM_SEED={seed} cargo test -p breakerbox-fleet --lib sim::{test} -- --nocapture"
    )
}

/// A breaker that trips again locally while its operator's reset is still waiting to be
/// written (the store stopped meanwhile), its open time running out before the store answers:
/// the reset is written first, then the trip (with no open time left), so the fleet's record
/// reads open and the instances probe through their leases, never half-open against a closed
/// record.
#[test]
fn a_local_trip_made_while_a_reset_is_pending_reaches_the_fleet() {
    keeps_its_invariants("seed", world::run(3817, false));
}

/// Fails with `report`'s violations, named after the seed `what` ran, if it has any.
fn keeps_its_invariants(what: &str, report: world::Report) {
    assert!(
        report.violations.is_empty(),
        "{what}:\n  {}",
        report.violations.join("\n  ")
    );
}

/// A key evicted on an instance while the fleet's probe of it is due: the task drops that
/// probe, rather than finding it due again at once, for ever (on paused time the run would
/// never end; in a service, the task would spin).
#[test]
fn a_key_evicted_while_its_probe_is_due_leaves_the_fleet_task_idle() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(keyed::run(1, false));
    });
    let report = rx
        .recv_timeout(core::time::Duration::from_secs(120))
        .expect("keyed seed 1 ends: no fleet task spins");
    keeps_its_invariants("keyed seed 1", report);
}

/// Keys left open and then uncalled (no call comes to probe them): once a key's record
/// expires, its open time long run, no instance writes it again; the store keeps nothing of
/// them at the end.
#[test]
fn an_open_key_no_one_calls_leaves_no_record_behind_once_its_open_time_has_run() {
    let report = keyed::run(1, false);
    let memory: Vec<&String> = report
        .violations
        .iter()
        .filter(|v| v.starts_with("memory"))
        .collect();
    assert!(memory.is_empty(), "keyed seed 1: {memory:#?}");
}

/// An instance evicts a key forced open in the fleet, makes it again (it takes the forced
/// record from what the fleet keeps), and is cut off while the fleet resets the key and the
/// closed record expires: back, it finds no record, and writes its forced-open state again as
/// after a `FLUSHALL` (the documented outage longer than `key_ttl`), so every instance holds
/// the same state: it does not stay forced open alone because it had read no record of its
/// own.
#[test]
fn a_key_made_from_the_fleets_record_is_written_again_when_that_record_vanishes() {
    keeps_its_invariants("keyed seed 8254", keyed::run(8254, false));
}

/// An instance's key trips while the store is stopped, its open time runs, and a sweep
/// evicts it; the next call makes the key again, closed. When the store answers, the trip
/// still waiting to be written is the evicted breaker's, not the key's any more: it is judged
/// by the breaker the family holds now (closed: nothing to write), so no open record with no
/// time left is written over the closes of the fleet's probes.
#[test]
fn a_trip_of_an_evicted_key_is_not_written_over_the_fleets_closes() {
    keeps_its_invariants("keyed seed 7179", keyed::run(7179, false));
}

/// Under a quorum of 2, a key's open record expires; a restarted instance reports the key
/// open over no record, and another, whose record vanished while open, reports it again:
/// two hosts of three, a quorum, so the record opens. The quorum oracle reads the store as
/// the scripts do, an expired record as none, and counts both reports.
#[test]
fn reports_over_an_expired_key_record_make_a_quorum() {
    keeps_its_invariants("keyed seed 4913", keyed::run(4913, false));
}

/// A dropped fleet's shared state can outlive it a moment (a hook on another thread holding
/// it): a key made meanwhile takes on nothing the dropped fleet knew, as in a family used again
/// by a later fleet (the simulator's reused family slots, in a two-thread batch), where it
/// would otherwise take on a forced-open record of the run before, with no record in the
/// store.
#[test]
fn a_dropped_fleet_gives_no_state_to_keys_made_after_it() {
    assert_eq!(
        keyed::a_key_made_after_its_fleet_is_dropped(),
        breakerbox_runtime::State::Closed
    );
}

#[test]
fn the_fleet_keeps_its_invariants_under_seeded_faults() {
    seeded(world::run, "the_fleet_keeps", "BREAKERBOX_SIM_SEEDS");
}

#[test]
fn a_shared_keyed_family_keeps_its_invariants_per_key_under_seeded_faults() {
    seeded(
        keyed::run,
        "a_shared_keyed_family",
        "BREAKERBOX_SIM_KEYED_SEEDS",
    );
}

/// Runs the seeds the environment asks for (see the module's doc) of `run`, the test `test`:
/// as many as the variable `count_var` says, else `BREAKERBOX_SIM_SEEDS`.
fn seeded(run: fn(u64, bool) -> world::Report, test: &str, count_var: &str) {
    if let Some(seed) = env_u64("BREAKERBOX_SIM_SEED") {
        let report = run(seed, true);
        for line in &report.trace {
            println!("{line}");
        }
        assert!(
            report.violations.is_empty(),
            "seed {seed}:\n  {}",
            report.violations.join("\n  ")
        );
        return;
    }
    let first = env_u64("BREAKERBOX_SIM_FIRST").unwrap_or(0);
    let count = env_u64(count_var)
        .or_else(|| env_u64("BREAKERBOX_SIM_SEEDS"))
        .unwrap_or(200);
    let next = AtomicU64::new(first);
    let failed = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= first + count {
                        return;
                    }
                    let report = run(seed, false);
                    if !report.violations.is_empty() {
                        failed.lock().unwrap().push((seed, report.violations));
                    }
                }
            });
        }
    });
    let mut failed = failed.into_inner().unwrap();
    failed.sort();
    if !failed.is_empty() {
        let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
        for (_, violations) in &failed {
            for v in violations {
                *kinds
                    .entry(v.split(':').next().unwrap_or_default())
                    .or_default() += 1;
            }
        }
        let mut text = format!(
            "{} of {count} seeds failed ({kinds:?}); the first:\n",
            failed.len()
        );
        for (seed, violations) in failed.iter().take(8) {
            text.push_str(&format!(
                "seed {seed}: {}\n  replay: {}\n",
                violations
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
                replay_command(*seed, test)
            ));
        }
        panic!("{text}");
    }
}
