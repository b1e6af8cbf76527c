//! Instances in one process for the production-setup tests (`tls`, `sentinel`, `cluster`):
//! several fleets, each with its own breakers of the shared names, stand for several processes.
#![allow(dead_code)]

use std::time::Duration;

use breakerbox_fleet::{Fleet, FleetConfig};
use breakerbox_runtime::{Breaker, Config, State};

use crate::servers::poll;

/// Opens on one failure, for a minute: a trip stays until something changes it.
pub fn trip_once() -> Config {
    Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(60))
        .build()
        .unwrap()
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn fail(b: &Breaker) {
    let _ = b.call(|| Err::<(), _>("boom"));
}

/// Instances of one fleet: `fleets[i]` shares `breakers[i][j]`, named `names[j]`.
pub struct Instances {
    pub fleets: Vec<Fleet>,
    pub breakers: Vec<Vec<Breaker>>,
}

impl Instances {
    pub fn connect(
        rt: &tokio::runtime::Runtime,
        n: usize,
        names: &[&str],
        config: impl Fn(usize) -> FleetConfig,
    ) -> Instances {
        let mut fleets = Vec::new();
        let mut breakers = Vec::new();
        for i in 0..n {
            let fleet = rt
                .block_on(Fleet::connect(config(i).instance(format!("i{i}"))))
                .unwrap_or_else(|e| panic!("instance {i}: {e}"));
            let mine: Vec<Breaker> = names
                .iter()
                .map(|name| Breaker::new(*name, trip_once()))
                .collect();
            for b in &mine {
                fleet.share(b);
            }
            fleets.push(fleet);
            breakers.push(mine);
        }
        Instances { fleets, breakers }
    }

    /// Every instance's breaker `j` in `want`, within `limit`.
    pub fn all(&self, j: usize, want: State, limit: Duration) {
        poll(
            &format!("every instance's breaker {j} {want:?}"),
            limit,
            || self.breakers.iter().all(|b| b[j].state() == want),
        );
    }
}
