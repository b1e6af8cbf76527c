//! The fleet's fault paths at exact interleavings: a user's action, or a fault, landed as one
//! chosen request leaves the task (the hooked store of `harness.rs`).
//!
//! Some need an interleaving no random weather makes on purpose: a user's change, or the store
//! stopping, at the exact moment the task has one particular request in flight. `Hooked` is a
//! `SimStore` with a hook run as each script call leaves the task (the hook may act on the
//! breakers, as another thread would at that moment, or switch a fault on), so the
//! interleaving is exact and the run deterministic.

use breakerbox_runtime::__integrations::BreakerExt;
use core::time::Duration;
use std::collections::BTreeMap;

use tokio::time::{Instant, sleep};

use super::harness::{Cluster, cluster, consecutive, fail, paused};
use super::model::Val;
use super::world::SimClock;
use crate::OnStoreError;
use crate::store::Script;
use breakerbox_runtime::{Breaker, Config, State, Window};

/// A record as `record.lua` writes one, put under the key by hand (no message published: one
/// this instance missed).
fn record(epoch: u64, state: &str) -> Val {
    let mut h = BTreeMap::new();
    for (f, v) in [
        ("epoch", epoch.to_string()),
        ("state", state.to_owned()),
        ("open_until", "0".to_owned()),
        ("reopens", "0".to_owned()),
        ("origin", "elsewhere".to_owned()),
        ("reason", "reset".to_owned()),
        ("last_failure", String::new()),
    ] {
        h.insert(f.as_bytes().to_vec(), v.into_bytes());
    }
    Val::Hash(h)
}

/// A `force_open` (under `on_store_error = "open"`) or a `disable` (under `"closed"`) made by
/// hand during a hold stands when the store answers, and is written for the fleet. Such a call
/// changes no state of a breaker held in that state and tells no event: the give-back tells it
/// by `Breaker::manual_changes`.
#[test]
fn a_force_open_or_disable_by_hand_during_a_hold_of_the_same_state_stands() {
    for (policy, held) in [
        (OnStoreError::Open, State::ForcedOpen),
        (OnStoreError::Closed, State::Disabled),
    ] {
        paused(|| async move {
            let c = cluster(2, &["payments"], consecutive(1), policy);
            sleep(Duration::from_millis(50)).await;
            c.net.lock().unwrap().conns[c.conns[0]].refused = true;
            sleep(Duration::from_millis(1_100)).await;
            assert_eq!(c.breakers[0][0].state(), held, "{policy:?}: held");
            // The operator acts on instance 0 by hand, during the hold.
            if held == State::ForcedOpen {
                c.breakers[0][0].force_open();
            } else {
                c.breakers[0][0].disable();
            }
            sleep(Duration::from_millis(300)).await;
            c.net.lock().unwrap().conns[c.conns[0]].refused = false;
            sleep(Duration::from_secs(1)).await;
            assert_eq!(
                c.breakers[0][0].state(),
                held,
                "{policy:?}: the change made by hand during the hold stands"
            );
            assert_eq!(
                c.record_state("payments").as_deref(),
                Some(if held == State::ForcedOpen {
                    "forced_open"
                } else {
                    "disabled"
                }),
                "{policy:?}: and is written"
            );
            assert_eq!(c.states(0), [held, held], "{policy:?}: fleet-wide");
        });
    }
}

/// A breaker that takes a record on (a lost `cas`), then trips, then is held when a write times
/// out, is given back and its trip written when the store answers. The queue then holds, for
/// that breaker, the record's event, the trip's and the hold's: the task matches each of its
/// imports to its event in order (`own_imports`), so the hold's event is not taken for the
/// record's, nor the trip for a change made by hand during the hold.
#[test]
fn a_trip_between_an_import_and_a_hold_is_not_left_held() {
    paused(|| async {
        let c = cluster(1, &["a", "b"], consecutive(1), OnStoreError::Open);
        sleep(Duration::from_millis(50)).await;
        // Another instance's reset of `a`, whose message this one missed.
        c.put("a", record(1_800_000_000_010, "closed"));
        let a = c.breakers[0][0].clone();
        let net = c.net.clone();
        let b_key = Cluster::key("b");
        c.hook(
            0,
            Box::new(move |script, keys, _| {
                if script != Script::Record || keys[0] != b_key {
                    return false;
                }
                // While `b`'s trip is being written: `a`, closed again by the record it just
                // took on, fails and trips; and the store stops answering.
                fail(&a);
                net.lock().unwrap().stopped = true;
                true
            }),
        );
        fail(&c.breakers[0][0]);
        fail(&c.breakers[0][1]);
        sleep(Duration::from_millis(400)).await;
        assert_eq!(c.breakers[0][1].state(), State::ForcedOpen, "held");
        c.net.lock().unwrap().stopped = false;
        sleep(Duration::from_millis(1_500)).await;
        assert!(c.fleets[0].as_ref().unwrap().status().connected);
        assert_eq!(c.breakers[0][1].state(), State::Open, "b given back");
        assert_eq!(
            c.breakers[0][0].state(),
            State::Open,
            "a: given back its trip, not left forced open"
        );
        assert_eq!(
            c.record_state("a").as_deref(),
            Some("open"),
            "a's trip written"
        );
    });
}

