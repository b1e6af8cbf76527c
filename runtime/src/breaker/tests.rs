//! Unit tests of the breaker's handles, layout and config pool.

use core::time::Duration;
use std::sync::Arc;

use super::inner::Inner;
use super::{Breaker, WeakBreaker};
use crate::config::Config;
use crate::config::pool::POOL_WORK;
use crate::outcome::Outcome;
use crate::state::State;

/// Per-key breakers are made by the thousand: a breaker (its shared config aside) fits in
/// three cache lines, one of them the owning thread's counter stripe, and its handle is a
/// pointer (`Option<Breaker>` too).
#[test]
fn a_breaker_fits_in_three_cache_lines() {
    assert_eq!(size_of::<Inner>(), 192);
    assert_eq!(size_of::<Breaker>(), 8);
    assert_eq!(size_of::<Option<Breaker>>(), 8);
    assert_eq!(size_of::<crate::Rejected>(), 32);
}

/// A `Breaker::new` breaker lives until its last handle (or owned permit) is dropped, and
/// is freed then: its listeners, and what they hold, with it.
#[test]
fn the_last_handle_frees_the_breaker() {
    let alive = Arc::new(());
    let b = Breaker::new("freed", Config::default());
    let held = alive.clone();
    b.on_state_change(move |_| {
        let _ = &held;
    });
    let handles: Vec<Breaker> = (0..3).map(|_| b.clone()).collect();
    let permit = b.try_acquire_owned().unwrap();
    drop(b);
    std::thread::scope(|s| {
        for h in handles {
            s.spawn(move || h.force_open());
        }
    });
    assert_eq!(Arc::strong_count(&alive), 2, "freed while a permit held it");
    assert_eq!(permit.breaker().state(), State::ForcedOpen);
    permit.record(Outcome::Success);
    assert_eq!(
        Arc::strong_count(&alive),
        1,
        "not freed with its last handle"
    );
}

/// Registry breakers live for the process: their rejections and leases hold no reference
/// count, and dropping every handle leaves the breaker in place.
#[test]
fn registry_rejections_and_leases_count_no_references() {
    let b = Breaker::unpublished("leaked".into(), Config::default()).publish();
    let report = Arc::strong_count(&b.inner().report);
    let state = Arc::strong_count(b.shared());
    b.force_open();
    let rejected = b.try_acquire().unwrap_err();
    assert_eq!(Arc::strong_count(&b.inner().report), report);
    drop(rejected);
    b.reset();
    let lease = b.try_lease().unwrap();
    assert_eq!(Arc::strong_count(b.shared()), state);
    lease.record(Outcome::Success);
    let c = b.clone();
    drop(b);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.metrics().successes, 1);
}

/// A `Breaker::new` breaker's rejection holds a count on what it reports, not on the breaker:
/// it outlives the breaker and still names it and its last failure.
#[test]
fn a_rejection_outlives_its_breaker_and_still_reports_it() {
    let b = Breaker::new("gone", Config::builder().failures(1).build().unwrap());
    let weak = b.downgrade();
    b.call(|| Err::<(), _>("refused")).unwrap_err();
    let rejected = b.try_acquire().unwrap_err();
    drop(b);
    assert!(weak.upgrade().is_none(), "a rejection is not a handle");
    assert_eq!(rejected.name(), "gone");
    assert_eq!(rejected.last_failure().as_deref(), Some("refused"));
}

/// A listener that acts on its own breaker through a weak handle keeps it alive no
/// longer than its users do: the last user handle frees the breaker, its listener and
/// what that holds, and the weak handles left then upgrade to nothing.
#[test]
fn a_listener_acting_on_its_own_breaker_does_not_keep_it_alive() {
    let alive = Arc::new(());
    let clock = crate::ManualClock::new();
    let config = Config::builder().failures(1).clock(clock.clone()).build();
    let b = Breaker::new("self-acting", config.unwrap());
    let weak = b.downgrade();
    let held = alive.clone();
    b.on_state_change(move |e| {
        let _ = &held;
        let Some(b) = weak.upgrade() else { return };
        match e.to {
            // Trips are answered by forcing it open; a reset closes it for good.
            State::Open => b.force_open(),
            State::ForcedOpen => assert_eq!(b.state(), State::ForcedOpen),
            _ => {}
        }
    });
    b.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(b.state(), State::ForcedOpen, "the listener acted on it");
    b.reset();
    assert_eq!(b.state(), State::Closed);
    let outside = b.downgrade();
    let other = outside.clone();
    assert!(outside.upgrade().unwrap().ptr_eq(&b));
    assert_eq!(Arc::strong_count(&alive), 2);
    drop(b);
    assert_eq!(
        Arc::strong_count(&alive),
        1,
        "the breaker outlived its last handle"
    );
    assert!(outside.upgrade().is_none());
    drop(outside);
    assert!(other.upgrade().is_none());
}

