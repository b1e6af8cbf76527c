//! Keyed families (`BreakerMap`) and freeing breakers' names: eviction, what is never
//! evicted, the overflow breaker, exact counts under racing eviction.

use std::time::Duration;

use breakerbox_runtime::{
    Breaker, BreakerMap, Config, Error, ManualClock, Outcome, RejectReason, State, live_breakers,
    registry,
};

use crate::support::{config, serial};

fn fail(map: &BreakerMap<String>, key: &str) {
    let r = map.call(key, || Err::<(), _>("connection refused"));
    assert!(matches!(r, Err(Error::Inner(_))), "{key}: {r:?}");
}

fn ok(map: &BreakerMap<String>, key: &str) -> Result<u32, Error<&'static str>> {
    map.call(key, || Ok(1))
}

#[test]
fn dropped_breakers_free_their_names() {
    let _s = serial();
    let before = live_breakers();
    for i in 0..50_000 {
        let b = Breaker::new(format!("eviction-{i}"), Config::default());
        assert_eq!(b.name(), format!("eviction-{i}"));
    }
    assert_eq!(live_breakers(), before);
}

#[test]
fn a_rejection_keeps_its_breaker_until_dropped() {
    let _s = serial();
    let before = live_breakers();
    let b = Breaker::new(
        "kept-by-rejection",
        Config::builder().failures(1).build().unwrap(),
    );
    let _ = b.call(|| Err::<(), _>("refused"));
    let rejected = b.try_acquire().unwrap_err();
    drop(b);
    assert_eq!(live_breakers(), before + 1);
    assert_eq!(rejected.reason(), RejectReason::Open);
    assert!(
        rejected
            .to_string()
            .starts_with("circuit breaker 'kept-by-rejection' is open; retry in 60.0s"),
        "{rejected}"
    );
    assert_eq!(rejected.last_failure().as_deref(), Some("refused"));
    drop(rejected);
    assert_eq!(live_breakers(), before);
}

#[test]
fn breakers_sharing_a_name_keep_their_own_last_failure() {
    let _s = serial();
    let config = Config::builder().failures(1).build().unwrap();
    let a = Breaker::new("twin", config.clone());
    let b = Breaker::new("twin", config);
    let _ = a.call(|| Err::<(), _>("a failed"));
    let _ = b.call(|| Err::<(), _>("b failed"));
    assert_eq!(a.last_failure().as_deref(), Some("a failed"));
    assert_eq!(b.last_failure().as_deref(), Some("b failed"));
}

#[test]
fn keys_have_their_own_breakers_and_last_failures() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("hosts", config(&clock, 100, 600));
    fail(&map, "down.example");
    assert_eq!(ok(&map, "up.example").unwrap(), 1);
    let r = ok(&map, "down.example").unwrap_err();
    let rejected = r.rejected().unwrap();
    assert_eq!(rejected.name(), "hosts");
    assert_eq!(
        rejected.last_failure().as_deref(),
        Some("connection refused")
    );
    assert_eq!(map.get("down.example").unwrap().state(), State::Open);
    assert_eq!(map.get("up.example").unwrap().state(), State::Closed);
    assert!(map.get("up.example").unwrap().last_failure().is_none());
    assert_eq!(map.len(), 2);
    assert_eq!(map.open_keys(), 1);
    // Breakers made from one config share it.
    assert!(std::ptr::eq(
        map.get("down.example").unwrap().config(),
        map.get("up.example").unwrap().config()
    ));
}

