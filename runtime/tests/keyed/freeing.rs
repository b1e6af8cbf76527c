//! Breakers, rejections and evicted keys are freed; weak handles keep nothing alive.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use breakerbox_runtime::{Breaker, BreakerMap, Config, Outcome, State, WeakBreaker, registry};

use crate::calls::{fail, ok};

#[test]
fn distinct_named_breakers_are_freed() {
    let _serial = crate::support::serial();
    const N: usize = 50_000;
    let held: Vec<Breaker> = (0..N)
        .map(|i| Breaker::new(format!("freeing-{i}-{}", "x".repeat(40)), Config::default()))
        .collect();
    let peak = breakerbox_runtime::live_breakers();
    assert!(peak >= N);
    let weak: Vec<WeakBreaker> = held.iter().map(Breaker::downgrade).collect();
    drop(held);
    // Other tests run alongside and make a few hundred breakers at most.
    let after = breakerbox_runtime::live_breakers();
    assert!(after + N - 5_000 <= peak, "peak {peak}, after {after}");
    assert!(weak.iter().all(|w| w.upgrade().is_none()));
}

#[test]
fn a_rejection_outlives_its_breaker() {
    let _serial = crate::support::serial();
    let b = Breaker::new("freeing-rejected", Config::default());
    b.force_open();
    let r = b.try_acquire().unwrap_err();
    let weak = b.downgrade();
    drop(b);
    // A rejection keeps what it shows, not a handle: the weak one no longer upgrades.
    assert!(weak.upgrade().is_none(), "a Rejected is not a handle");
    assert_eq!(r.name(), "freeing-rejected");
    assert!(r.to_string().contains("freeing-rejected"));
    let copy = r.clone();
    drop(r);
    assert!(copy.to_string().contains("freeing-rejected"));
    drop(copy);
    assert!(weak.upgrade().is_none());
}

#[test]
fn listener_with_a_weak_handle_does_not_keep_the_breaker_alive() {
    let _serial = crate::support::serial();
    let b = Breaker::new("freeing", Config::builder().failures(1).build().unwrap());
    let weak = b.downgrade();
    let w = weak.clone();
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = Flag(dropped.clone());
    b.on_state_change(move |e| {
        let _keep = &flag;
        if e.to == State::Open {
            w.upgrade().unwrap().reset();
        }
    });
    fail(&b, "x");
    assert_eq!(b.state(), State::Closed, "the listener reset it");
    drop(b);
    assert!(weak.upgrade().is_none());
    assert!(
        dropped.load(Ordering::SeqCst),
        "the listener was freed with the breaker"
    );
}

#[test]
fn weak_upgrade_racing_the_last_drop() {
    let _serial = crate::support::serial();
    for i in 0..300 {
        let b = Breaker::new(format!("adv-weak-race-{i}"), Config::default());
        let weak = b.downgrade();
        let barrier = Barrier::new(2);
        let upgraded = std::thread::scope(|s| {
            let w = s.spawn(|| {
                barrier.wait();
                let mut got = 0u32;
                for _ in 0..200 {
                    match weak.upgrade() {
                        Some(b) => {
                            // A handle from upgrade is a whole breaker.
                            assert!(b.name().starts_with("adv-weak-race-"));
                            ok(&b);
                            got += 1;
                        }
                        None => break,
                    }
                }
                got
            });
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                drop(b);
            });
            w.join().unwrap()
        });
        let _ = upgraded;
        assert!(
            weak.upgrade().is_none(),
            "round {i}: the last handle is gone"
        );
        let w2 = weak.clone();
        drop(weak);
        assert!(w2.upgrade().is_none());
    }
}

#[test]
fn weak_handles_to_registry_breakers_always_upgrade() {
    let _serial = crate::support::serial();
    let b = registry().get_or_create("adv-weak-registry", Config::default);
    let w = b.downgrade();
    drop(b);
    let again = w
        .upgrade()
        .expect("a registry breaker lives for the process");
    assert!(again.ptr_eq(&registry().get("adv-weak-registry").unwrap()));
    let w2 = w.clone();
    drop(w);
    assert!(w2.upgrade().is_some());
}

#[test]
fn owned_permit_keeps_a_breaker_alive_for_its_weak_handles() {
    let _serial = crate::support::serial();
    let b = Breaker::new("adv-owned", Config::builder().failures(1).build().unwrap());
    let weak = b.downgrade();
    let p = b.try_acquire_owned().unwrap();
    drop(b);
    let up = weak.upgrade().expect("the owned permit holds a handle");
    drop(up);
    p.record(Outcome::Failure);
    assert!(weak.upgrade().is_none());
}