/// An owned permit is a handle: a weak handle upgrades while it lives.
#[test]
fn a_weak_handle_upgrades_while_an_owned_permit_lives() {
    let b = Breaker::new("weak-permit", Config::default());
    let weak = b.downgrade();
    let permit = b.try_acquire_owned().unwrap();
    drop(b);
    let again = weak.upgrade().expect("the permit keeps it alive");
    permit.record(Outcome::Success);
    assert_eq!(again.metrics().successes, 1);
    drop(again);
    assert!(weak.upgrade().is_none());
}

/// Registry breakers live for the process: their weak handles always upgrade.
#[test]
fn a_registry_breakers_weak_handle_always_upgrades() {
    let b = Breaker::unpublished("weak-registered".into(), Config::default()).publish();
    let weak = b.downgrade();
    drop(b);
    assert_eq!(weak.clone().upgrade().unwrap().name(), "weak-registered");
}

/// Weak handles dropped on other threads while the last handle goes: the memory is freed
/// once, by whichever is last (the loom model checks the orderings; this, the counts).
#[test]
fn weak_and_strong_handles_dropped_across_threads() {
    // Under Miri, whose interpreter runs threads a thousand times slower, a few rounds.
    for _ in 0..if cfg!(miri) { 5 } else { 100 } {
        let b = Breaker::new("weak-threads", Config::default());
        let weaks: Vec<WeakBreaker> = (0..4).map(|_| b.downgrade()).collect();
        std::thread::scope(|s| {
            for w in weaks {
                s.spawn(move || {
                    if let Some(b) = w.upgrade() {
                        b.force_open();
                    }
                });
            }
            s.spawn(move || drop(b));
        });
    }
}

/// Creating a breaker costs O(1) amortized whatever the number of live breakers:
/// 100 000 live breakers, each with a clock of its own (so no two configs are equal), and
/// 100 000 with distinct plain configs, are created with a bounded number of pool
/// comparisons and sweep steps per creation. The scan this replaces made ~N²/2.
#[test]
#[cfg_attr(miri, ignore = "200 000 breakers: too slow for Miri's interpreter")]
fn creation_is_constant_work_at_any_number_of_live_breakers() {
    const N: u64 = 100_000;
    let work = || POOL_WORK.with(core::cell::Cell::get);
    let start = work();
    let own_clocks: Vec<Breaker> = (0..N)
        .map(|_| {
            let c = Config::builder().clock(crate::ManualClock::new()).build();
            Breaker::new("per-key", c.unwrap())
        })
        .collect();
    let spent = work() - start;
    assert!(spent <= 4 * N, "{spent} pool steps for {N} creations");
    let start = work();
    let distinct: Vec<Breaker> = (0..N)
        .map(|i| {
            let c = Config::builder().open_for(Duration::from_millis(i + 1));
            Breaker::new("per-key", c.build().unwrap())
        })
        .collect();
    let spent = work() - start;
    assert!(spent <= 4 * N, "{spent} pool steps for {N} creations");
    // Equal configs still share one allocation, found by hash.
    let again = Breaker::new("per-key", distinct[7].config().clone());
    assert!(core::ptr::eq(
        &*again.inner().config,
        &*distinct[7].inner().config
    ));
    let twin = Breaker::new("per-key", own_clocks[9].config().clone());
    assert!(core::ptr::eq(
        &*twin.inner().config,
        &*own_clocks[9].inner().config
    ));
    assert!(!core::ptr::eq(
        &*own_clocks[0].inner().config,
        &*own_clocks[1].inner().config
    ));
}