#[test]
fn a_rejection_names_the_family_and_the_key() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("named", config(&clock, 2, 600));
    let _ = map.call("down.example", || Err::<(), _>("connection refused"));
    let r = ok(&map, "down.example").unwrap_err();
    let r = r.rejected().unwrap();
    assert_eq!((r.name(), r.key()), ("named", Some("down.example")));
    assert_eq!(
        r.to_string(),
        "circuit breaker 'named' for key 'down.example' is open; retry in 60.0s \
         (last failure: connection refused)"
    );
    // Every way in names it: permits, `call_with`, `call_async`, and then handles.
    let r = map.try_acquire("down.example").unwrap_err();
    assert_eq!(r.key(), Some("down.example"));
    let r = map
        .call_with("down.example", || (), |_| Outcome::Success)
        .unwrap_err();
    assert_eq!(r.key(), Some("down.example"));
    let r = map.breaker("down.example").try_acquire().unwrap_err();
    assert_eq!(r.key(), Some("down.example"));
    let tenants: BreakerMap<u64> = BreakerMap::new("tenants", config(&clock, 2, 600));
    tenants.try_acquire(&42).unwrap().failure();
    let r = tenants.try_acquire(&42).unwrap_err();
    assert_eq!(
        r.to_string(),
        "circuit breaker 'tenants' for key '42' is open; retry in 60.0s"
    );
    // The overflow breaker, shared by many keys, names none.
    for i in 0..3 {
        fail(&map, &format!("down{i}"));
    }
    assert!(map.overflow().is_none());
    fail(&map, "new");
    let r = map.try_acquire("newer").unwrap_err();
    assert!(map.overflow().is_some());
    assert_eq!((r.name(), r.key()), ("named", None));
    // Unkeyed breakers name none.
    let b = Breaker::new("plain", Config::builder().failures(1).build().unwrap());
    let _ = b.call(|| Err::<(), _>("x"));
    assert_eq!(b.try_acquire().unwrap_err().key(), None);
}

/// The family snapshot the default export and an admin page read: aggregates over live and
/// evicted keys, the number of open keys, and the top open keys by failures, ties by key.
#[test]
fn a_family_snapshot_has_aggregates_open_keys_and_the_top_open_keys() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new(
        "snap",
        Config::builder()
            .failures(2)
            .open_for(Duration::from_secs(60))
            .idle_for(Duration::from_secs(10))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let (up, down) = (|| Ok::<_, &str>(()), || Err::<(), _>("down"));
    let run = |key: &str, calls: &[bool]| {
        for &good in calls {
            let _ = if good {
                map.call(key, up)
            } else {
                map.call(key, down)
            };
        }
    };
    run("x", &[false, false]); // open, 2 failures
    run("y", &[true, false, false]); // open, 2 failures
    run("z", &[false, true, false, false]); // open, 3 failures
    map.breaker("w").force_open(); // forced open, no failure
    run("c", &[true]); // closed
    run("d", &[false]); // closed, 1 failure
    run("x", &[true]); // rejected
    let s = map.snapshot(3);
    assert_eq!((s.name.as_str(), s.keys, s.open_keys), ("snap", 6, 4));
    let t = s.totals;
    assert_eq!(
        (
            t.calls,
            t.successes,
            t.failures,
            t.ignored,
            t.rejected,
            t.slow
        ),
        (12, 3, 8, 0, 1, 0)
    );
    let top: Vec<(&str, State, u64)> = s
        .top_open
        .iter()
        .map(|k| (k.key.as_str(), k.metrics.state, k.metrics.failures))
        .collect();
    assert_eq!(
        top,
        [
            ("z", State::Open, 3),
            ("x", State::Open, 2),
            ("y", State::Open, 2)
        ]
    );
    assert_eq!(map.snapshot(10).top_open.len(), 4);
    assert_eq!(
        map.snapshot(10).top_open[3].metrics.state,
        State::ForcedOpen
    );
    assert!(map.snapshot(0).top_open.is_empty());
    let handles: Vec<String> = map.open_keys_top(2).into_iter().map(|(k, _)| k).collect();
    assert_eq!(handles, ["z", "x"]);
    // The idle closed keys go; their counts stay in the totals.
    clock.advance(Duration::from_secs(11));
    assert_eq!(map.sweep(), 2);
    let s = map.snapshot(3);
    assert_eq!((s.keys, s.open_keys, s.evicted.keys), (4, 4, 2));
    assert_eq!((s.totals.calls, s.totals.failures), (12, 8));
    assert_eq!(
        (s.evicted.calls, s.evicted.successes, s.evicted.failures),
        (2, 1, 1)
    );
}

