//! Quorum trips (`fleet_trip = "quorum"`), step by step on the model store: the instances run
//! the production fleet code and `quorum.lua`/`heartbeat.lua` themselves.

use core::time::Duration;

use tokio::time::sleep;

use super::harness::{Cluster, cluster_with, consecutive, fail, paused};
use crate::{FleetTrip, Quorum};
use breakerbox_runtime::__integrations::BreakerExt;
use breakerbox_runtime::State;

fn quorum(n: usize, q: Quorum) -> Cluster {
    cluster_with(n, &["payments"], consecutive(1), with_quorum(q))
}

fn with_quorum(q: Quorum) -> impl Fn(crate::FleetConfig) -> crate::FleetConfig {
    move |f| {
        f.resync_every(Duration::from_millis(200))
            .fleet_trip(FleetTrip::Quorum(q))
    }
}

#[test]
fn a_host_whose_process_restarts_and_trips_again_is_one_open_host() {
    paused(|| async {
        let mut c = quorum(3, Quorum::Instances(2));
        sleep(Duration::from_millis(500)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(c.states(0), [State::Open, State::Closed, State::Closed]);
        // Its process dies with its report and heartbeat still in the store (open 60 s, the
        // beat for 600 ms), and starts again on the same host, where its dependency still
        // fails: the new process trips too.
        c.restart(
            0,
            &["payments"],
            consecutive(1),
            with_quorum(Quorum::Instances(2)),
        );
        sleep(Duration::from_millis(100)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(300)).await;
        assert_eq!(
            c.record_state("payments"),
            None,
            "one host, however many processes it had, is one open report"
        );
        assert_eq!(c.states(0), [State::Open, State::Closed, State::Closed]);
        let view = c.fleets[0].as_ref().unwrap().instances();
        assert_eq!(view[0].last_tally, Some((1, 2, 3)), "1 open of 2, 3 live");
        // A second host's trip is the quorum.
        fail(&c.breakers[1][0]);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(c.states(0), [State::Open; 3]);
    });
}

#[test]
fn one_instance_failing_alone_opens_only_itself() {
    paused(|| async {
        let c = quorum(3, Quorum::Instances(2));
        // Every instance has beaten once: three live.
        sleep(Duration::from_millis(500)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_secs(2)).await;
        assert_eq!(c.states(0), [State::Open, State::Closed, State::Closed]);
        assert_eq!(c.record_state("payments"), None, "no record was written");
        let view = c.fleets[0].as_ref().unwrap().instances();
        assert_eq!(
            view[0].last_tally,
            Some((1, 2, 3)),
            "1 open of 2 needed, 3 live"
        );
        // The others see it open in the fleet view, and are closed themselves.
        let seen = c.fleets[1].as_ref().unwrap().instances();
        let states: Vec<_> = seen[0]
            .instances
            .iter()
            .map(|i| (i.instance.as_str(), i.state))
            .collect();
        assert_eq!(
            states,
            [
                ("i0", Some(State::Open)),
                ("i1", Some(State::Closed)),
                ("i2", Some(State::Closed))
            ]
        );
    });
}

#[test]
fn two_of_three_open_the_fleet() {
    paused(|| async {
        let c = quorum(3, Quorum::Instances(2));
        sleep(Duration::from_millis(500)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(100)).await;
        fail(&c.breakers[1][0]);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(c.states(0), [State::Open; 3]);
        assert_eq!(c.record_state("payments").as_deref(), Some("open"));
        let reason = c.record_field("payments", "reason");
        assert_eq!(
            reason.as_deref(),
            Some("quorum: 2 of 3 instances open (1 consecutive failure)")
        );
        // A reset on any instance closes every one, and empties the reports: one more trip
        // alone opens only its instance again.
        c.breakers[2][0].reset();
        sleep(Duration::from_millis(100)).await;
        assert_eq!(c.states(0), [State::Closed; 3]);
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(300)).await;
        assert_eq!(c.states(0), [State::Open, State::Closed, State::Closed]);
    });
}

#[test]
fn a_percentage_is_of_the_live_instances_rounded_up() {
    paused(|| async {
        // 50% of 4 is 2: the first trip stays local, the second opens the fleet.
        let c = quorum(4, Quorum::Percent(50));
        sleep(Duration::from_millis(500)).await;
        fail(&c.breakers[3][0]);
        sleep(Duration::from_millis(300)).await;
        assert_eq!(c.record_state("payments"), None);
        fail(&c.breakers[2][0]);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(c.states(0), [State::Open; 4]);
    });
}

#[test]
fn an_open_report_counts_for_its_open_time_only() {
    paused(|| async {
        // Open for 60 s here; trip_for-like short opens: an instance open 1 s, then another.
        let c = cluster_with(
            3,
            &["payments"],
            |clock| {
                breakerbox_runtime::Config::builder()
                    .failures(1)
                    .open_for(Duration::from_secs(1))
                    .clock(clock)
                    .build()
                    .unwrap()
            },
            |f| {
                f.resync_every(Duration::from_millis(200))
                    .fleet_trip(FleetTrip::Quorum(Quorum::Instances(2)))
            },
        );
        sleep(Duration::from_millis(500)).await;
        fail(&c.breakers[0][0]);
        // Its open time (1 s) passes: its report no longer counts.
        sleep(Duration::from_millis(1_500)).await;
        fail(&c.breakers[1][0]);
        sleep(Duration::from_millis(300)).await;
        assert_eq!(c.record_state("payments"), None, "one open at a time");
        assert_eq!(c.breakers[2][0].state(), State::Closed);
    });
}

