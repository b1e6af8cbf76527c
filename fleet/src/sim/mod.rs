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
//! `BREAKERBOX_SIM_SEEDS` (default 200) sets how many seeds the test runs, from
//! `BREAKERBOX_SIM_FIRST` (default 0); `scripts/test` runs 10 000.

mod conformance;
mod harness;
mod interleavings;
mod model;
mod net;
mod quorum_trips;
mod scenarios;
mod world;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn replay_command(seed: u64) -> String {
    format!("BREAKERBOX_SIM_SEED={seed} cargo test -p breakerbox-fleet --lib sim:: -- --nocapture")
}

/// A breaker that trips again locally while its operator's reset is still waiting to be
/// written (the store stopped meanwhile), its open time running out before the store answers:
/// the reset is written first, then the trip (with no open time left), so the fleet's record
/// reads open and the instances probe through their leases, never half-open against a closed
/// record.
#[test]
fn a_local_trip_made_while_a_reset_is_pending_reaches_the_fleet() {
    let report = world::run(3817, false);
    assert!(
        report.violations.is_empty(),
        "seed 3817:\n  {}",
        report.violations.join("\n  ")
    );
}

#[test]
fn the_fleet_keeps_its_invariants_under_seeded_faults() {
    if let Some(seed) = env_u64("BREAKERBOX_SIM_SEED") {
        let report = world::run(seed, true);
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
    let count = env_u64("BREAKERBOX_SIM_SEEDS").unwrap_or(200);
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
                    let report = world::run(seed, false);
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
                replay_command(*seed)
            ));
        }
        panic!("{text}");
    }
}
