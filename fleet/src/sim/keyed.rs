//! One simulated run of a keyed family shared by the fleet: several instances, each with the
//! registry family `hosts` of its own process, its keys tripping, reset and forced by hand,
//! evicted and made again, under store outages, partitions and restarts.
//!
//! The instances run the production code end to end: the runtime's registry family (with the
//! fleet's new-key hook and registry listener), the fleet's task with its per-key records,
//! open-key lists and expiry, and the scripts on the model store. One process holds every
//! instance, so each instance's family is the registry family `hosts@<slot>`, which its fleet
//! shares as `hosts` (`Inner::family_suffix`); a slot's family is emptied and used again by a
//! later run, so that the registry holds a few families however many seeds run.
//!
//! A run (12.5 s of simulated time):
//! - 0–8 s: callers on every instance call the hot keys and a stream of short-lived keys, the
//!   services behind the hot keys fail and recover, keys go uncalled for a while here and
//!   there (a sweep evicts them; the next call makes them again), an operator resets, forces
//!   open, disables or trips a key on one instance through the registry's per-key controls;
//!   for most seeds a fault plan from 0.5 s to 7 s: network weather, partitions of one
//!   instance and store outages (shorter and longer than `key_ttl`), restarts;
//! - 8 s: every fault healed, traffic stops; 12.5 s: the end.
//!
//! Invariants, per key, checked every 100 ms:
//! - **agree**: once the store has been reachable for `SETTLE` with no fault, a key's record
//!   unchanged for `BOUND` (the propagation bound) holds on every instance holding the key
//!   whose own state has not changed meanwhile: open (the record's open time left) means
//!   open, a reset (closed) means closed, forced open and disabled mean the same; a record
//!   whose open time has run leaves open or half-open (its probe next); no record (expired)
//!   leaves closed, half-open, or open with no time left. Under a quorum a closed record
//!   allows a key open alone here, for its own open time at most. The two documented limits
//!   (docs/fleet.md) are records like any other here, which every instance must then hold: a
//!   trip written over a reset it raced briefly reopens the key, and an instance cut off for
//!   longer than `key_ttl` writes a key it holds open or forced open again when it is back,
//!   over the closed record that expired meanwhile;
//! - **born**: in the same conditions, a key made on an instance while its record is open
//!   (unchanged for `BOUND`) is open before its first call;
//! - **stuck**: no instance holds a key open (time left) past the fleet's next probe: the
//!   record's open time and two probe timeouts (the first prober's lease, then this one's
//!   hold while it waits its turn), or with no open record, a key's own open time;
//! - **memory**: every key of the family in the store expires (a closed record within
//!   `key_ttl` of its write, an open one within its open time, probe timeout and `key_ttl`),
//!   but the records forced open or disabled and the list of open keys; at the end, once every
//!   key has closed or expired, the store holds nothing of the family but those;
//! - **quorum** (`Oracle`, per key record): a key opens from closed by a quorum of hosts only;
//! - **tasks**: no fleet task ends while its `Fleet` is alive.

use breakerbox_runtime::__integrations::BreakerExt;
use core::time::Duration;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::{Instant, sleep};

use super::model::Val;
use super::net::{Net, NetRef, SimStore, Weather};
use super::setup::{PREFIX, Setup, fleet_config, paused_runtime};
use crate::keys::{key_name, open_set_key, record_key};
use crate::{Fleet, FleetConfig, OnStoreError, Quorum};
use breakerbox_runtime::{BreakerMap, Clock, Config, Outcome, State, registry};

pub(super) const FAMILY: &str = "hosts";
/// The keys called all along.
const HOT: [&str; 4] = ["a.example", "b.example", "c.example", "d.example"];
const RESYNC_EVERY: Duration = Duration::from_millis(400);
const KEY_TTL: Duration = Duration::from_millis(1_200);
const OPEN_FOR: Duration = Duration::from_secs(1);
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
const IDLE_FOR: Duration = Duration::from_millis(400);
/// The propagation bound: a pass (`resync_every`), its store operations, and a step.
const BOUND: Duration = Duration::from_millis(800);
/// How long after the last fault the store is taken as settled: pending writes flushed, the
/// records re-read, the probes of a key half-open during the fault ended.
const SETTLE: Duration = Duration::from_millis(1_500);
const FAULTS_FROM: Duration = Duration::from_millis(500);
const FAULTS_UNTIL: Duration = Duration::from_secs(7);
const HEAL_AT: Duration = Duration::from_secs(8);
/// Every open time, probe timeout and `key_ttl` has run since the heal (and the last call).
const END_AT: Duration = Duration::from_millis(12_500);
const STEP: Duration = Duration::from_millis(100);
/// Slack for the store's millisecond clock against the breakers'.
const EPS: Duration = Duration::from_millis(5);