#[test]
fn idle_keys_are_evicted_and_their_counts_kept() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("idle", config(&clock, 100, 10));
    ok(&map, "a").unwrap();
    ok(&map, "b").unwrap();
    clock.advance(Duration::from_secs(5));
    ok(&map, "a").unwrap();
    clock.advance(Duration::from_secs(6));
    ok(&map, "b").unwrap();
    // `a`, last called 6 s ago, is kept; but sweeps see calls only as of the sweep after
    // them: this one sees both calls now.
    assert_eq!(map.sweep(), 0);
    clock.advance(Duration::from_secs(10));
    ok(&map, "b").unwrap();
    assert_eq!(map.sweep(), 1);
    assert!(map.get("a").is_none());
    assert!(map.get("b").is_some());
    let evicted = map.evicted();
    assert_eq!((evicted.keys, evicted.calls, evicted.successes), (1, 2, 2));
    // `b` was called 11 s ago at the last sweep: idle after 10 s more, not before.
    clock.advance(Duration::from_secs(9));
    assert_eq!(map.sweep(), 0);
    clock.advance(Duration::from_secs(2));
    assert_eq!(map.sweep(), 1);
    assert!(map.is_empty());
    assert_eq!(map.evicted().successes, 5);
}

#[test]
fn an_open_key_survives_eviction_pressure() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("pressure", config(&clock, 8, 1));
    fail(&map, "down");
    for i in 0..2_000 {
        ok(&map, &format!("k{i}")).unwrap();
        if i % 10 == 0 {
            clock.advance(Duration::from_millis(200));
        }
        assert!(map.len() <= 16, "{} keys", map.len());
    }
    // 60 s open, and nobody called it for far longer than `idle_for`: still open, still held.
    assert!(clock.now_secs() < 60);
    let down = map.get("down").expect("the open key was evicted");
    assert_eq!(down.state(), State::Open);
    assert!(matches!(ok(&map, "down"), Err(Error::Rejected(_))));
    assert!(map.evicted().keys > 1_900);
    // Once its open time has run and it is idle, it may go; its key then starts closed.
    clock.advance(Duration::from_secs(61));
    ok(&map, "new").unwrap();
    map.sweep();
    clock.advance(Duration::from_secs(2));
    map.sweep();
    assert!(map.get("down").is_none());
    assert_eq!(ok(&map, "down").unwrap(), 1);
}

trait Secs {
    fn now_secs(&self) -> u64;
}

impl Secs for ManualClock {
    fn now_secs(&self) -> u64 {
        use breakerbox_runtime::Clock;
        self.now().as_secs()
    }
}

#[test]
fn a_family_full_of_open_keys_grows_to_twice_then_shares_an_overflow_breaker() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("outage", config(&clock, 4, 1));
    for i in 0..8 {
        fail(&map, &format!("down{i}"));
    }
    assert_eq!(map.len(), 8);
    assert!(map.overflow().is_none());
    // The ninth key gets the overflow breaker; no key is forgotten.
    assert_eq!(ok(&map, "new1").unwrap(), 1);
    let overflow = map.overflow().expect("an overflow breaker");
    assert!(map.breaker("new2").ptr_eq(&overflow));
    assert_eq!(map.len(), 8);
    for i in 0..8 {
        assert_eq!(map.get(&format!("down{i}")).unwrap().state(), State::Open);
    }
    // New keys share it: one failing trips it for all of them.
    fail(&map, "new3");
    assert!(matches!(ok(&map, "new4"), Err(Error::Rejected(_))));
    assert_eq!(overflow.metrics().calls, 3);
    // When the open keys' time has run and they are idle, new keys get their own again.
    clock.advance(Duration::from_secs(62));
    map.sweep();
    clock.advance(Duration::from_secs(2));
    assert_eq!(ok(&map, "fresh").unwrap(), 1);
    assert!(!map.breaker("fresh").ptr_eq(&overflow));
    assert_eq!(map.get("fresh").unwrap().state(), State::Closed);
}

