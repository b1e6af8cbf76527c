//! What the scripted scenarios share (`scenarios.rs`, `interleavings.rs`): a cluster of instances on
//! the model store, each behind a store whose hooks can land a user's action or a fault as one
//! chosen request leaves the task, and the paused runtime they run on.

use core::time::Duration;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use redis::{RedisResult, Value};
use tokio::time::Instant;

use super::model::Val;
use super::net::{Net, NetRef, SimStore};
use super::world::SimClock;
use crate::store::{Reply, Script, Wire};
use crate::{Fleet, FleetConfig, OnStoreError};
use breakerbox_runtime::{Breaker, Config, State};

pub(super) const PREFIX: &str = "sim";

pub(super) fn paused<F: core::future::Future<Output = ()>>(scenario: impl FnOnce() -> F) {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(scenario());
}

/// Run as a script call leaves the task (script, keys, args); `true` when it has done its
/// work and is to be removed.
pub(super) type Hook = Box<dyn FnMut(Script, &[String], &[String]) -> bool + Send>;
pub(super) type HookSlot = Arc<Mutex<Option<Hook>>>;

pub(super) struct Hooked {
    pub(super) inner: SimStore,
    pub(super) hook: HookSlot,
    /// Run as a `PING` leaves the task; `true` when done.
    pub(super) ping_hook: PingSlot,
}

pub(super) type PingSlot = Arc<Mutex<Option<Box<dyn FnMut() -> bool + Send>>>>;

impl Wire for Hooked {
    fn eval(&mut self, script: Script, keys: Vec<String>, args: Vec<String>) -> Reply<'_, Value> {
        let hook = self.hook.lock().unwrap().take();
        if let Some(mut hook) = hook
            && !hook(script, &keys, &args)
        {
            *self.hook.lock().unwrap() = Some(hook);
        }
        self.inner.eval(script, keys, args)
    }
    fn pipeline(&mut self, commands: Vec<Vec<String>>) -> Reply<'_, Vec<RedisResult<Value>>> {
        self.inner.pipeline(commands)
    }
    fn ping(&mut self) -> Reply<'_, ()> {
        let hook = self.ping_hook.lock().unwrap().take();
        if let Some(mut hook) = hook
            && !hook()
        {
            *self.ping_hook.lock().unwrap() = Some(hook);
        }
        self.inner.ping()
    }
    fn subscribe(&mut self, channel: String) -> Reply<'_, ()> {
        self.inner.subscribe(channel)
    }
}

pub(super) struct Cluster {
    pub(super) net: NetRef,
    pub(super) fleets: Vec<Option<Fleet>>,
    pub(super) breakers: Vec<Vec<Breaker>>,
    pub(super) conns: Vec<usize>,
    pub(super) hooks: Vec<HookSlot>,
    pub(super) ping_hooks: Vec<PingSlot>,
    pub(super) clock: SimClock,
}

pub(super) fn cluster(
    n: usize,
    names: &[&str],
    config: impl Fn(SimClock) -> Config,
    policy: OnStoreError,
) -> Cluster {
    cluster_with(n, names, config, |f| f.on_store_error(policy))
}

/// A cluster whose fleets' configs `fleet` finishes (prefix, instance and timeout set).
pub(super) fn cluster_with(
    n: usize,
    names: &[&str],
    config: impl Fn(SimClock) -> Config,
    fleet: impl Fn(FleetConfig) -> FleetConfig,
) -> Cluster {
    let net: NetRef = Arc::new(Mutex::new(Net::new(ChaCha8Rng::seed_from_u64(7), false)));
    let clock = SimClock(Instant::now());
    let mut c = Cluster {
        net: net.clone(),
        fleets: Vec::new(),
        breakers: Vec::new(),
        conns: Vec::new(),
        hooks: Vec::new(),
        ping_hooks: Vec::new(),
        clock,
    };
    for k in 0..n {
        c.start(k, names, &config, &fleet);
    }
    c
}