thread_local! {
    /// The run on this thread: its runtime's start, and the families' time then.
    static RUN: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
    /// The families' time at the end of this thread's last run: the next run starts after it.
    static HIGH: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    /// This thread's family slots no run holds (their families hold no key). A slot is used
    /// again on its thread only, whose runs follow one another, so its family's clock never
    /// goes back.
    static FREE: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The families' clock: the simulation's time of the run on this thread, going on from this
/// thread's runs before (a slot's family outlives its run, and its clock must never go back).
#[derive(Clone)]
struct RunClock;

impl Clock for RunClock {
    fn now(&self) -> Duration {
        match RUN.with(Cell::get) {
            Some((origin, base)) => base + (Instant::now() - origin),
            None => HIGH.with(Cell::get),
        }
    }
}

/// The next slot never used.
static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn family_config() -> Config {
    Config::builder()
        .failures(2)
        .open_for(OPEN_FOR)
        .half_open_calls(1)
        .successes(1)
        .probe_timeout(PROBE_TIMEOUT)
        .idle_for(IDLE_FOR)
        .clock(RunClock)
        .build()
        .expect("a valid config")
}

/// A free slot and its family, `hosts@<slot>` in the registry.
fn take_slot() -> (u32, BreakerMap<String>) {
    let slot = FREE
        .with(|free| free.borrow_mut().pop())
        .unwrap_or_else(|| NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let family = registry()
        .family::<String>(&format!("{FAMILY}@{slot}"), family_config)
        .expect("a family of String keys");
    (slot, family)
}

/// Empties the slots' families (their fleets dropped) and frees them: every key reset, left
/// idle, and swept. A family that keeps a key is not used again: what is said of it.
async fn free_slots(slots: Vec<(u32, BreakerMap<String>)>) -> Vec<String> {
    for (_, family) in &slots {
        let mut keys = Vec::new();
        family.for_each(|_, b| keys.push(b.clone()));
        for b in keys {
            b.reset();
        }
    }
    // A sweep takes a key called since the sweep before as called now: the second evicts.
    for _ in 0..2 {
        sleep(IDLE_FOR * 2).await;
        for (_, family) in &slots {
            family.sweep();
        }
    }
    let mut kept = Vec::new();
    for (slot, family) in slots {
        if family.is_empty() {
            FREE.with(|free| free.borrow_mut().push(slot));
        } else {
            let mut left = Vec::new();
            family.for_each(|k, b| left.push(format!("{k}: {:?}", b.export_state())));
            kept.push(format!(
                "families: {FAMILY}@{slot} holds {} keys after its run, and is not used again: {left:?}",
                family.len()
            ));
        }
    }
    kept
}

struct Inst {
    slot: u32,
    family: BreakerMap<String>,
    fleet: Option<Fleet>,
    conn: usize,
    alive: bool,
    /// Keys left uncalled here until then (so that a sweep evicts them).
    quiet: BTreeMap<String, Duration>,
}

impl Inst {
    fn registry_name(&self) -> String {
        format!("{FAMILY}@{}", self.slot)
    }
}

struct World {
    insts: Vec<Inst>,
    traffic: bool,
    healthy: [bool; HOT.len()],
    /// The short-lived keys called now: `t<n>` for n in `transient - 3 ..= transient`.
    transient: u32,
    /// Faults in progress, and when the last one ended.
    active: u32,
    quiet_since: Duration,
    quorum: Option<Quorum>,
    start: Instant,
    /// Per key: its record's (epoch, state) as last seen, and since when.
    records: BTreeMap<String, ((u64, String), Duration)>,
    /// Per instance and key: its state and `manual_changes` as last seen, and since when.
    locals: BTreeMap<(usize, String), ((State, u32), Duration)>,
    /// Every slot taken, to free at the end.
    slots: Vec<(u32, BreakerMap<String>)>,
    violations: Vec<String>,
}

impl World {
    fn now(&self) -> Duration {
        Instant::now() - self.start
    }

    /// Whether the store has answered with no fault for `SETTLE`.
    fn settled(&self) -> bool {
        self.active == 0 && self.now() >= self.quiet_since + SETTLE
    }
}

/// Runs seed `seed` of the keyed family; `tracing` keeps a step-by-step trace.
pub(super) fn run(seed: u64, tracing: bool) -> super::world::Report {
    paused_runtime().block_on(async move {
        let base = HIGH.with(Cell::get) + Duration::from_secs(1);
        RUN.with(|r| r.set(Some((Instant::now(), base))));
        let report = simulate(seed, tracing).await;
        HIGH.with(|h| h.set(RunClock.now()));
        RUN.with(|r| r.set(None));
        report
    })
}

/// Two seeds in five trip the keys under a quorum.
fn quorum(rng: &mut ChaCha8Rng) -> Option<Quorum> {
    rng.random_bool(0.4).then(|| match rng.random_range(0..3) {
        0 => Quorum::Instances(1),
        1 => Quorum::Instances(2),
        _ => Quorum::Percent(50),
    })
}

async fn simulate(seed: u64, tracing: bool) -> super::world::Report {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let setup = Setup::draw(&mut rng, quorum);
    let net = setup.net(&mut rng, tracing, "keyed seed", seed);
    let Setup {
        n,
        policy,
        faulty,
        quorum,
    } = setup;
    let start = Instant::now();
    let world = Arc::new(Mutex::new(World {
        insts: Vec::new(),
        traffic: true,
        healthy: [true; HOT.len()],
        transient: 3,
        active: 0,
        quiet_since: Duration::ZERO,
        quorum,
        start,
        records: BTreeMap::new(),
        locals: BTreeMap::new(),
        slots: Vec::new(),
        violations: Vec::new(),
    }));
    for k in 0..n {
        let inst = start_instance(&net, &world, policy, quorum, k);
        world.lock().unwrap().insts.push(inst);
    }
    for k in 0..n {
        tokio::spawn(caller(world.clone(), net.clone(), k, rng.random()));
        tokio::spawn(sweeper(world.clone(), k));
    }
    tokio::spawn(schedule(world.clone(), net.clone(), rng.random()));
    tokio::spawn(operator(world.clone(), net.clone(), rng.random()));
    if faulty {
        tokio::spawn(faults(world.clone(), net.clone(), policy, rng.random()));
    }
    let end = start + END_AT;
    let mut healed = false;
    while Instant::now() < end {
        sleep(STEP).await;
        if !healed && Instant::now() - start >= HEAL_AT {
            healed = true;
            heal(&world, &net);
        }
        check(&world, &net);
    }
    finish(&world, &net);
    if let Some(oracle) = net.lock().unwrap().oracle.as_mut() {
        let found = core::mem::take(&mut oracle.violations);
        world.lock().unwrap().violations.extend(found);
    }
    let (mut violations, insts, slots) = {
        let mut w = world.lock().unwrap();
        (
            core::mem::take(&mut w.violations),
            core::mem::take(&mut w.insts),
            core::mem::take(&mut w.slots),
        )
    };
    // Every fleet stops before its family is emptied for the next run.
    drop(insts);
    violations.extend(free_slots(slots).await);
    let trace = core::mem::take(&mut net.lock().unwrap().trace);
    super::world::Report { violations, trace }
}

fn start_instance(
    net: &NetRef,
    world: &Arc<Mutex<World>>,
    policy: OnStoreError,
    quorum: Option<Quorum>,
    k: usize,
) -> Inst {
    let (slot, family) = take_slot();
    world.lock().unwrap().slots.push((slot, family.clone()));
    let config = fleet_config(net, k, policy, quorum)
        .resync_every(RESYNC_EVERY)
        .key_ttl(KEY_TTL);
    let (fleet, conn) = slot_fleet(net, slot, config);
    net.lock()
        .unwrap()
        .note(|| format!("i{k} starts, its family {FAMILY}@{slot}"));
    Inst {
        slot,
        family,
        fleet: Some(fleet),
        conn,
        alive: true,
        quiet: BTreeMap::new(),
    }
}

/// A fleet on the network `net` sharing the family of slot `slot` (`hosts@<slot>` in the
/// registry) as `hosts`, and its connection's id.
fn slot_fleet(net: &NetRef, slot: u32, config: FleetConfig) -> (Fleet, usize) {
    let (conn, pushes) = net.lock().unwrap().connect();
    let fleet = Fleet::with_families(
        config.share(FAMILY),
        Box::new(SimStore {
            id: conn,
            net: net.clone(),
        }),
        pushes,
        &tokio::runtime::Handle::current(),
        format!("@{slot}"),
    );
    (fleet, conn)
}

/// Traffic in bursts and pauses, the hot keys' services failing and recovering, and the
/// short-lived keys moving on.
async fn schedule(world: Arc<Mutex<World>>, net: NetRef, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut next_traffic = Duration::ZERO;
    let mut next_health = [Duration::ZERO; HOT.len()];
    loop {
        {
            let mut w = world.lock().unwrap();
            let now = w.now();
            if now >= HEAL_AT {
                return;
            }
            if now >= next_traffic {
                w.traffic = !w.traffic;
                let (lo, hi) = if w.traffic {
                    (500, 3_000)
                } else {
                    (100, 1_500)
                };
                next_traffic = now + Duration::from_millis(rng.random_range(lo..hi));
            }
            for j in 0..HOT.len() {
                if now >= next_health[j] {
                    w.healthy[j] = !w.healthy[j];
                    let (lo, hi) = if w.healthy[j] {
                        (500, 3_000)
                    } else {
                        (200, 1_500)
                    };
                    next_health[j] = now + Duration::from_millis(rng.random_range(lo..hi));
                    let h = w.healthy[j];
                    net.lock()
                        .unwrap()
                        .note(|| format!("service {}: {}", HOT[j], if h { "up" } else { "down" }));
                }
            }
            if rng.random_bool(0.1) {
                w.transient += 1;
            }
        }
        sleep(Duration::from_millis(50)).await;
    }
}

/// Instance `k`'s calls: the hot keys mostly, the short-lived ones now and then.
async fn caller(world: Arc<Mutex<World>>, net: NetRef, k: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    loop {
        sleep(Duration::from_millis(rng.random_range(3..40))).await;
        let (family, key, healthy, settled) = {
            let w = world.lock().unwrap();
            if w.now() >= HEAL_AT {
                return;
            }
            let inst = &w.insts[k];
            if !w.traffic || !inst.alive {
                continue;
            }
            let (key, healthy) = if rng.random_bool(0.8) {
                let j = rng.random_range(0..HOT.len());
                (HOT[j].to_owned(), w.healthy[j])
            } else {
                let t = w.transient - rng.random_range(0..4);
                (format!("t{t}"), rng.random_bool(0.3))
            };
            if inst.quiet.get(&key).is_some_and(|&until| w.now() < until) {
                continue;
            }
            (inst.family.clone(), key, healthy, w.settled())
        };
        let made = family.get(key.as_str()).is_none();
        let permit = family.try_acquire(key.as_str());
        if made && settled {
            born(&world, &net, k, &family, &key);
        }
        let Ok(permit) = permit else {
            continue;
        };
        let lasts = Duration::from_millis(rng.random_range(1..30));
        tokio::spawn(async move {
            sleep(lasts).await;
            permit.record(if healthy {
                Outcome::Success
            } else {
                Outcome::Failure
            });
        });
    }
}

/// **born**: a key just made on instance `k` while its record is open holds it.
fn born(world: &Arc<Mutex<World>>, net: &NetRef, k: usize, family: &BreakerMap<String>, key: &str) {
    let (now_ms, records) = read_store(net);
    let Some(rec) = records.get(key) else {
        return;
    };
    let mut w = world.lock().unwrap();
    let now = w.now();
    let stable = w
        .records
        .get(key)
        .is_some_and(|((e, s), since)| *e == rec.epoch && *s == rec.state && now >= *since + BOUND);
    if !stable || rec.state != "open" || rec.open_until <= now_ms + 50 {
        return;
    }
    let Some(b) = family.get(key) else {
        return;
    };
    let state = b.state();
    if state != State::Open {
        let msg = format!(
            "born: at {:.3}s, i{k} made `{key}` {state:?} while its record is open for {} ms more",
            now.as_secs_f64(),
            rec.open_until - now_ms
        );
        net.lock().unwrap().note(|| format!("VIOLATION {msg}"));
        w.violations.push(msg);
    }
}

/// Sweeps instance `k`'s family every 100 ms: the keys idle for `idle_for` are evicted.
async fn sweeper(world: Arc<Mutex<World>>, k: usize) {
    loop {
        sleep(Duration::from_millis(100)).await;
        let family = {
            let w = world.lock().unwrap();
            if w.now() >= HEAL_AT {
                return;
            }
            if !w.insts[k].alive {
                continue;
            }
            w.insts[k].family.clone()
        };
        family.sweep();
    }
}

/// An operator's hand on one instance's key, through the registry's per-key controls (as the
/// admin's): now and then, a key left uncalled there for a while (evicted by a sweep).
async fn operator(world: Arc<Mutex<World>>, net: NetRef, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    loop {
        sleep(Duration::from_millis(rng.random_range(100..700))).await;
        let mut w = world.lock().unwrap();
        let now = w.now();
        if now >= HEAL_AT {
            return;
        }
        let k = rng.random_range(0..w.insts.len());
        if !w.insts[k].alive {
            continue;
        }
        let key = HOT[rng.random_range(0..HOT.len())];
        if rng.random_bool(0.4) {
            let d = Duration::from_millis(rng.random_range(300..2_000));
            net.lock()
                .unwrap()
                .note(|| format!("i{k} leaves `{key}` uncalled for {d:?}"));
            w.insts[k].quiet.insert(key.to_owned(), now + d);
            continue;
        }
        let name = w.insts[k].registry_name();
        drop(w);
        let what = rng.random_range(0..10);
        let done = match what {
            0..=3 => ("reset", registry().reset_key(&name, key)),
            4 | 5 => ("force_open", registry().force_open_key(&name, key)),
            6 => ("disable", registry().disable_key(&name, key)),
            _ => (
                "trip_for",
                registry().trip_key_for(
                    &name,
                    key,
                    Duration::from_millis(rng.random_range(500..2_000)),
                ),
            ),
        };
        net.lock().unwrap().note(|| {
            format!(
                "operator on i{k} `{key}`: {} ({})",
                done.0,
                if done.1.is_ok() {
                    "done"
                } else {
                    "no such key here"
                }
            )
        });
    }
}

/// Marks a fault that lasts `d`, and runs `end` when it is over.
fn for_a_while(world: &Arc<Mutex<World>>, d: Duration, end: impl FnOnce() + Send + 'static) {
    world.lock().unwrap().active += 1;
    let world = world.clone();
    tokio::spawn(async move {
        sleep(d).await;
        end();
        let mut w = world.lock().unwrap();
        w.active -= 1;
        w.quiet_since = w.now();
    });
}

/// A fault's length: shorter than `key_ttl`, or (a third of the time) longer.
fn length(rng: &mut ChaCha8Rng) -> Duration {
    if rng.random_bool(0.33) {
        Duration::from_millis(rng.random_range(1_500..3_000))
    } else {
        Duration::from_millis(rng.random_range(100..800))
    }
}

async fn faults(world: Arc<Mutex<World>>, net: NetRef, policy: OnStoreError, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    sleep(FAULTS_FROM).await;
    loop {
        sleep(Duration::from_millis(rng.random_range(200..1_200))).await;
        let (n, now) = {
            let w = world.lock().unwrap();
            (w.insts.len(), w.now())
        };
        if now >= FAULTS_UNTIL {
            return;
        }
        let k = rng.random_range(0..n);
        let d = length(&mut rng);
        match rng.random_range(0..5) {
            0 => {
                let weather = Weather::draw(&mut rng, &[5, 50, 200]);
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: weather {weather:?} for {d:?}"));
                nt.weather = weather;
                drop(nt);
                let net = net.clone();
                for_a_while(&world, d, move || {
                    net.lock().unwrap().weather = Weather::default();
                });
            }
            1 => {
                let conn = world.lock().unwrap().insts[k].conn;
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: i{k} cut off for {d:?}"));
                nt.cut(conn);
                drop(nt);
                let net = net.clone();
                for_a_while(&world, d, move || net.lock().unwrap().restore(conn));
            }
            2 | 3 => {
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: server stopped for {d:?}"));
                nt.stopped = true;
                drop(nt);
                let net = net.clone();
                for_a_while(&world, d, move || net.lock().unwrap().stopped = false);
            }
            _ => {
                // The process dies (its fleet gone, its family with it) and a new one starts
                // on its host, with a family of its own, empty.
                let mut w = world.lock().unwrap();
                if !w.insts[k].alive {
                    continue;
                }
                w.insts[k].alive = false;
                let old = w.insts[k].fleet.take();
                let conn = w.insts[k].conn;
                w.active += 1;
                drop(w);
                let back = Duration::from_millis(rng.random_range(20..300));
                {
                    let mut nt = net.lock().unwrap();
                    nt.note(|| format!("fault: i{k} killed, back in {back:?}"));
                    nt.conns[conn].dead = true;
                }
                drop(old);
                let world = world.clone();
                let net = net.clone();
                tokio::spawn(async move {
                    sleep(back).await;
                    let quorum = world.lock().unwrap().quorum;
                    let inst = start_instance(&net, &world, policy, quorum, k);
                    let mut w = world.lock().unwrap();
                    w.insts[k] = inst;
                    w.active -= 1;
                    w.quiet_since = w.now();
                });
            }
        }
    }
}

fn heal(world: &Arc<Mutex<World>>, net: &NetRef) {
    let mut nt = net.lock().unwrap();
    nt.note(|| "heal: every fault ends, traffic stops".to_owned());
    nt.heal();
    drop(nt);
    world.lock().unwrap().traffic = false;
}

/// A key's record in the model store.
struct Rec {
    epoch: u64,
    state: String,
    open_until: u64,
}

/// The model store's records of the family's keys (by key text), and the server's time (ms);
/// the keys of the family that have expired are left out.
fn read_store(net: &NetRef) -> (u64, BTreeMap<String, Rec>) {
    let nt = net.lock().unwrap();
    let (now, _) = nt.server_time();
    let space = nt.model.space.lock().unwrap();
    let mut out = BTreeMap::new();
    for key in HOT
        .iter()
        .map(|k| (*k).to_owned())
        .chain(family_keys(&space.keys, now).filter_map(|(k, _)| record_of(&k)))
    {
        let rk = record_key(PREFIX, &key_name(FAMILY, &key));
        let Some((Val::Hash(h), exp)) = space.keys.get(rk.as_bytes()) else {
            continue;
        };
        if exp.is_some_and(|e| e <= now) {
            continue;
        }
        let field = |f: &str| {
            h.get(f.as_bytes())
                .map(|v| String::from_utf8_lossy(v).into_owned())
        };
        out.insert(
            key,
            Rec {
                epoch: field("epoch").and_then(|e| e.parse().ok()).unwrap_or(0),
                state: field("state").unwrap_or_default(),
                open_until: field("open_until")
                    .and_then(|o| o.parse().ok())
                    .unwrap_or(0),
            },
        );
    }
    (now, out)
}

/// The live keys of the family in the store (every key under its hash tag), with their expiry.
fn family_keys(
    keys: &BTreeMap<Vec<u8>, (Val, Option<u64>)>,
    now: u64,
) -> impl Iterator<Item = (String, Option<u64>)> + '_ {
    let tag = format!("{{{PREFIX}/{}:{FAMILY}}}", FAMILY.len());
    keys.iter()
        .filter(move |(k, (_, exp))| k.starts_with(tag.as_bytes()) && exp.is_none_or(|e| e > now))
        .map(|(k, (_, exp))| (String::from_utf8_lossy(k).into_owned(), *exp))
}

/// The key text whose record `store_key` is, if it is a record (not a lease, a report or the
/// list of open keys).
fn record_of(store_key: &str) -> Option<String> {
    let tag = format!("{{{PREFIX}/{}:{FAMILY}}}:", FAMILY.len());
    let rest = store_key.strip_prefix(&tag)?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    (rest.len() == len).then(|| rest.to_owned())
}

/// The per-step invariants: **agree**, **stuck**, **memory**, **tasks**.
fn check(world: &Arc<Mutex<World>>, net: &NetRef) {
    let (now_ms, records) = read_store(net);
    let mut found = Vec::new();
    memory(net, now_ms, &mut found);
    let mut w = world.lock().unwrap();
    let now = w.now();
    let settled = w.settled();
    // Every key a record or an instance holds.
    let mut keys: std::collections::BTreeSet<String> = records.keys().cloned().collect();
    for inst in w.insts.iter().filter(|i| i.alive) {
        inst.family.for_each(|k, _| {
            keys.insert(k.clone());
        });
    }
    for key in &keys {
        let rec = records.get(key);
        let seen = rec.map_or((0, String::new()), |r| (r.epoch, r.state.clone()));
        let since = match w.records.get(key) {
            Some((s, since)) if *s == seen => *since,
            _ => {
                w.records.insert(key.clone(), (seen, now));
                now
            }
        };
        for k in 0..w.insts.len() {
            let inst = &w.insts[k];
            if !inst.alive || inst.fleet.is_none() {
                continue;
            }
            let Some(b) = inst.family.get(key.as_str()) else {
                w.locals.remove(&(k, key.clone()));
                continue;
            };
            let local = b.held_state();
            // Its state and the hands on it (a `trip_for` of an open key changes no state).
            let mark = (local.state, b.manual_changes());
            let changed = match w.locals.get(&(k, key.clone())) {
                Some((m, at)) if *m == mark => *at,
                _ => {
                    net.lock().unwrap().note(|| {
                        format!(
                            "i{k} `{key}` seen {:?} ({:?} left)",
                            local.state, local.open_remaining
                        )
                    });
                    w.locals.insert((k, key.clone()), (mark, now));
                    now
                }
            };
            let left = local.open_remaining.unwrap_or_default();
            // **stuck**: held open no longer than the fleet's next probe: the record's open
            // time, the lease of the instance probing first (a probe timeout), and this one's
            // hold while it waits for its turn (another).
            let limit = match rec {
                Some(r) if r.state == "open" => {
                    Duration::from_millis(r.open_until.saturating_sub(now_ms)) + PROBE_TIMEOUT * 2
                }
                _ => OPEN_FOR,
            };
            if local.state == State::Open
                && left > limit + EPS
                && settled
                && now >= since + BOUND
                && now >= changed + BOUND
            {
                found.push(format!(
                    "stuck: at {:.3}s, i{k}'s `{key}` is open for {left:?} more, past the fleet's next probe ({limit:?} from now)",
                    now.as_secs_f64()
                ));
            }
            if !settled || now < since + BOUND || now < changed + BOUND {
                continue;
            }
            let ok = match rec {
                None => {
                    matches!(local.state, State::Closed | State::HalfOpen)
                        || (local.state == State::Open
                            && (left.is_zero() || (w.quorum.is_some() && left <= OPEN_FOR + EPS)))
                }
                Some(r) => match r.state.as_str() {
                    "closed" if w.quorum.is_some() => {
                        matches!(local.state, State::Closed | State::HalfOpen)
                            || (local.state == State::Open && left <= OPEN_FOR + EPS)
                    }
                    "closed" => local.state == State::Closed,
                    "forced_open" => local.state == State::ForcedOpen,
                    "disabled" => local.state == State::Disabled,
                    "open" if r.open_until > now_ms + 50 => local.state == State::Open,
                    "open" => matches!(local.state, State::Open | State::HalfOpen),
                    _ => false,
                },
            };
            if !ok {
                let record = rec.map_or("no record".to_owned(), |r| {
                    format!(
                        "{} (open until {:+} ms from now)",
                        r.state,
                        r.open_until as i64 - now_ms as i64
                    )
                });
                found.push(format!(
                    "agree: at {:.3}s, i{k}'s `{key}` is {:?} ({left:?} left) while its record, unchanged for {:?}, is {record}",
                    now.as_secs_f64(),
                    local.state,
                    now - since
                ));
            }
        }
    }
    for (k, inst) in w.insts.iter_mut().enumerate() {
        if let Some(f) = &inst.fleet
            && f.task.is_finished()
        {
            found.push(format!(
                "tasks: i{k}'s fleet task ended while its Fleet is alive (at {:.3}s)",
                now.as_secs_f64()
            ));
            inst.fleet = None;
        }
    }
    for f in &found {
        net.lock().unwrap().note(|| format!("VIOLATION {f}"));
    }
    // One line per kind and key is enough: the first.
    for f in found {
        let head: String = f.split(" at ").next().unwrap_or_default().to_owned();
        let key = f.split('`').nth(1).unwrap_or_default().to_owned();
        if !w
            .violations
            .iter()
            .any(|v| v.starts_with(&head) && v.split('`').nth(1).unwrap_or_default() == key)
        {
            w.violations.push(f);
        }
    }
}

/// **memory**: every key of the family in the store expires within its bound, but a record
/// forced open or disabled and the list of open keys.
fn memory(net: &NetRef, now_ms: u64, found: &mut Vec<String>) {
    let nt = net.lock().unwrap();
    let space = nt.model.space.lock().unwrap();
    let open_list = open_set_key(PREFIX, FAMILY);
    let ttl = KEY_TTL.as_millis() as u64 + 5;
    for (k, exp) in family_keys(&space.keys, now_ms) {
        if k == open_list {
            continue;
        }
        let state = match space.keys.get(k.as_bytes()) {
            Some((Val::Hash(h), _)) if record_of(&k).is_some() => h
                .get(b"state".as_slice())
                .map(|s| String::from_utf8_lossy(s).into_owned()),
            _ => None,
        };
        let open_until = match space.keys.get(k.as_bytes()) {
            Some((Val::Hash(h), _)) => h
                .get(b"open_until".as_slice())
                .and_then(|s| String::from_utf8_lossy(s).parse::<u64>().ok())
                .unwrap_or(0),
            _ => 0,
        };
        let bound = match state.as_deref() {
            Some("forced_open" | "disabled") => continue,
            Some("open") => open_until + PROBE_TIMEOUT.as_millis() as u64 + ttl,
            Some(_) => now_ms + ttl,
            // A lease or a report: its own life, at most an open time and a probe timeout.
            None => now_ms + (OPEN_FOR + PROBE_TIMEOUT).as_millis() as u64 + ttl,
        };
        match exp {
            None => found.push(format!(
                "memory: `{k}` ({state:?}) never expires (at {now_ms})"
            )),
            Some(e) if e > bound => found.push(format!(
                "memory: `{k}` ({state:?}) expires in {} ms, past its bound by {} ms",
                e - now_ms,
                e - bound
            )),
            _ => {}
        }
    }
}

/// At the end, every key long closed or expired: the store holds nothing of the family but
/// the records forced open or disabled, and the list of open keys naming only those.
fn finish(world: &Arc<Mutex<World>>, net: &NetRef) {
    let mut found = Vec::new();
    {
        let nt = net.lock().unwrap();
        let (now, _) = nt.server_time();
        let space = nt.model.space.lock().unwrap();
        let open_list = open_set_key(PREFIX, FAMILY);
        let mut kept = std::collections::BTreeSet::new();
        for (k, _) in family_keys(&space.keys, now) {
            if k == open_list {
                continue;
            }
            let state = match space.keys.get(k.as_bytes()) {
                Some((Val::Hash(h), _)) => h
                    .get(b"state".as_slice())
                    .map(|s| String::from_utf8_lossy(s).into_owned()),
                _ => None,
            };
            match (record_of(&k), state.as_deref()) {
                (Some(key), Some("forced_open" | "disabled")) => {
                    kept.insert(key);
                }
                _ => found.push(format!(
                    "memory: at the end, `{k}` ({state:?}) is still in the store"
                )),
            }
        }
        if let Some((Val::ZSet(members), _)) = space.keys.get(open_list.as_bytes()) {
            for (m, score) in members {
                let m = String::from_utf8_lossy(m).into_owned();
                if *score > now as f64 && !kept.contains(&m) {
                    found.push(format!(
                        "memory: at the end, the open keys list `{m}`, which is not open"
                    ));
                }
            }
        }
    }
    for f in &found {
        net.lock().unwrap().note(|| format!("VIOLATION {f}"));
    }
    world.lock().unwrap().violations.extend(found);
}

/// A fleet sharing the family `hosts@<slot>` knows `a.example` forced open, and is dropped
/// while something still holds its shared state (as a hook running on another thread may, a
/// moment); then the family makes `a.example` again. Returns the new key's state: closed, as
/// no running fleet knows the key.
pub(super) fn a_key_made_after_its_fleet_is_dropped() -> State {
    paused_runtime().block_on(async {
        let net: NetRef = Arc::new(Mutex::new(Net::new(ChaCha8Rng::seed_from_u64(0), false)));
        let (slot, family) = take_slot();
        let (fleet, _) = slot_fleet(
            &net,
            slot,
            FleetConfig::new("redis://sim/")
                .prefix(PREFIX)
                .instance("i0"),
        );
        let forced = crate::record::Record {
            changed: true,
            epoch: 1,
            state: State::ForcedOpen,
            open_until_ms: 0,
            now_ms: 0,
            reopens: 0,
            origin: "i1".to_owned(),
            reason: "forced open".to_owned(),
            last_failure: String::new(),
        };
        let held = fleet.shared.clone();
        held.keyed
            .lock()
            .unwrap()
            .know(&key_name(FAMILY, "a.example"), &forced);
        drop(fleet);
        let _ = family.try_acquire("a.example");
        let state = family.get("a.example").map_or(State::Closed, |b| b.state());
        drop(held);
        state
    })
}