/// An open breaker given back after a hold waits for a lease like any open record it holds:
/// while another instance holds both leases (`half_open_calls = 2`) it probes nothing, so the
/// fleet never runs more than two probes with the store answering.
#[test]
fn a_breaker_given_back_open_probes_only_under_a_lease() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .half_open_calls(2)
                .successes(1)
                .probe_timeout(Duration::from_secs(5))
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(2, &["payments"], config, OnStoreError::Open);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[1][0]);
        sleep(Duration::from_millis(50)).await;
        assert_eq!(c.states(0), [State::Open, State::Open]);
        c.net.lock().unwrap().conns[c.conns[0]].refused = true;
        // Instance 1 is granted the leases when the record's open time ends (1.05 s); it runs
        // two probes, kept in flight (renewed at half the lease's life).
        sleep(Duration::from_millis(3_400)).await;
        assert_eq!(
            c.breakers[0][0].state(),
            State::ForcedOpen,
            "instance 0 held"
        );
        let mut probes = Vec::new();
        for _ in 0..3 {
            if let Ok(p) = c.breakers[1][0].try_acquire_owned() {
                assert!(p.is_probe());
                probes.push((1, p));
            }
        }
        assert_eq!(probes.len(), 2, "instance 1 holds both leases");
        // Past instance 0's local open time (1.05 s + probe_timeout): the ACL is lifted.
        sleep(Duration::from_millis(2_800)).await;
        c.net.lock().unwrap().conns[c.conns[0]].refused = false;
        let lifted = Instant::now();
        while c.breakers[0][0].state() == State::ForcedOpen {
            sleep(Duration::from_millis(1)).await;
            assert!(
                lifted.elapsed() < Duration::from_secs(1),
                "never given back"
            );
        }
        // Calls arrive on instance 0 as ever, over the next 300 ms.
        for _ in 0..3 {
            for _ in 0..3 {
                if let Ok(p) = c.breakers[0][0].try_acquire_owned()
                    && p.is_probe()
                {
                    probes.push((0, p));
                }
            }
            sleep(Duration::from_millis(100)).await;
        }
        let who: Vec<usize> = probes.iter().map(|(k, _)| *k).collect();
        assert!(
            probes.len() <= 2,
            "half_open_calls = 2 fleet-wide, the store answering; probes from {who:?}"
        );
    });
}

/// A lease granted for an opening that ended while the ask was out (a reset, then a new trip of
/// 10 s) is not taken on: the new trip keeps its open time, here and in the fleet's record.
#[test]
fn a_lease_granted_during_a_reset_and_a_new_trip_keeps_the_trips_open_time() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(10))
                .half_open_calls(1)
                .successes(1)
                .probe_timeout(Duration::from_secs(1))
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(1, &["payments"], config, OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[0][0]);
        let b = c.breakers[0][0].clone();
        c.hook(
            0,
            Box::new(move |script, _, _| {
                if script != Script::Probe {
                    return false;
                }
                b.reset();
                fail(&b);
                assert_eq!(b.state(), State::Open);
                true
            }),
        );
        // The record's open time ends at 10.05 s: the ask, the reset and the new trip.
        sleep(Duration::from_millis(10_300)).await;
        assert_eq!(c.breakers[0][0].state(), State::Open, "the new trip");
        let left = c.breakers[0][0]
            .held_state()
            .open_remaining
            .unwrap_or_default();
        assert!(
            left > Duration::from_secs(5),
            "the trip made at 10.05 s is open for 10 s; {left:?} left at 10.35 s"
        );
        sleep(Duration::from_secs(2)).await;
        assert!(
            c.breakers[0][0].try_acquire().is_err(),
            "still rejecting 2 s after the new trip"
        );
    });
}

