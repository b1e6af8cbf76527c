//! One simulated run: a fleet of instances, their callers, a fault plan, and the invariants.
//!
//! Everything runs on one current-thread tokio runtime with paused time, so a seed decides
//! every delay, fault and call, and the same seed replays the same run. The instances run the
//! production fleet code (`Fleet`, its task, the scripts), each against its own `SimStore`;
//! their breakers read the simulation's clock.
//!
//! A run (about 9.5 s of simulated time):
//! - 0–8 s: traffic in bursts and pauses (the fleet is sometimes idle for seconds), a service
//!   that fails and recovers, and, for most seeds, a fault plan from 0.5 s to 7 s;
//! - 8 s: every fault healed (a foreign value under a key may stay), traffic stops;
//! - 9.5 s: the convergence check.
//!
//! Invariants, checked as the run goes and at its end:
//! - **probes**: while no fault has been active for `SETTLE`, at most `half_open_calls` probe
//!   calls of a breaker are in flight fleet-wide (instances still sharing it);
//! - **tasks**: no fleet task has ended while its `Fleet` is alive (a panic ends it);
//! - **convergence**: 1.5 s after the store heals, every sharing instance's breaker holds the
//!   fleet's record (closed, open, forced open, disabled; an expired open record may be open or
//!   half-open locally, waiting for its leases), and no record means closed; a breaker whose key
//!   still holds a foreign value is left out, every other breaker is checked;
//! - **give-back**: an instance whose `Fleet` was dropped holds no breaker forced open or
//!   disabled that no one set by hand;
//! - **quorum** (`Oracle`, under `fleet_trip = "quorum"`): no record opens from closed by a
//!   quorum unless the open reports come from at least the quorum of distinct live *hosts*; a
//!   process killed and started again on its host (fault 8) is that host, once.

use breakerbox_runtime::__integrations::BreakerExt;
use core::time::Duration;
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::time::{Instant, sleep};

use super::model::Val;
use super::net::{NetRef, SimStore, Weather};
use super::setup::{PREFIX, Setup, fleet_config, paused_runtime};
use crate::{Fleet, OnStoreError, Quorum};
use breakerbox_runtime::{Breaker, Clock, Config, Outcome, State, Window};

/// The breakers each instance shares.
const NAMES: [&str; 2] = ["a", "b"];
/// How long after the last fault the probe bound is checked (a partition's local probing and
/// its leftovers are over by then: open time, two probe timeouts, a resync).
const SETTLE: Duration = Duration::from_millis(4_500);
const FAULTS_FROM: Duration = Duration::from_millis(500);
const FAULTS_UNTIL: Duration = Duration::from_secs(7);
const HEAL_AT: Duration = Duration::from_secs(8);
const CHECK_AT: Duration = Duration::from_millis(9_500);
/// The calls end by 9.2 s (a hung one lasts 1.2 s at most), an open time lasts 1 s, and one
/// hold adds a `probe_timeout` (1 s): by then no breaker is open under a closed record.
const STUCK_AT: Duration = Duration::from_millis(12_000);

/// The breakers' clock: the simulation's time.
#[derive(Clone)]
pub(super) struct SimClock(pub(super) Instant);

impl Clock for SimClock {
    fn now(&self) -> Duration {
        Instant::now() - self.0
    }
}

struct Inst {
    breakers: Vec<Breaker>,
    fleet: Option<Fleet>,
    conn: usize,
    /// Breakers (by index) last forced open or disabled by hand here.
    manual: [bool; NAMES.len()],
    /// Its fleet was dropped, the instance goes on unshared.
    unshared: bool,
    /// The breakers (by index) its fleet held for a failing store when it was dropped.
    held_at_drop: Vec<usize>,
    alive: bool,
}

struct World {
    insts: Vec<Inst>,
    traffic: bool,
    healthy: [bool; NAMES.len()],
    /// Probe calls in flight, per instance (its index in `insts`) and breaker, of instances
    /// still sharing it: per instance, because a probe of an earlier half-open that outlives it
    /// (a call that hangs) is not one of the current half-open's probes.
    probes_of: std::collections::HashMap<(usize, usize), u32>,
    half_open_calls: [u32; NAMES.len()],
    last_fault: Option<Duration>,
    /// Keys that hold a foreign value now, and whether it stays after the heal.
    junk: [Option<bool>; NAMES.len()],
    violations: Vec<String>,
    policy: OnStoreError,
    /// Both breakers' quorum, if their trips wait for one.
    quorum: Option<Quorum>,
    start: Instant,
    restarts: u32,
}

