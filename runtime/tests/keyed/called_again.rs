//! A key called again and again: once evicted it gets a new breaker and the evicted one is
//! freed, a control through the registry changes the breaker its next call finds, a call may
//! call its family again, and a panic in a call leaves the counts exact. (`tests/loom/keyed.rs`
//! races a lookup against eviction.)

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use breakerbox_runtime::{BreakerMap, Error, ManualClock, RejectReason, State, registry};

use crate::support::{config, serial};

fn ok(map: &BreakerMap<String>, key: &str) -> Result<u32, Error<&'static str>> {
    map.call(key, || Ok(1))
}

/// Calls `key` four times, successfully.
fn call_often(map: &BreakerMap<String>, key: &str) {
    for _ in 0..4 {
        ok(map, key).unwrap();
    }
}

#[test]
fn an_evicted_key_called_again_gets_a_new_breaker_and_the_old_one_is_freed() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("again-evicted", config(&clock, 100, 10));
    call_often(&map, "a");
    let old = map.get("a").unwrap();
    let weak = old.downgrade();
    drop(old);
    assert_eq!(map.sweep(), 0);
    clock.advance(Duration::from_secs(11));
    assert_eq!(map.sweep(), 1);
    assert!(map.get("a").is_none());
    // The family held the evicted breaker's last handle; the sweep dropped it, and freed it.
    assert!(
        weak.upgrade().is_none(),
        "the evicted breaker is still alive"
    );
    // The next call makes the key a breaker of its own, which counts it.
    ok(&map, "a").unwrap();
    let new = map.get("a").unwrap();
    assert_eq!(new.metrics().calls, 1);
    let evicted = map.evicted();
    assert_eq!((evicted.keys, evicted.calls), (1, 4));
    call_often(&map, "a");
    assert_eq!(new.metrics().calls, 5);
}

#[test]
fn a_key_called_on_another_thread_after_its_eviction_reaches_its_new_breaker() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("again-other", config(&clock, 100, 10));
    std::thread::scope(|s| {
        let (to_caller, calls) = std::sync::mpsc::channel::<()>();
        let (to_main, done) = std::sync::mpsc::channel::<()>();
        let map = &map;
        s.spawn(move || {
            // Called often on this thread, then again after the eviction.
            call_often(map, "a");
            to_main.send(()).unwrap();
            calls.recv().unwrap();
            ok(map, "a").unwrap();
            to_main.send(()).unwrap();
        });
        done.recv().unwrap();
        assert_eq!(map.sweep(), 0);
        clock.advance(Duration::from_secs(11));
        assert_eq!(map.sweep(), 1);
        to_caller.send(()).unwrap();
        done.recv().unwrap();
    });
    assert_eq!(map.get("a").unwrap().metrics().calls, 1);
    assert_eq!(map.evicted().calls, 4);
}

#[test]
fn a_key_forced_open_by_the_registry_rejects_its_next_call() {
    let _s = serial();
    let clock = ManualClock::new();
    let map = registry()
        .family::<String>("again-controls", || config(&clock, 100, 600))
        .unwrap();
    call_often(&map, "a");
    registry().force_open_key("again-controls", "a").unwrap();
    let r = ok(&map, "a").unwrap_err();
    assert_eq!(r.rejected().unwrap().reason(), RejectReason::ForcedOpen);
    registry().reset_key("again-controls", "a").unwrap();
    assert_eq!(ok(&map, "a").unwrap(), 1);
    assert_eq!(map.get("a").unwrap().state(), State::Closed);
}

#[test]
fn a_call_through_a_key_may_call_its_family_again() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("again-reentry", config(&clock, 100, 600));
    call_often(&map, "a");
    call_often(&map, "b");
    let inner = map
        .call("a", || {
            // The same key and another, from inside the call.
            let x = ok(&map, "a").unwrap() + ok(&map, "b").unwrap();
            Ok::<_, &str>(x)
        })
        .unwrap();
    assert_eq!(inner, 2);
    assert_eq!(map.get("a").unwrap().metrics().calls, 6);
    assert_eq!(map.get("b").unwrap().metrics().calls, 5);
}

#[test]
fn a_panic_in_a_keys_call_leaves_the_family_counting_exactly() {
    let _s = serial();
    let clock = ManualClock::new();
    let config = breakerbox_runtime::Config::builder()
        .failures(100)
        .clock(clock)
        .build()
        .unwrap();
    let map: BreakerMap<String> = BreakerMap::new("again-panic", config);
    call_often(&map, "a");
    let panicked = catch_unwind(AssertUnwindSafe(|| {
        map.call("a", || -> Result<(), &str> { panic!("user code") })
    }));
    assert!(panicked.is_err());
    let b = map.get("a").unwrap();
    assert_eq!(b.metrics().failures, 1);
    call_often(&map, "a");
    assert_eq!(b.metrics().calls, 9);
    assert_eq!(b.metrics().successes, 8);
}
