//! Config closures that use the registry, and racing creation of one name.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU32, Ordering};

use breakerbox_runtime::{Breaker, Config, registry};

#[test]
fn config_closure_reads_registry_while_another_thread_creates() {
    for i in 0..50 {
        let name = format!("registry-closures-{i}");
        let barrier = Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                barrier.wait();
                for j in 0..20 {
                    registry().get_or_create(
                        &format!("registry-closures-other-{i}-{j}"),
                        Config::default,
                    );
                }
            });
            let b = registry().get_or_create(&name, || {
                barrier.wait();
                // Reads and creates through the registry from inside the closure.
                let _ = registry().breakers();
                let _ = registry().get(&format!("registry-closures-other-{i}-0"));
                registry().get_or_create(&format!("registry-closures-inner-{i}"), Config::default);
                Config::builder().failures(9).build().unwrap()
            });
            assert_eq!(b.config().failures(), Some(9));
        });
    }
}

#[test]
fn config_closure_configures_its_own_name_first() {
    let name = "registry-closures-self-configure";
    let b = registry().get_or_create(name, || {
        assert!(registry().configure(name, Config::builder().failures(7).build().unwrap()));
        Config::builder().failures(3).build().unwrap()
    });
    // configure returned true before the breaker existed: its config applies.
    assert_eq!(b.config().failures(), Some(7));
}

#[test]
fn registry_two_threads_creating_one_name_get_one_breaker() {
    for i in 0..100 {
        let name = format!("adv-race-{i}");
        let closures = AtomicU32::new(0);
        let barrier = Barrier::new(4);
        let got: Vec<Breaker> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        registry().get_or_create(&name, || {
                            closures.fetch_add(1, Ordering::SeqCst);
                            Config::default()
                        })
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for b in &got {
            assert!(b.ptr_eq(&got[0]));
            assert!(b.ptr_eq(&registry().get(&name).unwrap()));
        }
        assert_eq!(
            registry()
                .breakers()
                .iter()
                .filter(|b| b.name() == name)
                .count(),
            1
        );
        let n = closures.load(Ordering::SeqCst);
        assert!((1..=4).contains(&n));
    }
}

#[test]
fn registry_configure_racing_creation_is_never_lost() {
    for i in 0..200 {
        let name = format!("adv-configure-race-{i}");
        let barrier = Barrier::new(2);
        let (configured, b) = std::thread::scope(|s| {
            let c = s.spawn(|| {
                barrier.wait();
                registry().configure(&name, Config::builder().failures(11).build().unwrap())
            });
            let b = s.spawn(|| {
                barrier.wait();
                registry().get_or_create(&name, || Config::builder().failures(22).build().unwrap())
            });
            (c.join().unwrap(), b.join().unwrap())
        });
        let want = if configured { 11 } else { 22 };
        assert_eq!(
            b.config().failures(),
            Some(want),
            "round {i}, configure said {configured}"
        );
    }
}