/// What a run found.
pub(super) struct Report {
    pub(super) violations: Vec<String>,
    pub(super) trace: Vec<String>,
}

fn configs(rng: &mut ChaCha8Rng, clock: &SimClock) -> Vec<Config> {
    let successes = rng.random_range(1..=2);
    let a = Config::builder()
        .failures(2)
        .open_for(Duration::from_secs(1))
        .half_open_calls(2)
        .successes(successes)
        .probe_timeout(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .expect("a valid config");
    let b = Config::builder()
        .failure_rate(50)
        .window(Window::Time(Duration::from_secs(2)))
        .min_calls(8)
        .open_for(Duration::from_secs(1))
        .half_open_calls(2)
        .successes(1)
        .probe_timeout(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .expect("a valid config");
    vec![a, b]
}

/// Runs seed `seed`; `tracing` keeps a step-by-step trace.
pub(super) fn run(seed: u64, tracing: bool) -> Report {
    paused_runtime().block_on(simulate(seed, tracing))
}

/// Half the seeds trip both breakers under a quorum.
fn quorum(rng: &mut ChaCha8Rng) -> Option<Quorum> {
    rng.random_bool(0.5).then(|| match rng.random_range(0..5) {
        0 => Quorum::Instances(1),
        1 | 2 => Quorum::Instances(2),
        3 => Quorum::Instances(3),
        _ => Quorum::Percent([50, 67][rng.random_range(0..2)]),
    })
}

async fn simulate(seed: u64, tracing: bool) -> Report {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let setup = Setup::draw(&mut rng, quorum);
    let clock = SimClock(Instant::now());
    let configs = configs(&mut rng, &clock);
    let net = setup.net(&mut rng, tracing, "seed", seed);
    let Setup {
        n,
        policy,
        faulty,
        quorum,
    } = setup;
    let world = Arc::new(Mutex::new(World {
        insts: Vec::new(),
        traffic: true,
        healthy: [true; NAMES.len()],
        probes_of: std::collections::HashMap::new(),
        half_open_calls: [2; NAMES.len()],
        last_fault: None,
        junk: [None; NAMES.len()],
        violations: Vec::new(),
        policy,
        quorum,
        start: clock.0,
        restarts: 0,
    }));
    for k in 0..n {
        let inst = start_instance(&net, &configs, policy, quorum, k, 0);
        world.lock().unwrap().insts.push(inst);
    }
    // The callers: one per instance and breaker.
    for k in 0..n {
        for j in 0..NAMES.len() {
            let seed = rng.random();
            tokio::spawn(caller(world.clone(), net.clone(), k, j, seed));
        }
    }
    tokio::spawn(schedule(world.clone(), net.clone(), rng.random()));
    if faulty {
        tokio::spawn(faults(
            world.clone(),
            net.clone(),
            configs.clone(),
            rng.random(),
        ));
    }
    // Watch the fleet tasks as the run goes.
    let until_heal = clock.0 + HEAL_AT;
    while Instant::now() < until_heal {
        sleep(Duration::from_millis(50)).await;
        check_tasks(&world);
    }
    heal(&world, &net);
    sleep(CHECK_AT - HEAL_AT).await;
    check_tasks(&world);
    converged(&world, &net);
    // Every call has ended long since: no breaker is open under a closed record.
    sleep(STUCK_AT - CHECK_AT).await;
    unstuck(&world, &net);
    if let Some(oracle) = net.lock().unwrap().oracle.as_mut() {
        let found = core::mem::take(&mut oracle.violations);
        world.lock().unwrap().violations.extend(found);
    }
    let violations = core::mem::take(&mut world.lock().unwrap().violations);
    // Stop every fleet before the runtime goes, so no task outlives the run.
    let insts = core::mem::take(&mut world.lock().unwrap().insts);
    drop(insts);
    let trace = core::mem::take(&mut net.lock().unwrap().trace);
    Report { violations, trace }
}

fn start_instance(
    net: &NetRef,
    configs: &[Config],
    policy: OnStoreError,
    quorum: Option<Quorum>,
    k: usize,
    generation: u32,
) -> Inst {
    let (conn, pushes) = net.lock().unwrap().connect();
    let store = SimStore {
        id: conn,
        net: net.clone(),
    };
    let fleet = Fleet::with_store(
        fleet_config(net, k, policy, quorum),
        Box::new(store),
        pushes,
        &tokio::runtime::Handle::current(),
    );
    let breakers: Vec<Breaker> = NAMES
        .iter()
        .zip(configs)
        .map(|(name, c)| Breaker::new(*name, c.clone()))
        .collect();
    for (j, b) in breakers.iter().enumerate() {
        fleet.share(b);
        let net = net.clone();
        b.on_state_change(move |e| {
            net.lock().unwrap().note(|| {
                format!(
                    "i{k}.{generation} {}: {:?} -> {:?} ({})",
                    NAMES[j], e.from, e.to, e.reason
                )
            });
        });
    }
    Inst {
        breakers,
        fleet: Some(fleet),
        conn,
        manual: [false; NAMES.len()],
        unshared: false,
        held_at_drop: Vec::new(),
        alive: true,
    }
}

/// Traffic in bursts and pauses, and a service that fails and recovers.
async fn schedule(world: Arc<Mutex<World>>, net: NetRef, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut next_traffic = Duration::ZERO;
    let mut next_health = [Duration::ZERO; NAMES.len()];
    let start = world.lock().unwrap().start;
    loop {
        let now = Instant::now() - start;
        if now >= HEAL_AT {
            world.lock().unwrap().traffic = false;
            return;
        }
        {
            let mut w = world.lock().unwrap();
            if now >= next_traffic {
                w.traffic = !w.traffic;
                let (lo, hi) = if w.traffic {
                    (300, 2_500)
                } else {
                    (200, 4_000)
                };
                next_traffic = now + Duration::from_millis(rng.random_range(lo..hi));
                let on = w.traffic;
                net.lock()
                    .unwrap()
                    .note(|| format!("traffic {}", if on { "on" } else { "off" }));
            }
            for j in 0..NAMES.len() {
                if now >= next_health[j] {
                    w.healthy[j] = !w.healthy[j];
                    let (lo, hi) = if w.healthy[j] {
                        (500, 3_000)
                    } else {
                        (300, 2_000)
                    };
                    next_health[j] = now + Duration::from_millis(rng.random_range(lo..hi));
                    let h = w.healthy[j];
                    net.lock().unwrap().note(|| {
                        format!("service {}: {}", NAMES[j], if h { "up" } else { "down" })
                    });
                }
            }
        }
        sleep(Duration::from_millis(20)).await;
    }
}

/// Instance `k`'s calls through breaker `j`.
async fn caller(world: Arc<Mutex<World>>, net: NetRef, k: usize, j: usize, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    loop {
        sleep(Duration::from_millis(rng.random_range(5..80))).await;
        let (breaker, shared, now) = {
            let w = world.lock().unwrap();
            let elapsed = Instant::now() - w.start;
            if elapsed >= HEAL_AT {
                return;
            }
            let inst = &w.insts[k];
            if !w.traffic || !inst.alive {
                continue;
            }
            (inst.breakers[j].clone(), !inst.unshared, elapsed)
        };
        let Ok(permit) = breaker.try_acquire_owned() else {
            continue;
        };
        // A probe of the fleet's half-open counts against its `half_open_calls`. Under a
        // quorum, a breaker open alone (its trip reported, the record still closed or gone)
        // probes alone, as without fleet mode: not counted.
        let probe = permit.is_probe();
        let counted = probe && shared && {
            let w = world.lock().unwrap();
            w.quorum.is_none()
                || matches!(record(&net, j).0, Seen::Record { ref state, .. } if state != "closed")
        };
        if counted {
            let mut w = world.lock().unwrap();
            *w.probes_of.entry((k, j)).or_default() += 1;
            let quiet = w.last_fault.is_none_or(|at| now >= at + SETTLE);
            // In flight for the fleet's half-open: those of instances half-open now.
            let in_half_open: u32 = w
                .probes_of
                .iter()
                .filter(|((i, b), _)| *b == j && w.insts[*i].breakers[j].state() == State::HalfOpen)
                .map(|(_, n)| *n)
                .sum();
            if quiet && in_half_open > w.half_open_calls[j] {
                let msg = format!(
                    "probes: {} probe calls of `{}` in flight fleet-wide at {:.3}s, half_open_calls = {}",
                    in_half_open,
                    NAMES[j],
                    now.as_secs_f64(),
                    w.half_open_calls[j]
                );
                net.lock().unwrap().note(|| format!("VIOLATION {msg}"));
                w.violations.push(msg);
            }
        }
        // A call lasts a few ms; now and then one hangs for longer than a probe may.
        let lasts = if rng.random_bool(0.01) {
            rng.random_range(900..1_200)
        } else {
            rng.random_range(1..30)
        };
        let world = world.clone();
        tokio::spawn(async move {
            sleep(Duration::from_millis(lasts)).await;
            let mut w = world.lock().unwrap();
            let outcome = if w.healthy[j] {
                Outcome::Success
            } else {
                Outcome::Failure
            };
            if counted && let Some(n) = w.probes_of.get_mut(&(k, j)) {
                *n -= 1;
            }
            drop(w);
            permit.record(outcome);
        });
    }
}

fn fault(world: &Arc<Mutex<World>>) {
    let mut w = world.lock().unwrap();
    w.last_fault = Some(Instant::now() - w.start);
}

/// Marks a fault that lasts `d`, and runs `end` when it is over.
fn for_a_while(
    world: &Arc<Mutex<World>>,
    d: Duration,
    end: impl FnOnce(&Arc<Mutex<World>>) + Send + 'static,
) {
    fault(world);
    let world = world.clone();
    tokio::spawn(async move {
        sleep(d).await;
        end(&world);
        fault(&world);
    });
}

/// The fault plan.
async fn faults(world: Arc<Mutex<World>>, net: NetRef, configs: Vec<Config>, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let start = world.lock().unwrap().start;
    sleep(FAULTS_FROM).await;
    while Instant::now() - start < FAULTS_UNTIL {
        sleep(Duration::from_millis(rng.random_range(100..800))).await;
        let n = world.lock().unwrap().insts.len();
        let k = rng.random_range(0..n);
        let j = rng.random_range(0..NAMES.len());
        let d = Duration::from_millis(rng.random_range(100..2_000));
        let key = format!("{{{PREFIX}:{}}}", NAMES[j]);
        match rng.random_range(0..12) {
            0 | 1 => {
                let weather = Weather::draw(&mut rng, &[0, 5, 50, 300]);
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: weather {weather:?}"));
                nt.weather = weather;
                drop(nt);
                let net = net.clone();
                for_a_while(&world, d, move |_| {
                    net.lock().unwrap().weather = Weather::default();
                });
            }
            2 => {
                let conn = world.lock().unwrap().insts[k].conn;
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: cut i{k} for {d:?}"));
                nt.cut(conn);
                drop(nt);
                let net = net.clone();
                for_a_while(&world, d, move |_| net.lock().unwrap().restore(conn));
            }
            3 => {
                let conn = world.lock().unwrap().insts[k].conn;
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: i{k}'s commands refused for {d:?}"));
                nt.conns[conn].refused = true;
                drop(nt);
                let net = net.clone();
                for_a_while(&world, d, move |_| {
                    net.lock().unwrap().conns[conn].refused = false;
                });
            }
            4 => {
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: server stopped for {d:?}"));
                nt.stopped = true;
                drop(nt);
                let net = net.clone();
                for_a_while(&world, d, move |_| net.lock().unwrap().stopped = false);
            }
            5 => {
                let mut nt = net.lock().unwrap();
                nt.note(|| "fault: FLUSHALL".to_owned());
                nt.model.space.lock().unwrap().keys.clear();
                if let Some(oracle) = nt.oracle.as_mut() {
                    oracle.flushed();
                }
                drop(nt);
                world.lock().unwrap().junk = [None; NAMES.len()];
                fault(&world);
            }
            6 => {
                let value = if rng.random_bool(0.5) {
                    Val::Str(b"left by another application".to_vec())
                } else {
                    let mut h = std::collections::BTreeMap::new();
                    h.insert(b"epoch".to_vec(), b"not-a-number".to_vec());
                    h.insert(b"state".to_vec(), b"open".to_vec());
                    Val::Hash(h)
                };
                let stays = rng.random_bool(0.3);
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: foreign value {value:?} under {key} (stays: {stays})"));
                nt.model
                    .space
                    .lock()
                    .unwrap()
                    .keys
                    .insert(key.clone().into_bytes(), (value, None));
                drop(nt);
                world.lock().unwrap().junk[j] = Some(stays);
                if !stays {
                    let net = net.clone();
                    for_a_while(&world, d, move |world| {
                        let mut w = world.lock().unwrap();
                        if w.junk[j].take().is_some() {
                            let nt = net.lock().unwrap();
                            nt.model.space.lock().unwrap().keys.remove(key.as_bytes());
                        }
                    });
                } else {
                    fault(&world);
                }
            }
            7 => {
                let payloads: [&[u8]; 4] = [
                    b"18446744073709551615:x",
                    b"1:a99999999999999999999:",
                    b"\xff\xfe:garbage",
                    b"3:abc",
                ];
                let p = payloads[rng.random_range(0..payloads.len())];
                let mut nt = net.lock().unwrap();
                nt.note(|| format!("fault: foreign message {:?}", String::from_utf8_lossy(p)));
                nt.publish(format!("{PREFIX}:changes").as_bytes(), p);
                drop(nt);
                fault(&world);
            }
            8 => {
                // The process dies (nothing given back: it is gone) and starts again. Half the
                // time it is one whose breaker has just opened, back within 200 ms (a
                // crash on a failing dependency, a quick restart): its report of that trip
                // may still count when its next process trips again on the same host.
                let mut w = world.lock().unwrap();
                let (k, d) = if rng.random_bool(0.5)
                    && let Some(open) = (0..n).find(|&i| {
                        w.insts[i].alive
                            && !w.insts[i].unshared
                            && w.insts[i].breakers[j].state() == State::Open
                    }) {
                    (open, Duration::from_millis(rng.random_range(20..200)))
                } else {
                    (k, d)
                };
                if !w.insts[k].alive || w.insts[k].unshared {
                    continue;
                }
                w.insts[k].alive = false;
                let conn = w.insts[k].conn;
                let old = core::mem::take(&mut w.insts[k].fleet);
                w.last_fault = Some(Instant::now() - start);
                drop(w);
                {
                    let mut nt = net.lock().unwrap();
                    nt.note(|| format!("fault: i{k} killed, back in {d:?}"));
                    nt.conns[conn].dead = true;
                }
                if let Some(fleet) = old {
                    fleet.task.abort();
                    core::mem::forget(fleet);
                }
                let world = world.clone();
                let net = net.clone();
                let configs = configs.clone();
                tokio::spawn(async move {
                    sleep(d).await;
                    let (policy, quorum) = {
                        let w = world.lock().unwrap();
                        (w.policy, w.quorum)
                    };
                    let generation = {
                        let mut w = world.lock().unwrap();
                        w.restarts += 1;
                        w.restarts
                    };
                    let inst = start_instance(&net, &configs, policy, quorum, k, generation);
                    let mut w = world.lock().unwrap();
                    w.insts[k] = inst;
                    w.last_fault = Some(Instant::now() - start);
                });
            }
            9 => {
                // Dropping a fleet (the instance goes on unshared): rarely.
                if rng.random_bool(0.3) {
                    let mut w = world.lock().unwrap();
                    if w.insts[k].alive && !w.insts[k].unshared {
                        let inst = &mut w.insts[k];
                        inst.unshared = true;
                        if let Some(fleet) = &inst.fleet {
                            let held = fleet.shared.held.lock().unwrap();
                            // What each held breaker is to get back: the state it had, or the
                            // fleet's record told during the hold (which may be forced open or
                            // disabled by an operator elsewhere).
                            inst.held_at_drop = held
                                .iter()
                                .flat_map(|h| h.iter())
                                .filter(|(_, h)| {
                                    !matches!(h.state.state, State::ForcedOpen | State::Disabled)
                                })
                                .filter_map(|(n, _)| NAMES.iter().position(|m| m == n))
                                .collect();
                        }
                        inst.fleet = None;
                        w.last_fault = Some(Instant::now() - start);
                        net.lock()
                            .unwrap()
                            .note(|| format!("i{k}: its Fleet dropped"));
                    }
                }
            }
            _ => {
                // An operator's hand on one instance.
                let w = world.lock().unwrap();
                if !w.insts[k].alive {
                    continue;
                }
                let b = w.insts[k].breakers[j].clone();
                drop(w);
                let what = rng.random_range(0..3);
                net.lock().unwrap().note(|| {
                    format!(
                        "operator on i{k} {}: {}",
                        NAMES[j],
                        ["reset", "force_open", "disable"][what]
                    )
                });
                match what {
                    0 => b.reset(),
                    1 => b.force_open(),
                    _ => b.disable(),
                }
                // It reaches the instances that share the breaker; an unshared one keeps what
                // it had.
                let mut w = world.lock().unwrap();
                for (i, inst) in w.insts.iter_mut().enumerate() {
                    if i == k || !inst.unshared {
                        inst.manual[j] = what != 0;
                    }
                }
                // A hand on a held breaker ends its hold for good (its change stands).
                w.insts[k].held_at_drop.retain(|&h| h != j);
            }
        }
    }
}

/// Every fault ends (a foreign value under a key may stay), traffic stops.
fn heal(world: &Arc<Mutex<World>>, net: &NetRef) {
    let mut nt = net.lock().unwrap();
    nt.note(|| "heal: every fault ends, traffic stops".to_owned());
    nt.heal();
    drop(nt);
    let mut w = world.lock().unwrap();
    w.traffic = false;
    for (j, name) in NAMES.iter().enumerate() {
        if w.junk[j] == Some(false) {
            w.junk[j] = None;
            let key = format!("{{{PREFIX}:{name}}}");
            let nt = net.lock().unwrap();
            nt.model.space.lock().unwrap().keys.remove(key.as_bytes());
        }
    }
}

fn check_tasks(world: &Arc<Mutex<World>>) {
    let mut w = world.lock().unwrap();
    let at = (Instant::now() - w.start).as_secs_f64();
    let mut found = Vec::new();
    for (k, inst) in w.insts.iter_mut().enumerate() {
        if let Some(f) = &inst.fleet {
            // Memory while the store is down: one pending change per shared breaker at most.
            let status = f.status();
            if status.pending > NAMES.len() as u64 || status.shared > NAMES.len() as u64 {
                found.push(format!(
                    "memory: i{k} holds {} pending changes for {} shared breakers (at {at:.3}s)",
                    status.pending, status.shared
                ));
            }
        }
        if let Some(f) = &inst.fleet
            && f.task.is_finished()
        {
            found.push(format!(
                "tasks: i{k}'s fleet task ended while its Fleet is alive (seen at {at:.3}s)"
            ));
            // Once is enough: it is gone.
            inst.fleet = None;
            inst.unshared = true;
        }
    }
    w.violations.extend(found);
}

/// The record of breaker `j` in the model, as the fleet would read it.
enum Seen {
    None,
    Foreign,
    Record { state: String, open_until: u64 },
}

fn record(net: &NetRef, j: usize) -> (Seen, u64) {
    let nt = net.lock().unwrap();
    let (now, _) = nt.server_time();
    let space = nt.model.space.lock().unwrap();
    let key = format!("{{{PREFIX}:{}}}", NAMES[j]);
    let seen = match space.keys.get(key.as_bytes()) {
        None => Seen::None,
        Some((Val::Hash(h), _)) => {
            let field = |f: &str| {
                h.get(f.as_bytes())
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            };
            match (
                field("epoch").and_then(|e| e.parse::<u64>().ok()),
                field("state"),
            ) {
                (Some(_), Some(state)) => Seen::Record {
                    state,
                    open_until: field("open_until")
                        .and_then(|o| o.parse().ok())
                        .unwrap_or(0),
                },
                _ => Seen::Foreign,
            }
        }
        Some(_) => Seen::Foreign,
    };
    (seen, now)
}

fn converged(world: &Arc<Mutex<World>>, net: &NetRef) {
    let mut w = world.lock().unwrap();
    let quorum = w.quorum.is_some();
    let mut found = Vec::new();
    for (j, name) in NAMES.iter().enumerate() {
        let (seen, now) = record(net, j);
        for (k, inst) in w.insts.iter().enumerate() {
            if !inst.alive {
                continue;
            }
            let local = inst.breakers[j].state();
            if inst.unshared {
                let hold = match w.policy {
                    OnStoreError::Open => State::ForcedOpen,
                    OnStoreError::Closed => State::Disabled,
                    OnStoreError::Local => State::Closed,
                };
                if inst.held_at_drop.contains(&j) && local == hold && !inst.manual[j] {
                    found.push(format!(
                        "give-back: i{k}'s fleet was dropped, and `{}` is still held {local:?}",
                        name
                    ));
                }
                continue;
            }
            let ok = match &seen {
                Seen::Foreign => true,
                // No record: closed, or a round of probes that no instance has finished (each
                // decides alone until one writes its close or re-open).
                Seen::None if quorum => {
                    matches!(local, State::Closed | State::HalfOpen | State::Open)
                }
                Seen::None => matches!(local, State::Closed | State::HalfOpen),
                Seen::Record { state, open_until } => match state.as_str() {
                    // Under a quorum a breaker may be open alone, or probing alone after it
                    // (its end is checked by `unstuck`).
                    "closed" if quorum => {
                        matches!(local, State::Closed | State::HalfOpen | State::Open)
                    }
                    "closed" => local == State::Closed,
                    "forced_open" => local == State::ForcedOpen,
                    "disabled" => local == State::Disabled,
                    "open" if *open_until > now => local == State::Open,
                    "open" => matches!(local, State::Open | State::HalfOpen),
                    _ => false,
                },
            };
            if !ok {
                let record = match &seen {
                    Seen::None => "no record".to_owned(),
                    Seen::Foreign => "a foreign value".to_owned(),
                    Seen::Record { state, open_until } => format!(
                        "{state} (open until {:+} ms from now)",
                        *open_until as i64 - now as i64
                    ),
                };
                found.push(format!(
                    "convergence: 1.5 s after the store healed, i{k}'s `{}` is {local:?} while the fleet's record is {record}",
                    name
                ));
            }
        }
    }
    for f in &found {
        net.lock().unwrap().note(|| format!("VIOLATION {f}"));
    }
    w.violations.extend(found);
}

/// **stuck**: once every call and open time is over, no sharing instance's breaker is open
/// with time left while the fleet's record is closed or gone (under a quorum, a breaker that
/// opened alone ends its open time as without fleet mode; in any mode, nothing holds it open).
fn unstuck(world: &Arc<Mutex<World>>, net: &NetRef) {
    let mut w = world.lock().unwrap();
    let mut found = Vec::new();
    for (j, name) in NAMES.iter().enumerate() {
        let (seen, _) = record(net, j);
        let closed = match &seen {
            Seen::None => true,
            Seen::Record { state, .. } => state == "closed",
            Seen::Foreign => false,
        };
        if !closed {
            continue;
        }
        for (k, inst) in w.insts.iter().enumerate() {
            if !inst.alive || inst.unshared {
                continue;
            }
            let local = inst.breakers[j].held_state();
            if local.state == State::Open && local.open_remaining.is_some_and(|l| !l.is_zero()) {
                found.push(format!(
                    "stuck: at {:.1}s, i{k}'s `{name}` is open for {:?} more while the fleet's record is closed",
                    STUCK_AT.as_secs_f64(),
                    local.open_remaining.unwrap_or_default()
                ));
            }
        }
    }
    for f in &found {
        net.lock().unwrap().note(|| format!("VIOLATION {f}"));
    }
    w.violations.extend(found);
}