#[test]
fn forced_open_and_disabled_keys_are_never_evicted() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("manual", config(&clock, 2, 1));
    map.breaker("forced").force_open();
    map.breaker("off").disable();
    clock.advance(Duration::from_secs(100));
    for i in 0..100 {
        ok(&map, &format!("k{i}")).unwrap();
        clock.advance(Duration::from_secs(2));
    }
    map.sweep();
    assert_eq!(map.get("forced").unwrap().state(), State::ForcedOpen);
    assert_eq!(map.get("off").unwrap().state(), State::Disabled);
}

#[test]
fn a_permit_across_an_eviction_is_counted_once() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("permit", config(&clock, 100, 1));
    let permit = map.try_acquire("k").unwrap();
    clock.advance(Duration::from_secs(2));
    assert_eq!(map.sweep(), 1);
    assert!(map.get("k").is_none());
    permit.record(Outcome::Failure);
    let evicted = map.evicted();
    assert_eq!((evicted.keys, evicted.calls, evicted.failures), (1, 1, 1));
    // The failure opened the evicted breaker, and that opening is carried to the key, which
    // the family holds again: open, without the failure counted a second time.
    let k = map.get("k").expect("the failing key is held again");
    assert_eq!(k.state(), State::Open);
    assert_eq!(k.metrics().calls, 0);
    assert!(matches!(ok(&map, "k"), Err(Error::Rejected(_))));
    assert_eq!(map.get("k").unwrap().metrics().rejected, 1);
}

/// The tower layer's lease of a key holds the key's breaker state, not a handle: across an
/// eviction its outcome is still counted once in the evicted totals, and its failure's opening
/// is carried to the key, as a permit's are.
#[test]
fn a_lease_across_an_eviction_is_counted_once_and_its_opening_carried() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("lease", config(&clock, 100, 1));
    let lease = breakerbox_runtime::__integrations::lease_key(&map, "k").unwrap();
    clock.advance(Duration::from_secs(2));
    assert_eq!(map.sweep(), 1);
    assert!(map.get("k").is_none());
    // A sweep (or a read of the totals) while the lease is out must not fold the breaker in.
    assert_eq!(map.evicted().calls, 0);
    lease.record(Outcome::Failure);
    let evicted = map.evicted();
    assert_eq!((evicted.keys, evicted.calls, evicted.failures), (1, 1, 1));
    let k = map.get("k").expect("the failing key is held again");
    assert_eq!(k.state(), State::Open);
    assert_eq!(k.metrics().calls, 0);
}

#[test]
fn a_failure_after_the_key_was_recreated_opens_the_new_breaker() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("carry-late", config(&clock, 100, 1));
    let permit = map.try_acquire("k").unwrap();
    clock.advance(Duration::from_secs(2));
    assert_eq!(map.sweep(), 1);
    // The key comes back with a new, closed breaker before the old call fails.
    assert_eq!(ok(&map, "k").unwrap(), 1);
    let fresh = map.get("k").unwrap();
    assert!(!fresh.ptr_eq(permit.breaker()));
    permit.failure_with(&"timed out");
    assert_eq!(fresh.state(), State::Open);
    let r = ok(&map, "k").unwrap_err();
    assert_eq!(r.rejected().unwrap().reason(), RejectReason::Open);
    // Counted once: the success in the new breaker, the failure in the evicted one.
    assert_eq!(fresh.metrics().successes, 1);
    assert_eq!(fresh.metrics().failures, 0);
    assert_eq!(map.evicted().failures, 1);
}

