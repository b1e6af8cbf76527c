//! Breakers, rejections and evicted keys are freed; weak handles keep nothing alive.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

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