#[test]
fn a_fleet_shrunk_to_one_trips_as_without_a_quorum() {
    paused(|| async {
        let mut c = quorum(3, Quorum::Instances(2));
        sleep(Duration::from_millis(500)).await;
        // Two instances go (their fleets dropped: no more heartbeats); within a heartbeat's
        // life (3 × 200 ms) the live set is the one left.
        c.fleets[1] = None;
        c.fleets[2] = None;
        sleep(Duration::from_millis(1_000)).await;
        let view = c.fleets[0].as_ref().unwrap().instances();
        assert_eq!(view[0].instances.len(), 1, "{view:?}");
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(c.record_state("payments").as_deref(), Some("open"));
        assert_eq!(
            c.record_field("payments", "reason").as_deref(),
            Some("quorum: 1 of 1 instances open (1 consecutive failure)")
        );
    });
}

#[test]
fn under_any_no_instance_beats_and_one_trip_still_opens_the_fleet() {
    paused(|| async {
        let c = cluster_with(3, &["payments"], consecutive(1), |f| {
            f.resync_every(Duration::from_millis(200))
        });
        sleep(Duration::from_millis(500)).await;
        // No breaker under a quorum: no heartbeat, and each instance's view is its own.
        let view = c.fleets[2].as_ref().unwrap().instances();
        assert_eq!(view.len(), 1);
        assert_eq!(view[0].trip, FleetTrip::Any);
        let seen: Vec<_> = view[0]
            .instances
            .iter()
            .map(|i| (i.instance.as_str(), i.state, i.this))
            .collect();
        assert_eq!(seen, [("i2", Some(State::Closed), true)]);
        assert!(
            !c.net
                .lock()
                .unwrap()
                .model
                .space
                .lock()
                .unwrap()
                .keys
                .contains_key(b"{sim:}:live".as_slice()),
            "no heartbeat was written"
        );
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(c.states(0), [State::Open; 3]);
    });
}

#[test]
fn under_a_quorum_each_instance_beats_once_a_pass_whatever_it_shares() {
    paused(|| async {
        let names: Vec<String> = (0..100).map(|i| format!("b{i:03}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let c = cluster_with(3, &refs, consecutive(1), with_quorum(Quorum::Instances(2)));
        sleep(Duration::from_millis(1_000)).await;
        c.net.lock().unwrap().counted = Default::default();
        sleep(Duration::from_millis(2_000)).await;
        let counted = core::mem::take(&mut c.net.lock().unwrap().counted);
        // 3 instances, a pass every 200 ms, for 2 s: 10 passes each, one beat a pass, and
        // `TIME` and the 16 idle records of a sweep.
        let beats = counted.get("Heartbeat").copied().unwrap_or(0);
        assert!((30..=33).contains(&beats), "{counted:?}");
        assert_eq!(counted.get("HMGET"), Some(&(beats * 16)), "{counted:?}");
        assert_eq!(counted.get("TIME"), Some(&beats), "{counted:?}");
        // One breaker open here: read every pass, and listed in the beat.
        fail(&c.breakers[1][7]);
        sleep(Duration::from_millis(500)).await;
        let view = c.fleets[0].as_ref().unwrap().instances();
        let b007 = view.iter().find(|b| b.name == "b007").unwrap();
        let states: Vec<_> = b007
            .instances
            .iter()
            .map(|i| (i.instance.as_str(), i.state))
            .collect();
        assert_eq!(
            states,
            [
                ("i0", Some(State::Closed)),
                ("i1", Some(State::Open)),
                ("i2", Some(State::Closed))
            ]
        );
    });
}

/// A breaker open alone under a quorum, held for a failing store (`on_store_error = "open"`),
/// gets its own open time back when the store answers, and reports it: its `retry_after` and
/// `open_remaining` count down to its own next probe, not one `probe_timeout` sooner (an open
/// record of the fleet's is held that much longer; this opening is not one).
#[test]
fn a_breaker_open_alone_reports_its_own_open_time_after_a_hold() {
    paused(|| async {
        let c = cluster_with(3, &["payments"], consecutive(1), |f| {
            with_quorum(Quorum::Instances(2))(f).on_store_error(crate::OnStoreError::Open)
        });
        sleep(Duration::from_millis(500)).await;
        fail(&c.breakers[0][0]);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(c.states(0), [State::Open, State::Closed, State::Closed]);
        c.net.lock().unwrap().stopped = true;
        sleep(Duration::from_secs(1)).await;
        assert_eq!(c.breakers[0][0].state(), State::ForcedOpen, "held");
        c.net.lock().unwrap().stopped = false;
        sleep(Duration::from_secs(1)).await;
        let b = &c.breakers[0][0];
        assert_eq!(b.state(), State::Open, "given back");
        let held = b.held_state().open_remaining.unwrap();
        let shown = b.export_state().open_remaining.unwrap();
        assert!(held > Duration::from_secs(55), "open {held:?} more");
        assert_eq!(shown, held, "reports {shown:?}, open {held:?}");
    });
}
