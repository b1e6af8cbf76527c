//! Keyed families (`BreakerMap`) at their bounds: room made at the hard cap, evicted
//! breakers freed, and idle keys dated right.

use std::sync::Mutex;
use std::time::Duration;

use breakerbox_runtime::{BreakerMap, Config, Error, ManualClock, State, live_breakers};

use crate::support::{config, serial};

/// The family grew to its hard cap (twice `max_keys`) with open keys, so new keys went to the
/// overflow breaker, and a failing new key opened it. Then every held key's host recovered:
/// their half-open probes succeeded and all eight keys are closed, four above `max_keys`.
/// A new key for a healthy host should now get its own breaker: the family is above
/// `max_keys` with closed keys it evicts under pressure ("past that, new keys share one
/// overflow breaker until eviction makes room"; "above `max_keys` the least recently called
/// closed keys are" evicted). The pressure sweep a new key triggers must run at the cap: a
/// threshold above it (the cap plus an eighth of `max_keys`) is a length the map never reaches,
/// since at the cap new keys are not inserted, and only the time-based sweep (an eighth of
/// `idle_for`, 75 s by default) would make room, every new key rejected by the open overflow
/// breaker until then.
#[test]
fn closed_keys_above_max_keys_make_room_for_a_new_key_at_the_hard_cap() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("bounds-cap", config(&clock, 4, 600));
    for i in 0..8 {
        let r = map.call(&format!("down{i}"), || Err::<(), _>("refused"));
        assert!(matches!(r, Err(Error::Inner(_))));
    }
    assert_eq!(map.len(), 8, "grown to twice max_keys with open keys");
    // A failing new key goes to the overflow breaker and opens it.
    clock.advance(Duration::from_secs(50));
    let _ = map.call("also-down", || Err::<(), _>("refused"));
    let overflow = map.overflow().expect("the overflow breaker");
    assert_eq!(overflow.state(), State::Open);
    // The held keys' open time runs out and their hosts are back: each closes on a probe.
    clock.advance(Duration::from_secs(11));
    for i in 0..8 {
        let key = format!("down{i}");
        assert_eq!(map.get(&key).unwrap().state(), State::HalfOpen);
        map.call(&key, || Ok::<_, &str>(())).unwrap();
        assert_eq!(map.get(&key).unwrap().state(), State::Closed);
    }
    assert_eq!(map.open_keys(), 0);
    assert_eq!(map.len(), 8, "eight closed keys, four above max_keys");
    // A new, healthy key: room can be made at once by evicting closed keys.
    let r = map.call("healthy", || Ok::<_, &str>(()));
    assert!(
        r.is_ok(),
        "a new key was rejected by the open overflow breaker while {} closed keys sit above max_keys 4: {r:?}",
        map.len() - 4
    );
    assert!(!map.breaker("healthy").ptr_eq(&overflow));
}

/// A family bounded below 8 keys stays within its bound with closed keys: each new key past it
/// evicts the least recently called, as for larger bounds (whose sweeps make room for an
/// eighth of the bound at once).
#[test]
fn a_family_of_fewer_than_eight_keys_stays_within_its_bound() {
    let _s = serial();
    for max_keys in [1, 4, 7] {
        let clock = ManualClock::new();
        let map: BreakerMap<String> =
            BreakerMap::new("bounds-small", config(&clock, max_keys, 600));
        for i in 0..100 {
            map.call(&format!("host-{i}"), || Ok::<_, &str>(()))
                .unwrap();
            assert!(
                map.len() <= max_keys as usize,
                "{} keys of {max_keys}",
                map.len()
            );
            clock.advance(Duration::from_millis(10));
        }
        assert_eq!(map.len(), max_keys as usize);
        assert!(map.get("host-99").is_some(), "the last key called is kept");
    }
}