#[test]
fn an_evicted_breaker_forced_open_by_a_kept_handle_carries_over() {
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<String> = BreakerMap::new("carry-forced", config(&clock, 100, 1));
    let handle = map.breaker("k");
    clock.advance(Duration::from_secs(2));
    assert_eq!(map.sweep(), 1);
    assert!(map.get("k").is_none());
    handle.force_open();
    assert_eq!(map.get("k").unwrap().state(), State::ForcedOpen);
    // A listener on the evicted breaker holds the family weakly: dropping the family with
    // the handle still alive frees every breaker but the handle's, which then carries nowhere.
    let before = live_breakers();
    drop(map);
    assert_eq!(live_breakers(), before - 1);
    handle.disable();
    assert_eq!(handle.state(), State::Disabled);
    drop(handle);
    assert_eq!(live_breakers(), before - 2);
}

#[test]
fn borrowed_lookups_and_registry_families() {
    let _s = serial();
    let hosts = registry()
        .family::<String>("keyed.test.hosts", || {
            Config::builder().failures(1).build().unwrap()
        })
        .unwrap();
    let _ = hosts.call("b.example", || Err::<(), _>("refused"));
    hosts.call("a.example", || Ok::<_, &str>(())).unwrap();
    let again = registry()
        .family::<String>("keyed.test.hosts", Config::default)
        .unwrap();
    assert!(again.get("b.example").is_some());
    let err = registry()
        .family::<u64>("keyed.test.hosts", Config::default)
        .unwrap_err();
    assert!(err.to_string().contains("'keyed.test.hosts'"), "{err}");
    let listed = registry().families();
    let f = listed
        .iter()
        .find(|f| f.name == "keyed.test.hosts")
        .unwrap();
    let keys: Vec<_> = f
        .keys
        .iter()
        .map(|k| (k.key.as_str(), k.metrics.state))
        .collect();
    assert_eq!(
        keys,
        [("a.example", State::Closed), ("b.example", State::Open)]
    );
    assert_eq!(f.open_keys, 1);
}

/// A family of 200 `String` keys (`host-<i>.example`), each called four times by `&str`. Idle
/// after 10 s.
fn with_many_keys(name: &'static str, clock: &ManualClock) -> (BreakerMap<String>, Vec<String>) {
    let map: BreakerMap<String> = BreakerMap::new(name, config(clock, 4_000, 10));
    let keys: Vec<String> = (0..200).map(|i| format!("host-{i}.example")).collect();
    for _ in 0..4 {
        for k in &keys {
            ok(&map, k).unwrap();
        }
    }
    (map, keys)
}

/// In a family of many keys, a key called once in a sweep period is marked called: the next
/// sweep keeps it and evicts the keys not called since the last one.
#[test]
fn a_key_called_once_in_a_sweep_period_is_not_idle_to_the_next_sweep() {
    let _s = serial();
    let clock = ManualClock::new();
    let (map, _) = with_many_keys("front-recency", &clock);
    assert_eq!(map.sweep(), 0);
    clock.advance(Duration::from_secs(6));
    ok(&map, "host-5.example").unwrap();
    ok(&map, "host-150.example").unwrap();
    clock.advance(Duration::from_secs(5));
    assert_eq!(map.sweep(), 198);
    assert_eq!(map.len(), 2);
    assert!(map.get("host-5.example").is_some());
    assert!(map.get("host-150.example").is_some());
}

