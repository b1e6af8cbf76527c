//! Keyed families: eviction, bounds, lookups, panics and carry-over.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use breakerbox_runtime::{BreakerMap, Config, Error, ManualClock, State};

use crate::calls::{S, clocked};

#[test]
fn open_keys_are_never_evicted() {
    let _serial = crate::support::serial();
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
fn max_keys_bounds_the_family_and_counts_add_up() {
    let _serial = crate::support::serial();
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
fn lookup_by_str_finds_the_string_key() {
    let _serial = crate::support::serial();
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
fn panicking_call_counts_and_listener_panics_are_contained() {
    let _serial = crate::support::serial();
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
fn a_call_admitted_before_eviction_that_opens_carries_over() {
    let _serial = crate::support::serial();
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
fn open_keys_fill_the_family_then_overflow_shares_one_breaker() {
    let _serial = crate::support::serial();
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

/// A key whose `Display` panics: each place a family shows its keys (the rejection's message,
/// `snapshot`'s top open keys, `registry().families()` and `family_snapshots()`, which the
/// metrics export and the admin router read) shows `<Display panicked>` for it instead of
/// unwinding into the caller, and the family goes on working.
#[test]
fn a_key_whose_display_panics_is_listed_as_such() {
    let _serial = crate::support::serial();
    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Host(u32);
    impl std::fmt::Display for Host {
        fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            panic!("a key's Display panicked on purpose")
        }
    }
    let name = "adv-keyed-display";
    let hosts: BreakerMap<Host> = breakerbox_runtime::registry()
        .family(name, || Config::builder().failures(1).build().unwrap())
        .unwrap();
    let _ = hosts.call(&Host(1), || Err::<(), _>("down"));
    hosts.call(&Host(2), || Ok::<_, &str>(())).unwrap();
    let Err(Error::Rejected(r)) = hosts.call(&Host(1), || Ok::<_, &str>(())) else {
        panic!("the open key's call ran");
    };
    assert_eq!(r.key(), Some("<Display panicked>"));

    let top = hosts.snapshot(5).top_open;
    assert_eq!(top.len(), 1);
    assert_eq!(top[0].key, "<Display panicked>");
    let listed = breakerbox_runtime::registry().families();
    let family = listed.iter().find(|f| f.name == name).unwrap();
    assert_eq!(family.keys.len(), 2);
    assert!(family.keys.iter().all(|k| k.key == "<Display panicked>"));
    assert_eq!(family.open_keys, 1);
    let snapshots = breakerbox_runtime::registry().family_snapshots(5);
    let snapshot = snapshots.iter().find(|f| f.name == name).unwrap();
    assert_eq!((snapshot.keys, snapshot.open_keys), (2, 1));
    assert_eq!(snapshot.top_open[0].key, "<Display panicked>");
    // And it goes on: the healthy key's calls run.
    hosts.call(&Host(2), || Ok::<_, &str>(())).unwrap();
    assert_eq!(hosts.get(&Host(1)).unwrap().state(), State::Open);
}

#[test]
fn configure_refuses_the_name_of_an_existing_family() {
    use breakerbox_runtime::registry;
    // Its key's breaker lives on in the registry's family: made beside a test that counts
    // `live_breakers`, it would be counted there.
    let _serial = crate::support::serial();
    let tenants = registry()
        .family::<u32>("keyed-configure-refused", || {
            Config::builder().failures(3).build().unwrap()
        })
        .unwrap();
    assert!(!registry().configure(
        "keyed-configure-refused",
        Config::builder().failures(1).build().unwrap()
    ));
    // The family's keys keep the family's config.
    let _ = tenants.call(&7, || Err::<(), _>("refused"));
    assert_eq!(tenants.get(&7).unwrap().config().failures(), Some(3));
}
