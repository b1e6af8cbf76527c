//! The fleet's fault paths, one scripted scenario each, on the simulator's model store and
//! paused clock: the instances run the production fleet code, and every step is exact.

use breakerbox_runtime::__integrations::BreakerExt;
use core::time::Duration;
use std::sync::{Arc, Mutex};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::time::{Instant, sleep};

use super::harness::{Cluster, PREFIX, cluster, consecutive, fail, paused};
use super::model::Val;
use super::net::{Net, NetRef, SimStore, Weather};
use super::world::SimClock;
use crate::{Fleet, FleetConfig, OnStoreError};
use breakerbox_runtime::{Breaker, Config, State};

fn foreign_values() -> [(&'static str, Val); 2] {
    let mut hash = std::collections::BTreeMap::new();
    hash.insert(b"epoch".to_vec(), b"not-a-number".to_vec());
    hash.insert(b"state".to_vec(), b"open".to_vec());
    [
        (
            "a string",
            Val::Str(b"left by another application".to_vec()),
        ),
        ("a hash whose epoch is no number", Val::Hash(hash)),
    ]
}

const POLICIES: [OnStoreError; 3] = [
    OnStoreError::Local,
    OnStoreError::Open,
    OnStoreError::Closed,
];

#[test]
fn a_foreign_value_under_one_key_leaves_every_other_breaker_shared() {
    for policy in POLICIES {
        for (what, value) in foreign_values() {
            paused(|| async move {
                let c = cluster(
                    3,
                    &["junk", "payments", "untouched"],
                    consecutive(1),
                    policy,
                );
                sleep(Duration::from_millis(50)).await;
                c.put("junk", value);
                // The junk breaker trips here: its write meets the foreign value.
                fail(&c.breakers[0][0]);
                sleep(Duration::from_millis(300)).await;
                // Another breaker trips on instance 1: the fleet takes it on as ever.
                fail(&c.breakers[1][1]);
                sleep(Duration::from_secs(1)).await;
                let context = format!("{policy:?}, {what}");
                assert_eq!(
                    c.states(1),
                    [State::Open; 3],
                    "{context}: payments opens everywhere"
                );
                assert_eq!(
                    c.record_state("payments").as_deref(),
                    Some("open"),
                    "{context}"
                );
                // An untouched breaker is neither held nor rejecting: the store answers.
                for k in 0..3 {
                    let b = &c.breakers[k][2];
                    assert_eq!(b.state(), State::Closed, "{context}: instance {k}");
                    let admitted = (0..100)
                        .filter(|_| b.call(|| Ok::<_, &str>(())).is_ok())
                        .count();
                    assert_eq!(admitted, 100, "{context}: instance {k}");
                    let status = c.fleets[k].as_ref().unwrap().status();
                    assert!(status.connected, "{context}: instance {k}: {status:?}");
                }
                // The junk breaker stays open where it tripped, and nowhere else yet.
                assert_eq!(
                    c.states(0),
                    [State::Open, State::Closed, State::Closed],
                    "{context}"
                );
                // The value is removed: the trip kept here is written, every instance takes it
                // on within a second.
                c.delete("junk");
                sleep(Duration::from_secs(1)).await;
                assert_eq!(c.record_state("junk").as_deref(), Some("open"), "{context}");
                assert_eq!(
                    c.states(0),
                    [State::Open; 3],
                    "{context}: junk, once readable"
                );
            });
        }
    }
}

#[test]
fn a_record_that_was_foreign_and_then_vanished_is_written_again() {
    for (what, value) in foreign_values() {
        paused(|| async move {
            let c = cluster(3, &["payments"], consecutive(1), OnStoreError::Local);
            sleep(Duration::from_millis(50)).await;
            assert_eq!(c.record_state("payments"), None, "no record yet");
            c.put("payments", value);
            fail(&c.breakers[0][0]);
            sleep(Duration::from_secs(2)).await;
            assert_eq!(
                c.states(0),
                [State::Open, State::Closed, State::Closed],
                "{what}"
            );
            c.delete("payments");
            sleep(Duration::from_secs(1)).await;
            assert_eq!(
                c.record_state("payments").as_deref(),
                Some("open"),
                "{what}"
            );
            assert_eq!(
                c.states(0),
                [State::Open; 3],
                "{what}: converged within 1 s"
            );
        });
    }
}

#[test]
fn a_trip_taken_on_during_a_hold_is_held_when_the_store_answers() {
    for policy in [OnStoreError::Open, OnStoreError::Closed] {
        paused(|| async move {
            let c = cluster(2, &["payments"], consecutive(1), policy);
            sleep(Duration::from_millis(50)).await;
            // An ACL refuses instance 0's commands; its subscription goes on. Its next re-read
            // (within `resync_every`) finds out.
            c.net.lock().unwrap().conns[c.conns[0]].refused = true;
            sleep(Duration::from_millis(1_100)).await;
            let held = if policy == OnStoreError::Open {
                State::ForcedOpen
            } else {
                State::Disabled
            };
            assert_eq!(c.breakers[0][0].state(), held, "{policy:?}: held");
            // Instance 1 trips: the record is written and published.
            fail(&c.breakers[1][0]);
            sleep(Duration::from_millis(100)).await;
            assert_eq!(c.breakers[0][0].state(), held, "{policy:?}: still held");
            c.net.lock().unwrap().conns[c.conns[0]].refused = false;
            sleep(Duration::from_secs(1)).await;
            assert_eq!(
                c.states(0),
                [State::Open, State::Open],
                "{policy:?}: the fleet's trip"
            );
        });
    }
}

#[test]
fn dropping_the_fleet_while_the_store_is_down_gives_every_breaker_back() {
    for policy in [OnStoreError::Open, OnStoreError::Closed] {
        paused(|| async move {
            let mut c = cluster(1, &["payments", "tripped"], consecutive(1), policy);
            sleep(Duration::from_millis(50)).await;
            fail(&c.breakers[0][1]);
            sleep(Duration::from_millis(50)).await;
            let before = c.breakers[0][1].held_state().open_remaining.unwrap();
            c.net.lock().unwrap().stopped = true;
            sleep(Duration::from_millis(1_500)).await;
            let held = if policy == OnStoreError::Open {
                State::ForcedOpen
            } else {
                State::Disabled
            };
            let states = |c: &Cluster| c.breakers[0].iter().map(Breaker::state).collect::<Vec<_>>();
            assert_eq!(
                states(&c),
                [held, held],
                "{policy:?}: held while the store is down"
            );
            drop(c.fleets[0].take());
            // At once, not when the task next runs.
            assert_eq!(
                states(&c),
                [State::Closed, State::Open],
                "{policy:?}: given back"
            );
            let left = c.breakers[0][1].held_state().open_remaining.unwrap();
            assert_eq!(
                before - left,
                Duration::from_millis(1_500),
                "{policy:?}: open time counted on"
            );
        });
    }
}

#[test]
fn losing_the_fleets_runtime_while_the_store_is_down_gives_every_breaker_back() {
    let net: NetRef = Arc::new(Mutex::new(Net::new(ChaCha8Rng::seed_from_u64(7), false)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (fleet, breaker) = rt.block_on(async {
        let (conn, pushes) = net.lock().unwrap().connect();
        let fleet = Fleet::with_store(
            FleetConfig::new("redis://sim/")
                .prefix(PREFIX)
                .timeout(Duration::from_millis(100))
                .on_store_error(OnStoreError::Open),
            Box::new(SimStore {
                id: conn,
                net: net.clone(),
            }),
            pushes,
            &tokio::runtime::Handle::current(),
        );
        let breaker = Breaker::new("payments", consecutive(1)(SimClock(Instant::now())));
        fleet.share(&breaker);
        net.lock().unwrap().stopped = true;
        sleep(Duration::from_millis(1_500)).await;
        assert_eq!(breaker.state(), State::ForcedOpen, "held");
        (fleet, breaker)
    });
    drop(rt);
    assert_eq!(
        breaker.state(),
        State::Closed,
        "the runtime is gone: given back"
    );
    drop(fleet);
}

#[test]
fn an_idle_fleet_runs_at_most_half_open_calls_probes() {
    paused(|| async {
        let config = |clock: SimClock| {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .half_open_calls(2)
                .successes(1)
                .probe_timeout(Duration::from_secs(1))
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(3, &["payments"], config, OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[0][0]);
        // No calls for 3.2 s: open time, the leases of whoever asked first, and more.
        sleep(Duration::from_millis(3_200)).await;
        // Then every instance tries three calls within 600 ms, each kept in flight.
        let mut probes = Vec::new();
        for round in 0..3 {
            for k in 0..3 {
                if let Ok(p) = c.breakers[k][0].try_acquire_owned() {
                    assert!(
                        p.is_probe(),
                        "round {round}, instance {k}: half-open calls probe"
                    );
                    probes.push((k, p));
                }
            }
            sleep(Duration::from_millis(200)).await;
        }
        let who: Vec<usize> = probes.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            probes.len(),
            2,
            "half_open_calls = 2 fleet-wide; probes from {who:?}"
        );
    });
}

#[test]
fn a_foreign_message_on_the_channel_leaves_the_task_running() {
    paused(|| async {
        let c = cluster(2, &["payments"], consecutive(1), OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        for payload in [
            &b"18446744073709551615:x"[..],
            b"1:a18446744073709551615:",
            b"\xff\xfe:garbage",
            b"",
        ] {
            c.net
                .lock()
                .unwrap()
                .publish(format!("{PREFIX}:changes").as_bytes(), payload);
        }
        sleep(Duration::from_millis(50)).await;
        for (k, f) in c.fleets.iter().enumerate() {
            assert!(
                !f.as_ref().unwrap().task.is_finished(),
                "instance {k}'s task runs"
            );
        }
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(50)).await;
        assert_eq!(c.states(0), [State::Open, State::Open], "still shared");
    });
}

#[test]
fn a_slow_store_holds_and_gives_back_without_losing_the_fleets_trip() {
    paused(|| async {
        let c = cluster(2, &["payments"], consecutive(1), OnStoreError::Open);
        sleep(Duration::from_millis(50)).await;
        c.net.lock().unwrap().weather = Weather {
            delay_ms: 300,
            ..Weather::default()
        };
        fail(&c.breakers[1][0]);
        sleep(Duration::from_secs(2)).await;
        c.net.lock().unwrap().weather = Weather::default();
        sleep(Duration::from_secs(1)).await;
        assert_eq!(c.record_state("payments").as_deref(), Some("open"));
        assert_eq!(c.states(0), [State::Open, State::Open]);
    });
}

#[test]
fn a_change_published_during_a_long_pass_is_taken_on_before_the_pass_ends() {
    paused(|| async {
        // Instance 0 shares 600 breakers: a full re-read pass takes three batches, 200 ms each
        // over a store 100 ms away. Instance 1 shares the last of them.
        let names: Vec<String> = (0..600).map(|i| format!("b{i:03}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let c = cluster(1, &refs, consecutive(1), OnStoreError::Local);
        let other = {
            let (conn, pushes) = c.net.lock().unwrap().connect();
            let fleet = Fleet::with_store(
                FleetConfig::new("redis://sim/")
                    .prefix(PREFIX)
                    .instance("other")
                    .timeout(Duration::from_millis(500)),
                Box::new(SimStore {
                    id: conn,
                    net: c.net.clone(),
                }),
                pushes,
                &tokio::runtime::Handle::current(),
            );
            let b = Breaker::new("b599", consecutive(1)(SimClock(Instant::now())));
            fleet.share(&b);
            (fleet, b)
        };
        sleep(Duration::from_millis(1_500)).await;
        c.net.lock().unwrap().weather = Weather {
            delay_ms: 100,
            ..Weather::default()
        };
        // A full pass of instance 0 (asked for by hand: every record), and in its first batch
        // the other instance's trip.
        let fleet = c.fleets[0].as_ref().unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        let pass = async {
            let ok = fleet.resync().await;
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            ok
        };
        let watch = async {
            sleep(Duration::from_millis(50)).await;
            fail(&other.1);
            let tripped = Instant::now();
            while c.breakers[0][599].state() != State::Open {
                sleep(Duration::from_millis(1)).await;
                assert!(tripped.elapsed() < Duration::from_secs(2), "never taken on");
            }
            let took = tripped.elapsed();
            assert!(
                !done.load(std::sync::atomic::Ordering::Relaxed),
                "taken on mid-pass, after {took:?}"
            );
            assert!(
                took <= Duration::from_millis(400),
                "one batch's wait at most: {took:?}"
            );
        };
        let (ok, ()) = tokio::join!(pass, watch);
        assert!(ok);
        drop(other);
    });
}

#[test]
fn a_trip_by_hand_of_a_breaker_the_fleet_holds_open_reaches_every_instance() {
    paused(|| async {
        let c = cluster(2, &["payments"], consecutive(1), OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        // Instance 1 trips: open for a minute on both.
        fail(&c.breakers[1][0]);
        sleep(Duration::from_secs(1)).await;
        assert_eq!(c.states(0), [State::Open, State::Open]);
        // An operator opens it for ten minutes on instance 0, while it is open: the fleet
        // holds it open that long, on every instance.
        c.breakers[0][0].trip_for(Duration::from_secs(600));
        sleep(Duration::from_secs(1)).await;
        let reason = c.record_field("payments", "reason").unwrap_or_default();
        assert!(reason.starts_with("tripped for "), "{reason}");
        let left = c.breakers[1][0].export_state().open_remaining.unwrap();
        assert!(
            left > Duration::from_secs(590),
            "instance 1 opens for the fleet's ten minutes, not the minute it had: {left:?}"
        );
    });
}

/// Durations past what a clock can add (`Duration::MAX` as `resync_every`, `timeout`,
/// `key_ttl` and a `trip_for`) never stop the fleet's task: the trip reaches the other
/// instance, and so does a reset made there, on every store policy.
#[test]
fn durations_past_any_clock_leave_the_fleet_sharing() {
    for policy in POLICIES {
        paused(|| async move {
            let c = super::harness::cluster_with(2, &["payments"], consecutive(1), |f| {
                f.on_store_error(policy)
                    .resync_every(Duration::MAX)
                    .timeout(Duration::MAX)
                    .key_ttl(Duration::MAX)
            });
            sleep(Duration::from_millis(50)).await;
            c.breakers[0][0].trip_for(Duration::MAX);
            sleep(Duration::from_secs(2)).await;
            assert_eq!(c.states(0), [State::Open, State::Open], "{policy:?}");
            c.breakers[1][0].reset();
            sleep(Duration::from_secs(2)).await;
            assert_eq!(c.states(0), [State::Closed, State::Closed], "{policy:?}");
        });
    }
}

/// A fleet whose first pass has no record to read (nothing shared yet) says it is connected
/// once the store has answered, as `FleetStatus::connected` promises ("the last store
/// operation succeeded").
#[test]
fn a_fleet_with_nothing_to_read_yet_says_it_is_connected() {
    paused(|| async move {
        let c = cluster(1, &[], consecutive(1), OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        let status = c.fleets[0].as_ref().unwrap().status();
        assert!(status.resyncs >= 1, "{status:?}");
        assert!(status.connected, "{status:?}");
    });
}

/// A breaker that took the fleet's trip on is held open one `probe_timeout` past the open time
/// it reports, waiting for a probe lease. Once its `Fleet` is dropped no lease comes: it
/// probes on its own when the open time it reports runs out, as an unshared breaker does.
#[test]
fn a_dropped_fleets_breaker_probes_when_the_open_time_it_reports_runs_out() {
    paused(|| async {
        let mut c = cluster(2, &["payments"], consecutive(1), OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(100)).await;
        let b = c.breakers[1][0].clone();
        assert_eq!(b.state(), State::Open, "the fleet's trip, taken on");
        let shown = b.export_state().open_remaining.expect("open");
        drop(c.fleets[1].take());
        sleep(Duration::from_millis(10)).await;
        assert_eq!(
            b.export_state().open_remaining,
            b.held_state().open_remaining
        );
        sleep(shown).await;
        let probe = b.try_acquire();
        assert!(
            probe.is_ok(),
            "rejected once the open time it reported ran out: {:?} left",
            b.held_state().open_remaining
        );
    });
}

/// A `probe_timeout` past what a clock can add (`Duration::MAX`) never stops the fleet's task:
/// a trip taken on is held open as any other, and the fleet goes on sharing.
#[test]
fn a_probe_timeout_past_any_clock_leaves_the_fleet_sharing() {
    paused(|| async move {
        let config = |clock| {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(60))
                .probe_timeout(Duration::MAX)
                .clock(clock)
                .build()
                .unwrap()
        };
        let c = cluster(2, &["payments"], config, OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_secs(2)).await;
        assert_eq!(
            c.states(0),
            [State::Open, State::Open],
            "the trip reached both"
        );
        c.breakers[1][0].reset();
        sleep(Duration::from_secs(2)).await;
        assert_eq!(c.states(0), [State::Closed, State::Closed], "and the reset");
    });
}

/// A record that vanishes (`FLUSHALL`, a restart without persistence) while the fleet holds it
/// open is written again for the open time that was left, as the instances report it: not
/// that plus the `probe_timeout` each instance holds an open record for, which would put the
/// fleet's next probe (and every instance's `retry_after`) one `probe_timeout` later.
#[test]
fn a_vanished_open_record_is_written_again_for_the_open_time_left() {
    paused(|| async {
        let c = cluster(2, &["payments"], consecutive(1), OnStoreError::Local);
        sleep(Duration::from_millis(50)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(100)).await;
        let until = |c: &Cluster| -> u64 {
            c.record_field("payments", "open_until")
                .expect("a record")
                .parse()
                .unwrap()
        };
        let before = until(&c);
        c.delete("payments");
        sleep(Duration::from_secs(2)).await;
        assert_eq!(c.record_state("payments").as_deref(), Some("open"));
        let again = until(&c);
        assert!(
            again <= before + 10,
            "written again open until {again}, {} ms past the fleet's {before}",
            again - before
        );
        for b in [&c.breakers[0][0], &c.breakers[1][0]] {
            let left = b.export_state().open_remaining.unwrap();
            assert!(left <= Duration::from_secs(58), "{left:?} reported");
        }
    });
}

/// A trip made while the store is down, under `on_store_error = "open"`: the breaker is held,
/// then given back when the store answers, and keeps the failure that tripped it, which the
/// trip's record then carries to every instance (`last_failure`, `web-1: HTTP 503`).
#[test]
fn a_trip_held_for_a_failing_store_keeps_its_failure() {
    paused(|| async {
        let c = cluster(2, &["payments"], consecutive(1), OnStoreError::Open);
        sleep(Duration::from_millis(50)).await;
        c.net.lock().unwrap().stopped = true;
        let _ = c.breakers[0][0].call(|| Err::<(), _>("HTTP 503"));
        sleep(Duration::from_secs(1)).await;
        assert_eq!(c.breakers[0][0].state(), State::ForcedOpen, "held");
        c.net.lock().unwrap().stopped = false;
        sleep(Duration::from_secs(1)).await;
        assert_eq!(c.states(0), [State::Open, State::Open]);
        assert_eq!(c.breakers[0][0].last_failure().as_deref(), Some("HTTP 503"));
        assert_eq!(
            c.record_field("payments", "last_failure").as_deref(),
            Some("HTTP 503")
        );
        assert_eq!(
            c.breakers[1][0].last_failure().as_deref(),
            Some("i0: HTTP 503")
        );
    });
}