/// Dropping the `Fleet` lifts the probe budgets its leases set: an idle lease holder's budget
/// of 0 (set at half the lease's life) would otherwise keep the unshared breaker open for ever.
#[test]
fn dropping_the_fleet_lifts_its_probe_budgets() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .half_open_calls(2)
                .successes(1)
                .probe_timeout(Duration::from_secs(2))
                .clock(clock)
                .build()
                .unwrap()
        };
        let mut c = cluster(1, &["payments"], config, OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[0][0]);
        // Leases at 1.05 s; half their life at 2.05 s, with no probe in flight.
        sleep(Duration::from_millis(2_300)).await;
        drop(c.fleets[0].take());
        sleep(Duration::from_secs(10)).await;
        let b = &c.breakers[0][0];
        match b.try_acquire() {
            Ok(p) => assert!(p.is_probe(), "unshared, it probes on its own"),
            Err(e) => panic!(
                "unshared for 10 s, state {:?}, every call still rejected: {e:?}",
                b.state()
            ),
        }
    });
}

/// Calls a breaker held disabled (`on_store_error = "closed"`) admitted unjudged are not sent as
/// the fleet's counts once the store answers: the give-back starts its counts over, so they
/// cannot trip the fleet's failure-rate breaker.
#[test]
fn calls_admitted_while_held_disabled_are_not_counted_for_the_fleet() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failure_rate(50)
                .window(Window::Time(Duration::from_secs(10)))
                .min_calls(10)
                .open_for(Duration::from_secs(30))
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(2, &["payments"], config, OnStoreError::Closed);
        sleep(Duration::from_millis(50)).await;
        c.net.lock().unwrap().conns[c.conns[0]].refused = true;
        sleep(Duration::from_millis(1_100)).await;
        assert_eq!(c.breakers[0][0].state(), State::Disabled, "held");
        let b = c.breakers[0][0].clone();
        let net = c.net.clone();
        let conn = c.conns[0];
        *c.ping_hooks[0].lock().unwrap() = Some(Box::new(move || {
            // The dependency fails; calls go on, admitted unjudged; the ACL is lifted and
            // this PING is the first command to pass.
            for _ in 0..20 {
                fail(&b);
            }
            net.lock().unwrap().conns[conn].refused = false;
            true
        }));
        sleep(Duration::from_secs(1)).await;
        assert_eq!(
            c.record_state("payments"),
            None,
            "nothing judged, nothing tripped: no record"
        );
        assert_eq!(c.breakers[0][0].state(), State::Closed, "given back");
        assert_eq!(c.states(0), [State::Closed, State::Closed]);
    });
}

/// A reset of a closed breaker, which changes no state and tells no event, still reaches the
/// fleet (the task finds it through `Breaker::manual_changes` at the next count batch): its write empties the
/// fleet's counts, so the failures from before it never trip the fleet after it.
#[test]
fn a_reset_of_a_closed_breaker_clears_the_fleets_counts() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failure_rate(50)
                .window(Window::Time(Duration::from_secs(10)))
                .min_calls(10)
                .open_for(Duration::from_secs(30))
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(2, &["payments"], config, OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        for _ in 0..8 {
            fail(&c.breakers[0][0]);
        }
        sleep(Duration::from_millis(300)).await;
        assert_eq!(
            c.states(0),
            [State::Closed, State::Closed],
            "8 calls: no trip"
        );
        // The operator resets instance 0's breaker: its failures are to count no more.
        c.breakers[0][0].reset();
        sleep(Duration::from_millis(300)).await;
        for _ in 0..2 {
            fail(&c.breakers[1][0]);
        }
        sleep(Duration::from_millis(500)).await;
        assert_ne!(
            c.record_state("payments").as_deref(),
            Some("open"),
            "2 failures since the reset, min_calls 10: the fleet trips on counts from before it"
        );
        assert_eq!(c.states(0), [State::Closed, State::Closed]);
    });
}