#[test]
fn evicted_keys_are_freed() {
    let _serial = crate::support::serial();
    const N: usize = 40_000;
    let before = breakerbox_runtime::live_breakers();
    let hosts: BreakerMap<u64> = BreakerMap::new(
        "freeing-keyed",
        Config::builder().max_keys(16).build().unwrap(),
    );
    for k in 0..N as u64 {
        hosts.call(&k, || Ok::<_, &str>(())).unwrap();
    }
    assert!(hosts.len() <= 32);
    // Evicted keys' breakers are freed (memory reclamation may lag by a batch). Other tests run
    // alongside and hold a few hundred breakers at most.
    let grown = breakerbox_runtime::live_breakers().saturating_sub(before);
    assert!(
        grown < 5_000,
        "{grown} breakers alive after {N} keys with max_keys 16"
    );
    assert_eq!(hosts.evicted().keys as usize + hosts.len(), N);
    drop(hosts);
}

/// A family of a thousand keys, each called twice: the breakers a sweep evicts are freed by the
/// time `sweep` returns, and a key called again afterwards gets a new breaker, not the evicted
/// one.
#[test]
fn a_large_familys_evicted_breakers_are_freed_when_the_sweep_returns() {
    let _serial = crate::support::serial();
    let before = breakerbox_runtime::live_breakers();
    let clock = breakerbox_runtime::ManualClock::new();
    let hosts: BreakerMap<u64> =
        BreakerMap::new("freeing-large", crate::support::config(&clock, 4_000, 10));
    // Twice each: a first pass that makes the keys, a second that finds them.
    for _ in 0..2 {
        for k in 0..1_000u64 {
            hosts.call(&k, || Ok::<_, &str>(())).unwrap();
        }
    }
    let weak: Vec<_> = (0..1_000u64)
        .map(|k| hosts.get(&k).expect("held").downgrade())
        .collect();
    assert_eq!(breakerbox_runtime::live_breakers() - before, 1_000);
    // A sweep dates the calls since the last one; the next, 11 s on, finds them idle.
    assert_eq!(hosts.sweep(), 0);
    clock.advance(Duration::from_secs(11));
    assert_eq!(hosts.sweep(), 1_000);
    assert_eq!(hosts.len(), 0);
    let alive = weak.iter().filter(|w| w.upgrade().is_some()).count();
    assert_eq!(alive, 0, "evicted breakers still alive after the sweep");
    assert_eq!(breakerbox_runtime::live_breakers(), before);
    let evicted = hosts.evicted();
    assert_eq!((evicted.keys, evicted.calls), (1_000, 2_000));
    hosts.call(&7, || Ok::<_, &str>(())).unwrap();
    assert_eq!(hosts.get(&7).expect("made again").metrics().calls, 1);
    drop(hosts);
    assert_eq!(breakerbox_runtime::live_breakers(), before);
}

/// A key whose `Clone` changes it (a logic error, but safe code): the family stores the clone
/// `W(i ^ 1024)` of each key called. Evicting a slot still takes it out of the family,
/// whatever key it is filed under: a lookup after the sweep never reaches the evicted
/// breaker, which is freed.
#[test]
fn a_key_whose_clone_changes_it_never_reaches_an_evicted_breaker() {
    #[derive(Hash, PartialEq, Eq)]
    struct W(u64);
    impl Clone for W {
        fn clone(&self) -> W {
            W(self.0 ^ 1024)
        }
    }
    impl std::fmt::Display for W {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "w{}", self.0)
        }
    }
    let _serial = crate::support::serial();
    let clock = breakerbox_runtime::ManualClock::new();
    let hosts: BreakerMap<W> = BreakerMap::new(
        "freeing-odd-clone",
        crate::support::config(&clock, 4_000, 10),
    );
    for i in 0..200u64 {
        hosts.call(&W(i), || Ok::<_, &str>(())).unwrap();
    }
    // Held keys looked up again, by keys whose clones are the stored ones.
    for _ in 0..4 {
        for i in 0..200u64 {
            hosts.call(&W(i ^ 1024), || Ok::<_, &str>(())).unwrap();
        }
    }
    // Every key but W(1024) forced open, so never evicted.
    for i in 1..200u64 {
        hosts.get(&W(i ^ 1024)).expect("held").force_open();
    }
    let evicted = hosts.get(&W(1024)).expect("held").downgrade();
    assert_eq!(hosts.sweep(), 0);
    clock.advance(Duration::from_secs(11));
    assert_eq!(hosts.sweep(), 1);
    assert!(evicted.upgrade().is_none(), "the evicted breaker is freed");
    let b = hosts.breaker(&W(0));
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().calls, 0, "a new breaker, not the evicted one");
    assert_eq!(hosts.len(), 200);
}