/// `BreakerMap::get`: "Once the handle is dropped, the evicted breaker is freed by the
/// family's next sweep or `evicted` read". A handle is kept across an eviction and dropped;
/// the family goes on serving its known keys (no new key, so no sweep on its own). The
/// breaker waits in the family's list of evicted breakers, so that its counts reach
/// `evicted`, and the next explicit sweep frees it (not the handle's drop).
#[test]
fn an_evicted_breaker_is_freed_by_the_next_sweep_after_its_last_handle_is_dropped() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("bounds-free", config(&clock, 100, 10));
    map.call("steady", || Ok::<_, &str>(())).unwrap();
    map.call("k", || Ok::<_, &str>(())).unwrap();
    let kept = map.get("k").unwrap();
    clock.advance(Duration::from_secs(11));
    map.call("steady", || Ok::<_, &str>(())).unwrap();
    assert_eq!(map.sweep(), 1, "`k` is idle");
    assert!(map.get("k").is_none());
    kept.call(|| Err::<(), _>("late")).unwrap_err();
    let before = live_breakers();
    drop(kept);
    for _ in 0..10 {
        map.call("steady", || Ok::<_, &str>(())).unwrap();
    }
    assert_eq!(
        live_breakers(),
        before,
        "kept for its counts until the next sweep"
    );
    assert_eq!(map.sweep(), 0, "nothing else is idle");
    assert_eq!(live_breakers(), before - 1, "the sweep freed it");
    let evicted = map.evicted();
    assert_eq!(
        (
            evicted.keys,
            evicted.calls,
            evicted.successes,
            evicted.failures
        ),
        (1, 2, 1, 1)
    );
}

/// `BreakerMap::sweep`: "call this to free idle keys of a family that sees no new ones". A
/// burst of keys goes idle and a sweep evicts them, with no handle, permit or rejection
/// holding any of them: their breakers are freed when `sweep` returns, not left in `limbo`
/// for a later prune (the next sweep, or `evicted()`) by the sweeping thread's own pin on the
/// removed slots: in a family that sees no new key and whose `evicted` nobody reads, that
/// prune would never come.
#[test]
fn a_sweep_frees_the_breakers_it_evicts() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("bounds-sweep-free", config(&clock, 1_000, 10));
    for i in 0..100 {
        map.call(&format!("burst-{i}"), || Ok::<_, &str>(()))
            .unwrap();
    }
    let before = live_breakers();
    clock.advance(Duration::from_secs(11));
    assert_eq!(map.sweep(), 100);
    assert!(map.is_empty());
    let after_sweep = live_breakers();
    let _ = map.evicted();
    assert_eq!(live_breakers(), before - 100, "freed by the next prune");
    assert_eq!(
        after_sweep,
        before - 100,
        "the sweep left {} evicted breakers allocated",
        after_sweep + 100 - before
    );
}

/// A manual clock whose next reading can be set back once: a user's clock that is not
/// monotonic, or a time read before the reader was preempted while another sweep ran.
#[derive(Clone)]
struct SetBack {
    clock: ManualClock,
    next: std::sync::Arc<Mutex<Option<Duration>>>,
}

impl breakerbox_runtime::Clock for SetBack {
    fn now(&self) -> Duration {
        let next = self.next.lock().unwrap().take();
        next.unwrap_or_else(|| breakerbox_runtime::Clock::now(&self.clock))
    }
}

/// A sweep dated earlier than the sweep before it dated the calls since that one too early:
/// a key called 1 s ago was evicted as idle for 10 s. A sweep's time is now never before the
/// last sweep's.
#[test]
fn a_sweep_dated_before_the_last_one_does_not_evict_a_key_called_since() {
    let _s = serial();
    let manual = ManualClock::new();
    let clock = SetBack {
        clock: manual.clone(),
        next: Default::default(),
    };
    let config = Config::builder()
        .failures(1)
        .idle_for(Duration::from_secs(10))
        .clock(clock.clone())
        .build()
        .unwrap();
    let map: BreakerMap<String> = BreakerMap::new("bounds-stale-sweep", config);
    manual.advance(Duration::from_secs(100));
    map.call("a", || Ok::<_, &str>(())).unwrap();
    assert_eq!(map.sweep(), 0, "t = 100 s");
    manual.advance(Duration::from_secs(5));
    map.call("a", || Ok::<_, &str>(())).unwrap(); // t = 105 s: the last call
    *clock.next.lock().unwrap() = Some(Duration::from_secs(95));
    assert_eq!(map.sweep(), 0, "read as t = 95 s, before the last sweep");
    manual.advance(Duration::from_secs(1));
    assert_eq!(map.sweep(), 0, "t = 106 s: `a` was called 1 s ago");
    assert!(map.get("a").is_some());
    manual.advance(Duration::from_secs(10));
    assert_eq!(map.sweep(), 1, "t = 116 s: idle for 11 s");
}
