//! A shared keyed family's paths, one scripted scenario each, on the simulator's model store
//! and paused clock: two instances, each with a registry family of its own shared under one
//! name (`Inner::family_suffix`), running the production fleet code.

use core::time::Duration;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::time::{Instant, sleep};

use super::harness::{HookSlot, Hooked, paused};
use super::net::{Net, NetRef, SimStore};
use super::setup::PREFIX;
use super::world::SimClock;
use crate::{Fleet, FleetConfig, FleetTrip, Quorum};
use breakerbox_runtime::{BreakerMap, Config, Outcome, State, registry};

const OPEN_FOR: Duration = Duration::from_secs(10);
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The registry family `<family>@<k>` of instance `k`, and its fleet sharing it as `family`.
fn instance(
    net: &NetRef,
    family: &str,
    k: usize,
    start: Instant,
    config: impl Fn(FleetConfig) -> FleetConfig,
) -> (BreakerMap<String>, Fleet) {
    let keys = registry()
        .family::<String>(&format!("{family}@{k}"), move || {
            Config::builder()
                .failures(1)
                .open_for(OPEN_FOR)
                .half_open_calls(1)
                .successes(1)
                .probe_timeout(PROBE_TIMEOUT)
                .clock(SimClock(start))
                .build()
                .unwrap()
        })
        .unwrap();
    let (conn, pushes) = net.lock().unwrap().connect();
    let fleet = Fleet::with_families(
        config(
            FleetConfig::new("redis://sim/")
                .prefix(PREFIX)
                .instance(format!("i{k}"))
                .share(family),
        ),
        Box::new(SimStore {
            id: conn,
            net: net.clone(),
        }),
        pushes,
        &tokio::runtime::Handle::current(),
        format!("@{k}"),
    );
    (keys, fleet)
}

fn net() -> NetRef {
    Arc::new(Mutex::new(Net::new(ChaCha8Rng::seed_from_u64(0), false)))
}

/// A key made on an instance late in the fleet's open time (from the record the instance
/// keeps) waits for a probe lease when the fleet's open time ends, like every other holder
/// of the key: while another instance's probe runs under the lease, it admits no probe of
/// its own.
#[test]
fn a_key_made_late_in_an_open_record_waits_for_the_fleets_probe() {
    paused(|| async {
        let net = net();
        let start = Instant::now();
        let (f0, _fleet0) = instance(&net, "late", 0, start, |c| c);
        let (f1, _fleet1) = instance(&net, "late", 1, start, |c| c);
        sleep(Duration::from_millis(100)).await;
        let tripped = Instant::now();
        f0.try_acquire("a").unwrap().record(Outcome::Failure);
        sleep(Duration::from_millis(100)).await;
        assert!(f1.get("a").is_none(), "instance 1 holds no key `a` yet");
        // Late in the open time, instance 1 makes the key: open from the fleet's record.
        sleep(OPEN_FOR - Duration::from_secs(2)).await;
        assert!(f1.try_acquire("a").is_err(), "made open");
        // The fleet's open time ends: instance 0 is granted the lease and probes, its probe
        // in flight.
        sleep((tripped + OPEN_FOR + Duration::from_millis(200)) - Instant::now()).await;
        let probe = f0
            .try_acquire("a")
            .expect("instance 0 probes under its lease");
        // Past the open time and one probe timeout, the probe still running: the lease is
        // instance 0's, and instance 1 admits no probe of its own.
        sleep((tripped + OPEN_FOR + PROBE_TIMEOUT + Duration::from_millis(500)) - Instant::now())
            .await;
        let b1 = f1.get("a").unwrap();
        assert!(
            f1.try_acquire("a").is_err(),
            "instance 1 probes beside instance 0's lease: {:?}",
            b1.export_state()
        );
        drop(probe);
    });
}

/// Under a quorum, the tally of each key's report is not kept once the key is gone: a stream
/// of keys tripping leaves no per-key state behind in the fleet.
#[test]
fn a_quorums_tallies_of_a_familys_keys_are_not_kept() {
    paused(|| async {
        let net = net();
        let start = Instant::now();
        let quorum = |c: FleetConfig| c.fleet_trip(FleetTrip::Quorum(Quorum::Instances(2)));
        let (f0, fleet0) = instance(&net, "tallied", 0, start, quorum);
        sleep(Duration::from_millis(100)).await;
        for i in 0..20 {
            let key = format!("k{i}");
            f0.try_acquire(key.as_str())
                .unwrap()
                .record(Outcome::Failure);
            sleep(Duration::from_millis(50)).await;
        }
        sleep(Duration::from_secs(1)).await;
        let kept = fleet0.shared.tallies.lock().unwrap().len();
        assert_eq!(kept, 0, "tallies kept of keys");
    });
}

/// A key evicted here and made again while the write of its trip is out (a trip made while
/// the store was unreachable, its open time run meanwhile) takes on the record that write
/// returns: the key the family holds now holds the fleet's record, as every other instance
/// does, rather than staying closed under it.
#[test]
fn a_key_made_again_while_its_trip_is_written_takes_the_written_record_on() {
    paused(|| async {
        let net = net();
        let start = Instant::now();
        let keys = registry()
            .family::<String>("remade@0", move || {
                Config::builder()
                    .failures(1)
                    .open_for(Duration::from_millis(100))
                    .probe_timeout(PROBE_TIMEOUT)
                    .idle_for(Duration::from_millis(50))
                    .clock(SimClock(start))
                    .build()
                    .unwrap()
            })
            .unwrap();
        let (conn, pushes) = net.lock().unwrap().connect();
        let hook: HookSlot = Arc::new(Mutex::new(None));
        let store = Hooked {
            inner: SimStore {
                id: conn,
                net: net.clone(),
            },
            hook: hook.clone(),
            ping_hook: Arc::new(Mutex::new(None)),
        };
        let _fleet = Fleet::with_families(
            FleetConfig::new("redis://sim/")
                .prefix(PREFIX)
                .instance("i0")
                .share("remade"),
            Box::new(store),
            pushes,
            &tokio::runtime::Handle::current(),
            "@0".to_owned(),
        );
        sleep(Duration::from_millis(100)).await;
        net.lock().unwrap().cut(conn);
        keys.try_acquire("a").unwrap().record(Outcome::Failure);
        // The trip's open time runs while the store is unreachable; the key is idle.
        sleep(Duration::from_millis(300)).await;
        let family = keys.clone();
        *hook.lock().unwrap() = Some(Box::new(move |_, _, args| {
            if args.first().map(String::as_str) != Some("cas") {
                return false;
            }
            // As the trip's write leaves: the key is evicted, and a call makes it again.
            assert_eq!(family.sweep(), 1, "the key evicted");
            drop(family.try_acquire("a"));
            true
        }));
        net.lock().unwrap().restore(conn);
        sleep(Duration::from_millis(300)).await;
        assert!(hook.lock().unwrap().is_none(), "the trip was written");
        let state = keys.get("a").map(|b| b.state());
        assert!(
            matches!(state, Some(State::Open | State::HalfOpen)),
            "the key made again is {state:?} under the fleet's open record"
        );
    });
}