/// A reload swaps the config a breaker's calls read: a permit taken under the old config
/// records after the swap, the next calls are judged by the new one, and the replaced config
/// stays readable through a reference taken before the swap.
#[test]
fn a_reload_swaps_the_config_under_calls_in_flight() {
    let b = Breaker::new("reload", Config::builder().failures(3).build().unwrap());
    let before: &Config = b.config();
    let in_flight = b.try_acquire().unwrap();
    assert_eq!(
        b.reconfigure(Config::builder().failures(2).build().unwrap()),
        Ok(true)
    );
    assert_eq!(before.failures, 3, "the replaced config is still readable");
    assert_eq!(b.config().failures, 2);
    in_flight.record(Outcome::Failure);
    b.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(
        b.state(),
        State::Open,
        "two failures trip under the new config"
    );
}

/// Calls on one thread while another reconfigures the breaker back and forth: every call is
/// judged by one whole config, no outcome is lost, and the breaker ends on the last config.
/// (Under Miri, `scripts/test` checks the calls' reads of the config against the swaps.)
#[test]
fn calls_racing_reconfigures_lose_no_outcome() {
    let rounds: u64 = if cfg!(miri) { 10 } else { 1_000 };
    let config = |n| Config::builder().failures(n).build().unwrap();
    let b = Breaker::new("racing-reload", config(1_000_000));
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..rounds {
                let n = if i % 2 == 0 { 999_999 } else { 1_000_000 };
                assert_eq!(b.reconfigure(config(n)), Ok(true));
            }
        });
        for _ in 0..rounds {
            assert!(matches!(b.config().failures, 999_999 | 1_000_000));
            b.call(|| Err::<(), _>("down")).unwrap_err();
            b.call(|| Ok::<_, &str>(())).unwrap();
        }
    });
    let m = b.metrics();
    assert_eq!((m.failures, m.successes), (rounds, rounds));
    assert_eq!(b.config().failures, 1_000_000);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn equal_configs_share_one_allocation() {
    let a = Breaker::new("a", Config::default());
    let b = Breaker::new("b", Config::default());
    assert!(core::ptr::eq(&*a.inner().config, &*b.inner().config));
    let c = Breaker::new("c", Config::builder().failures(9).build().unwrap());
    assert!(!core::ptr::eq(&*a.inner().config, &*c.inner().config));
}

/// A probe budget (fleet mode's leases) admits that many probes a round, not
/// `half_open_calls`; a budget of 0 keeps the breaker open past its open time; `None`
/// gives the config's limit back; a closed breaker never reads it.
#[test]
fn a_probe_budget_limits_the_probes_of_a_round() {
    use crate::error::RejectReason;
    let clock = crate::ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .half_open_calls(3)
        .successes(2)
        .open_for(Duration::from_secs(1))
        .probe_timeout(Duration::from_secs(10))
        .clock(clock.clone());
    let b = Breaker::new("budget", config.build().unwrap());
    let trip = |b: &Breaker| {
        b.call(|| Err::<(), _>("down")).unwrap_err();
        assert_eq!(b.state(), State::Open);
        clock.advance(Duration::from_secs(1));
    };

    // Closed: a budget of 0 changes nothing.
    b.set_probe_budget(Some(0));
    assert!(b.call(|| Ok::<_, &str>(())).is_ok());
    trip(&b);
    // Budget 0: past its open time, still open, every call rejected, with no retry time.
    for _ in 0..3 {
        let e = b.try_acquire().unwrap_err();
        assert_eq!(e.reason(), RejectReason::Open);
        assert_eq!(e.retry_after(), None);
    }
    assert_eq!(b.state(), State::Open);

    // Budget 2 of half_open_calls 3: two probes, the third refused.
    b.set_probe_budget(Some(2));
    let first = b.try_acquire().unwrap();
    assert!(first.is_probe());
    let second = b.try_acquire().unwrap();
    let e = b.try_acquire().unwrap_err();
    assert_eq!(e.reason(), RejectReason::HalfOpenFull);
    first.record(Outcome::Success);
    second.record(Outcome::Success);
    assert_eq!(b.state(), State::Closed, "two successes close it");

    // Budget 5: the config's 3 still bound the round.
    b.set_probe_budget(Some(5));
    trip(&b);
    let held: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(
        b.try_acquire().unwrap_err().reason(),
        RejectReason::HalfOpenFull
    );
    drop(held);

    // None: the limit is lifted, the config's 3 again.
    b.set_probe_budget(None);
    b.reset();
    trip(&b);
    let held: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert!(b.try_acquire().is_err());
    drop(held);
}