impl Cluster {
    /// Starts instance `k` (as the process on host `i{k}`, named as the fleet names it there
    /// by default), or starts it again in its place.
    fn start(
        &mut self,
        k: usize,
        names: &[&str],
        config: &impl Fn(SimClock) -> Config,
        fleet: &impl Fn(FleetConfig) -> FleetConfig,
    ) {
        let net = self.net.clone();
        let (conn, pushes) = net.lock().unwrap().connect();
        let hook: HookSlot = Arc::new(Mutex::new(None));
        let ping_hook: PingSlot = Arc::new(Mutex::new(None));
        let store = Hooked {
            ping_hook: ping_hook.clone(),
            inner: SimStore {
                id: conn,
                net: net.clone(),
            },
            hook: hook.clone(),
        };
        let fleet = Fleet::with_store(
            fleet(
                FleetConfig::new("redis://sim/")
                    .prefix(PREFIX)
                    .instance(crate::handle::instance_on(&format!("i{k}")))
                    .timeout(Duration::from_millis(100)),
            ),
            Box::new(store),
            pushes,
            &tokio::runtime::Handle::current(),
        );
        let own: Vec<Breaker> = names
            .iter()
            .map(|name| Breaker::new(*name, config(self.clock.clone())))
            .collect();
        for b in &own {
            fleet.share(b);
        }
        if k < self.fleets.len() {
            self.fleets[k] = Some(fleet);
            self.breakers[k] = own;
            self.conns[k] = conn;
            self.hooks[k] = hook;
            self.ping_hooks[k] = ping_hook;
        } else {
            self.fleets.push(Some(fleet));
            self.breakers.push(own);
            self.conns.push(conn);
            self.hooks.push(hook);
            self.ping_hooks.push(ping_hook);
        }
    }

    /// Instance `k`'s process dies (no goodbye: its task stops, its connection goes dead, its
    /// heartbeat and reports stay in the store until they expire) and a new one starts on its
    /// host, with new breakers.
    pub(super) fn restart(
        &mut self,
        k: usize,
        names: &[&str],
        config: impl Fn(SimClock) -> Config,
        fleet: impl Fn(FleetConfig) -> FleetConfig,
    ) {
        if let Some(old) = self.fleets[k].take() {
            old.task.abort();
            core::mem::forget(old);
        }
        self.net.lock().unwrap().conns[self.conns[k]].dead = true;
        self.start(k, names, &config, &fleet);
    }

    pub(super) fn key(name: &str) -> String {
        format!("{{{PREFIX}:{name}}}")
    }

    pub(super) fn put(&self, name: &str, value: Val) {
        let net = self.net.lock().unwrap();
        net.model
            .space
            .lock()
            .unwrap()
            .keys
            .insert(Self::key(name).into_bytes(), (value, None));
    }

    pub(super) fn delete(&self, name: &str) {
        let net = self.net.lock().unwrap();
        net.model
            .space
            .lock()
            .unwrap()
            .keys
            .remove(Self::key(name).as_bytes());
    }

    pub(super) fn record_state(&self, name: &str) -> Option<String> {
        let net = self.net.lock().unwrap();
        let space = net.model.space.lock().unwrap();
        match space.keys.get(Self::key(name).as_bytes()) {
            Some((Val::Hash(h), _)) => h
                .get(b"state".as_slice())
                .map(|s| String::from_utf8_lossy(s).into_owned()),
            _ => None,
        }
    }

    pub(super) fn record_field(&self, name: &str, field: &str) -> Option<String> {
        let net = self.net.lock().unwrap();
        let space = net.model.space.lock().unwrap();
        match space.keys.get(Self::key(name).as_bytes()) {
            Some((Val::Hash(h), _)) => h
                .get(field.as_bytes())
                .map(|s| String::from_utf8_lossy(s).into_owned()),
            _ => None,
        }
    }

    pub(super) fn states(&self, j: usize) -> Vec<State> {
        self.breakers.iter().map(|b| b[j].state()).collect()
    }

    pub(super) fn hook(&self, k: usize, hook: Hook) {
        *self.hooks[k].lock().unwrap() = Some(hook);
    }
}

pub(super) fn consecutive(failures: u32) -> impl Fn(SimClock) -> Config {
    move |clock| {
        Config::builder()
            .failures(failures)
            .open_for(Duration::from_secs(60))
            .clock(clock)
            .build()
            .unwrap()
    }
}

pub(super) fn fail(b: &Breaker) {
    let _ = b.call(|| Err::<(), _>("down"));
}