/// A breaker shared in place of a dropped one of the same name is shared: it takes the fleet's
/// changes on (the task replaces the dead breaker's entry rather than keep it).
#[test]
fn a_breaker_shared_again_under_a_dropped_ones_name_is_shared() {
    paused(|| async {
        let mut c = cluster(2, &["payments"], consecutive(1), OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        let config = c.breakers[0][0].config().clone();
        // Instance 0 rebuilds its breaker: the old one dropped, a new one shared.
        c.breakers[0].clear();
        let again = Breaker::new("payments", config);
        c.fleets[0].as_ref().unwrap().share(&again);
        c.breakers[0].push(again);
        sleep(Duration::from_millis(1_500)).await;
        fail(&c.breakers[1][0]);
        sleep(Duration::from_millis(500)).await;
        assert_eq!(c.record_state("payments").as_deref(), Some("open"));
        assert_eq!(
            c.states(0),
            [State::Open, State::Open],
            "the new breaker takes the fleet's trip on"
        );
        let _ = c.fleets.iter_mut().map(Option::take).count();
    });
}

/// A hold that starts while a trip's write has run in the store but its reply is lost: the
/// instance takes its own published record on during the hold and gives it back open when the
/// store answers. One record, written once, and the breaker open for the record's time plus one
/// `probe_timeout` (the lease hold), as on every other instance: no second extension.
#[test]
fn a_hold_during_a_lost_write_reply_gives_back_the_records_open_time() {
    paused(|| async {
        let c = cluster(2, &["payments"], consecutive(1), OnStoreError::Open);
        sleep(Duration::from_millis(50)).await;
        let net = c.net.clone();
        c.hook(
            0,
            Box::new(move |script, _, args| {
                if script != Script::Record || args[0] != "cas" {
                    return false;
                }
                net.lock().unwrap().weather.lose_reply = 1.0;
                true
            }),
        );
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(1)).await;
        c.net.lock().unwrap().weather = Default::default();
        let epoch = || {
            let net = c.net.lock().unwrap();
            let space = net.model.space.lock().unwrap();
            match space.keys.get(Cluster::key("payments").as_bytes()) {
                Some((Val::Hash(h), _)) => h.get(b"epoch".as_slice()).cloned(),
                _ => None,
            }
        };
        let written = epoch();
        assert!(written.is_some(), "the write ran");
        sleep(Duration::from_millis(250)).await;
        assert_eq!(
            c.breakers[0][0].state(),
            State::ForcedOpen,
            "held: the reply never came"
        );
        assert_eq!(
            c.breakers[1][0].state(),
            State::Open,
            "instance 1 took it on"
        );
        sleep(Duration::from_secs(1)).await;
        assert_eq!(c.states(0), [State::Open, State::Open]);
        assert_eq!(epoch(), written, "written once");
        // 60 s open and 60 s (the default probe_timeout) held for the leases, on both.
        let left = |k: usize| c.breakers[k][0].held_state().open_remaining.unwrap();
        let (here, there) = (left(0), left(1));
        assert!(
            here.abs_diff(there) < Duration::from_millis(300) && here > Duration::from_secs(115),
            "the record's open time: {here:?} here, {there:?} on instance 1"
        );
    });
}

/// `Fleet::resync()` during a hold answers `false` within its timeouts, then `true` once the
/// store answers, with the breaker given back.
#[test]
fn resync_during_a_hold_answers() {
    paused(|| async {
        let c = cluster(1, &["payments"], consecutive(1), OnStoreError::Closed);
        sleep(Duration::from_millis(50)).await;
        c.net.lock().unwrap().stopped = true;
        let fleet = c.fleets[0].as_ref().unwrap();
        let asked = Instant::now();
        assert!(!fleet.resync().await, "the store is stopped");
        assert!(
            asked.elapsed() <= Duration::from_millis(600),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(c.breakers[0][0].state(), State::Disabled, "held");
        assert!(!fleet.resync().await, "still stopped");
        c.net.lock().unwrap().stopped = false;
        assert!(fleet.resync().await, "answers again");
        assert_eq!(c.breakers[0][0].state(), State::Closed, "given back");
    });
}

/// A lease holder held while its probes run is given back open and held for a lease, not as a
/// bare half-open round: it probes nothing while another instance holds the leases.
#[test]
fn a_lease_holder_given_back_half_open_probes_only_under_a_lease() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .half_open_calls(2)
                .successes(2)
                .probe_timeout(Duration::from_secs(2))
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(2, &["payments"], config, OnStoreError::Open);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(1_150)).await;
        // Whoever was granted the leases at 1.05 s starts one probe and keeps it in flight.
        let mut first = None;
        for k in 0..2 {
            if let Ok(p) = c.breakers[k][0].try_acquire_owned() {
                assert!(p.is_probe());
                first = Some((k, p));
                break;
            }
        }
        let (holder, _old) = first.expect("one instance holds the leases");
        let other = 1 - holder;
        c.net.lock().unwrap().conns[c.conns[holder]].refused = true;
        sleep(Duration::from_millis(1_100)).await;
        assert_eq!(
            c.breakers[holder][0].state(),
            State::ForcedOpen,
            "the holder is held"
        );
        // The holder's leases run out in the store at 3.05 s; the other is granted them.
        sleep(Duration::from_millis(1_000)).await;
        let mut probes = Vec::new();
        for _ in 0..3 {
            if let Ok(p) = c.breakers[other][0].try_acquire_owned() {
                assert!(p.is_probe());
                probes.push((other, p));
            }
        }
        assert_eq!(probes.len(), 2, "the other instance holds both leases now");
        c.net.lock().unwrap().conns[c.conns[holder]].refused = false;
        let lifted = Instant::now();
        while c.breakers[holder][0].state() == State::ForcedOpen {
            sleep(Duration::from_millis(1)).await;
            assert!(
                lifted.elapsed() < Duration::from_secs(1),
                "never given back"
            );
        }
        for _ in 0..3 {
            for _ in 0..3 {
                if let Ok(p) = c.breakers[holder][0].try_acquire_owned()
                    && p.is_probe()
                {
                    probes.push((holder, p));
                }
            }
            sleep(Duration::from_millis(100)).await;
        }
        let who: Vec<usize> = probes.iter().map(|(k, _)| *k).collect();
        assert!(
            probes.len() <= 2,
            "half_open_calls = 2 fleet-wide, the store answering; new probes from {who:?}"
        );
    });
}

