//! What the two seeded worlds (`world.rs`, single breakers; `keyed.rs`, a keyed family) set up
//! alike: the paused runtime a run takes, a seed's first choices and the network, and an
//! instance's fleet config. What is drawn here is drawn from the seed's generator in the order
//! the worlds draw it, so that each seed runs one scenario, always the same.

use core::time::Duration;
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::net::{Net, NetRef, Oracle};
use crate::{FleetConfig, FleetTrip, OnStoreError, Quorum};

/// The prefix of the fleet's keys in the model store.
pub(super) const PREFIX: &str = "sim";

/// A current-thread runtime on paused time: a run's delays are its seed's, not the machine's.
pub(super) fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime")
}

/// A seed's first choices, the same in both worlds but for the odds of a quorum.
pub(super) struct Setup {
    /// How many instances: 2 to 4.
    pub(super) n: usize,
    /// What the shared breakers do while the store is unreachable.
    pub(super) policy: OnStoreError,
    /// Whether a fault plan runs (4 seeds in 5).
    pub(super) faulty: bool,
    /// The quorum the trips wait for, if they wait for one.
    pub(super) quorum: Option<Quorum>,
}

impl Setup {
    /// Draws a seed's first choices from its generator, the quorum as the world's `quorum`
    /// draws it.
    pub(super) fn draw(
        rng: &mut ChaCha8Rng,
        quorum: fn(&mut ChaCha8Rng) -> Option<Quorum>,
    ) -> Setup {
        let n = rng.random_range(2..=4);
        let policy = match rng.random_range(0..3) {
            0 => OnStoreError::Local,
            1 => OnStoreError::Open,
            _ => OnStoreError::Closed,
        };
        let faulty = rng.random_bool(0.8);
        let quorum = quorum(rng);
        Setup {
            n,
            policy,
            faulty,
            quorum,
        }
    }

    /// The simulated network, its dice seeded from the seed's generator; its trace opens with
    /// these choices (`run`: which world's seed, and `seed`), and under a quorum an oracle
    /// watches the records open.
    pub(super) fn net(&self, rng: &mut ChaCha8Rng, tracing: bool, run: &str, seed: u64) -> NetRef {
        let net: NetRef = Arc::new(Mutex::new(Net::new(
            ChaCha8Rng::seed_from_u64(rng.random()),
            tracing,
        )));
        net.lock().unwrap().note(|| {
            format!(
                "{run} {seed}: {} instances, on_store_error {:?}, faults {}, quorum {:?}",
                self.n, self.policy, self.faulty, self.quorum
            )
        });
        if let Some(q) = self.quorum {
            net.lock().unwrap().oracle = Some(Oracle::new(q));
        }
        net
    }
}

/// The fleet config of instance `k`, the process on host `i{k}`, on the model store: named as
/// the fleet names an instance there by default, so that a process started again on its host
/// has that host's name (the oracle, if any, told the host), its store operations timed out
/// after 100 ms, its trips waiting for `quorum` if one is given.
pub(super) fn fleet_config(
    net: &NetRef,
    k: usize,
    policy: OnStoreError,
    quorum: Option<Quorum>,
) -> FleetConfig {
    let host = format!("i{k}");
    let name = crate::handle::instance_on(&host);
    if let Some(oracle) = net.lock().unwrap().oracle.as_mut() {
        oracle.hosts.insert(name.clone(), host);
    }
    let config = FleetConfig::new("redis://sim/")
        .prefix(PREFIX)
        .instance(name)
        .timeout(Duration::from_millis(100))
        .on_store_error(policy);
    match quorum {
        Some(q) => config.fleet_trip(FleetTrip::Quorum(q)),
        None => config,
    }
}