/// A key type of the user's own that borrows as `str`: in a family of many keys, a call or a
/// lookup by the `&str` of a key reaches the breaker the owned key made, and a call by a
/// `&str` no key has makes the key from it.
#[test]
fn a_users_own_key_type_and_the_str_it_borrows_as_reach_the_same_breaker() {
    /// Hashes and compares as its `host` alone, as `str` does (what `Borrow` requires).
    #[derive(Clone, Hash, PartialEq, Eq)]
    struct Host {
        host: String,
    }
    impl std::borrow::Borrow<str> for Host {
        fn borrow(&self) -> &str {
            &self.host
        }
    }
    impl From<String> for Host {
        fn from(host: String) -> Host {
            Host { host }
        }
    }
    impl std::fmt::Display for Host {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.host)
        }
    }
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<Host> = BreakerMap::new("borrowed-own-key", config(&clock, 4_000, 10));
    let hosts: Vec<Host> = (0..200)
        .map(|i| Host::from(format!("host-{i}.example")))
        .collect();
    for _ in 0..4 {
        for host in &hosts {
            map.call(host, || Ok::<_, &str>(())).unwrap();
        }
    }
    assert_eq!(map.len(), 200);
    for _ in 0..4 {
        for host in &hosts {
            map.call(host.host.as_str(), || Ok::<_, &str>(())).unwrap();
        }
    }
    let _ = map.call("host-7.example", || Err::<(), _>("refused"));
    assert_eq!(map.len(), 200);
    for host in &hosts {
        let m = map.get(host.host.as_str()).expect("held").metrics();
        let failed = u64::from(host.host == "host-7.example");
        assert_eq!((m.calls, m.failures), (8 + failed, failed), "{host}");
    }
    // A key made from a `&str`: the owned key finds it.
    map.call("host-200.example", || Ok::<_, &str>(())).unwrap();
    assert_eq!(map.len(), 201);
    let made = Host::from("host-200.example".to_owned());
    assert_eq!(map.get(&made).expect("made").metrics().calls, 1);
}

#[test]
fn bad_bounds_are_refused() {
    let _serial = crate::support::serial();
    let e = Config::builder().max_keys(0).build().unwrap_err();
    assert_eq!(e.to_string(), "`max_keys` must be at least 1, got 0");
    let e = Config::builder()
        .idle_for(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "idle_for");
    let c = Config::default();
    assert_eq!(
        (c.max_keys(), c.idle_for()),
        (10_000, Duration::from_secs(600))
    );
}

/// A key type whose `Clone` panics for one key once it is held: the family copies every held
/// key when it indexes them for lookups (after many lookups of keys it had not indexed), and
/// a panic there fails no call of any other key, nor a sweep, which still evicts the others.
/// The key itself is kept: an eviction copies the key first (to carry a late opening of the
/// evicted breaker to it).
#[test]
fn a_key_whose_clone_panics_fails_no_lookup_of_other_keys_nor_a_sweep() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static PANICS: AtomicBool = AtomicBool::new(false);
    #[derive(Hash, PartialEq, Eq)]
    struct Key(u64);
    impl Clone for Key {
        fn clone(&self) -> Key {
            assert!(
                !(self.0 == 5 && PANICS.load(Ordering::Relaxed)),
                "key 5 cannot be cloned"
            );
            Key(self.0)
        }
    }
    impl std::fmt::Display for Key {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "key-{}", self.0)
        }
    }
    let _s = serial();
    let clock = ManualClock::new();
    let map: BreakerMap<Key> = BreakerMap::new("clone-panics", config(&clock, 4_000, 10));
    for k in 0..500 {
        map.call(&Key(k), || Ok::<_, &str>(())).unwrap();
    }
    PANICS.store(true, Ordering::Relaxed);
    // Lookups of held keys the family has not indexed: each such batch of misses retries the
    // index, whose copy of key 5 panics.
    for _ in 0..4 {
        for k in (0..500).filter(|&k| k != 5) {
            assert_eq!(map.call(&Key(k), || Ok::<_, &str>(k)).unwrap(), k);
        }
    }
    assert_eq!(map.len(), 500);
    assert_eq!(map.sweep(), 0);
    clock.advance(Duration::from_secs(11));
    assert_eq!(map.sweep(), 499, "every key idle, key 5 kept");
    assert_eq!(map.len(), 1);
    assert!(map.get(&Key(5)).is_some());
    PANICS.store(false, Ordering::Relaxed);
}