/// A record taken on during a hold (commands refused as an ACL does, the subscription alive,
/// another instance trips) is given back with the record's open time plus one `probe_timeout`,
/// and the lease asked for when the record's open time ends, as on the other instance.
#[test]
fn a_record_taken_on_during_a_hold_is_given_back_with_its_open_time() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(10))
                .probe_timeout(Duration::from_secs(5))
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(2, &["payments"], config, OnStoreError::Open);
        sleep(Duration::from_millis(50)).await;
        c.net.lock().unwrap().conns[c.conns[0]].refused = true;
        sleep(Duration::from_millis(1_100)).await;
        assert_eq!(c.breakers[0][0].state(), State::ForcedOpen, "held");
        fail(&c.breakers[1][0]);
        sleep(Duration::from_millis(100)).await;
        c.net.lock().unwrap().conns[c.conns[0]].refused = false;
        sleep(Duration::from_secs(1)).await;
        assert_eq!(c.states(0), [State::Open, State::Open]);
        let left = |k: usize| c.breakers[k][0].held_state().open_remaining.unwrap();
        let (here, there) = (left(0), left(1));
        assert!(
            here.abs_diff(there) < Duration::from_millis(300),
            "the fleet's open time and the lease hold, once: {here:?} here, {there:?} on \
             instance 1"
        );
    });
}

/// A breaker that changes while its lease ask is out (here a `trip_for` of the open breaker)
/// asks again soon, so it stays in the lease protocol. The `trip_for` is written as the fleet's
/// trip; once its 7 s are over, the instances' probes stay within `half_open_calls`.
#[test]
fn a_breaker_changed_during_a_lease_ask_asks_again() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .half_open_calls(2)
                .successes(1)
                .probe_timeout(Duration::from_secs(5))
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(2, &["payments"], config, OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[1][0]);
        let b = c.breakers[0][0].clone();
        c.hook(
            0,
            Box::new(move |script, _, _| {
                if script != Script::Probe {
                    return false;
                }
                // While instance 0's first ask is out (1.05 s): open for 7 s more, by hand.
                b.trip_for(Duration::from_secs(7));
                true
            }),
        );
        // The `trip_for` is written as the fleet's trip (open for 7 s from 1.05 s, on every
        // instance); past it (and the lease ask it is held for), both instances take calls.
        sleep(Duration::from_millis(8_300)).await;
        assert_eq!(c.record_state("payments").as_deref(), Some("open"));
        let mut probes = Vec::new();
        for _ in 0..10 {
            for k in 0..2 {
                for _ in 0..3 {
                    if let Ok(p) = c.breakers[k][0].try_acquire_owned()
                        && p.is_probe()
                    {
                        probes.push((k, p));
                    }
                }
            }
            sleep(Duration::from_millis(100)).await;
        }
        assert!(
            !probes.is_empty(),
            "someone probes: no instance is left out of the leases"
        );
        let who: Vec<usize> = probes.iter().map(|(k, _)| *k).collect();
        assert!(
            probes.len() <= 2,
            "half_open_calls = 2 fleet-wide, the store answering; probes from {who:?}"
        );
    });
}
