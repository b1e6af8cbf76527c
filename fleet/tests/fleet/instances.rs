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

/// Trip propagation among `fleet`'s instances for breaker `j`, over `rounds` trip–reset
/// rounds: from instance 0's own open event to each other instance's imported one, in this
/// process (one clock). `(p50, p99, max)`. A measurement: it asserts only that every round went
/// through.
pub fn propagation(fleet: &Instances, j: usize, rounds: usize) -> (Duration, Duration, Duration) {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;
    let opened: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
    for (i, b) in fleet.breakers.iter().enumerate() {
        let opened = opened.clone();
        b[j].on_state_change(move |e| {
            if e.to == State::Open {
                opened.lock().unwrap().push((i, Instant::now()));
            }
        });
    }
    let n = fleet.breakers.len();
    let mut delays = Vec::with_capacity(rounds * (n - 1));
    for _ in 0..rounds {
        opened.lock().unwrap().clear();
        fail(&fleet.breakers[0][j]);
        poll("every instance open", Duration::from_secs(10), || {
            let seen = opened.lock().unwrap();
            (1..n).all(|i| seen.iter().any(|(k, _)| *k == i))
        });
        let seen = opened.lock().unwrap().clone();
        let start = seen.iter().find(|(k, _)| *k == 0).unwrap().1;
        for i in 1..n {
            let at = seen.iter().find(|(k, _)| *k == i).unwrap().1;
            delays.push(at.saturating_duration_since(start));
        }
        fleet.breakers[0][j].reset();
        fleet.all(j, State::Closed, Duration::from_secs(10));
    }
    delays.sort();
    let at = |q: f64| delays[((delays.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), *delays.last().unwrap())
}
