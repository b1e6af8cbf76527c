//! Keyed families: eviction, bounds, lookups, panics and carry-over.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use breakerbox_runtime::{BreakerMap, Config, Error, ManualClock, State};

use crate::support::{S, clocked};

#[test]
fn keyed_open_keys_are_never_evicted() {
    let clock = ManualClock::new();
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed",
        clocked(&clock)
            .failures(1)
            .open_for(1000 * S)
            .max_keys(4)
            .idle_for(S)
            .build()
            .unwrap(),
    );
    let _ = hosts.call("down", || Err::<(), _>("refused"));
    assert_eq!(hosts.get("down").unwrap().state(), State::Open);
    for i in 0..200 {
        clock.advance(S);
        let key = format!("up-{i}");
        assert_eq!(hosts.call(key.as_str(), || Ok::<_, &str>(i)).unwrap(), i);
        hosts.sweep();
    }
    let down = hosts.get("down").expect("an open key is kept");
    assert_eq!(down.state(), State::Open);
    assert!(matches!(
        hosts.call("down", || Ok::<_, &str>(0)),
        Err(Error::Rejected(_))
    ));
    assert!(hosts.len() <= 4, "len {}", hosts.len());
}

#[test]
fn keyed_max_keys_bounds_the_family_and_counts_add_up() {
    let clock = ManualClock::new();
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-bound",
        clocked(&clock)
            .max_keys(16)
            .idle_for(1000 * S)
            .build()
            .unwrap(),
    );
    let mut max_len = 0;
    for i in 0..5_000u64 {
        let key = format!("k{i}");
        hosts.call(key.as_str(), || Ok::<_, &str>(())).unwrap();
        max_len = max_len.max(hosts.len());
    }
    assert!(
        max_len <= 32,
        "the family grew to {max_len} with max_keys 16"
    );
    hosts.sweep();
    assert!(hosts.len() <= 16, "after a sweep: {}", hosts.len());
    let mut live = 0;
    hosts.for_each(|_, b| live += b.metrics().successes);
    let gone = hosts.evicted();
    assert_eq!(live + gone.successes, 5_000);
    assert_eq!(gone.calls, gone.successes);
    assert_eq!(gone.keys as usize + hosts.len(), 5_000);
}

#[test]
fn keyed_lookup_by_str_finds_the_string_key() {
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-str",
        Config::builder().failures(2).build().unwrap(),
    );
    let owned = String::from("a.example");
    let _ = hosts.call(&owned, || Err::<(), _>("x"));
    let _ = hosts.call("a.example", || Err::<(), _>("y"));
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts.get("a.example").unwrap().state(), State::Open);
    assert!(hosts.get("b.example").is_none());
    assert!(
        hosts
            .breaker("a.example")
            .ptr_eq(&hosts.get(&owned).unwrap())
    );
    let p = hosts.try_acquire("c.example").unwrap();
    p.success();
    assert_eq!(hosts.len(), 2);
}

#[test]
fn keyed_panicking_call_counts_and_listener_panics_are_contained() {
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-panic",
        Config::builder().failures(1).build().unwrap(),
    );
    hosts
        .breaker("p")
        .on_state_change(|_| panic!("keyed listener"));
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _ = hosts.call("p", || -> Result<(), &str> { panic!("call") });
    }));
    let payload: Box<dyn Any + Send> = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>().copied(), Some("call"));
    assert_eq!(hosts.get("p").unwrap().state(), State::Open);
}

#[test]
fn keyed_a_call_admitted_before_eviction_that_opens_carries_over() {
    let clock = ManualClock::new();
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-carry",
        clocked(&clock)
            .failures(1)
            .open_for(100 * S)
            .idle_for(S)
            .build()
            .unwrap(),
    );
    let running = hosts.try_acquire("a").unwrap();
    clock.advance(2 * S);
    assert_eq!(hosts.sweep(), 1, "the idle closed key is evicted");
    running.failure(); // opens the evicted breaker
    // The host is failing: the key's next breaker must not be a fresh closed one.
    let r = hosts.call("a", || Ok::<_, &str>(()));
    assert!(
        matches!(r, Err(Error::Rejected(_))),
        "a failing host got a fresh closed breaker after its key was evicted"
    );
}

#[test]
fn keyed_open_keys_fill_the_family_then_overflow_shares_one_breaker() {
    let clock = ManualClock::new();
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-keyed-overflow",
        clocked(&clock)
            .failures(1)
            .open_for(1000 * S)
            .max_keys(4)
            .idle_for(S)
            .build()
            .unwrap(),
    );
    for i in 0..8 {
        let _ = hosts.call(format!("down-{i}").as_str(), || Err::<(), _>("refused"));
        clock.advance(S);
    }
    assert!(hosts.len() <= 8, "len {}", hosts.len());
    // All open, none evicted: every one still rejects.
    for i in 0..8 {
        let key = format!("down-{i}");
        if let Some(b) = hosts.get(key.as_str()) {
            assert_eq!(b.state(), State::Open, "{key}");
        }
    }
    assert_eq!(hosts.open_keys(), hosts.len());
    // New keys beyond twice max_keys share the overflow breaker.
    for i in 0..20 {
        let _ = hosts.call(format!("new-{i}").as_str(), || Ok::<_, &str>(()));
    }
    assert!(hosts.len() <= 8, "len {}", hosts.len());
    let overflow = hosts.overflow().expect("the overflow breaker was needed");
    assert_eq!(overflow.name(), "adv-keyed-overflow");
    let m = overflow.metrics();
    assert_eq!(m.successes + m.failures + m.ignored + m.rejected, m.calls);
    assert!(m.calls >= 1);
}
