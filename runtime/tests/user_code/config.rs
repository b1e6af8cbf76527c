//! Faults in the registry's config closures: waiting, panicking, racing creators.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use breakerbox_runtime::{Breaker, Clock, Config, ManualClock, State, registry};

use crate::support::{
    Arm, FAULTS, Fault, STARTS, config, enter, fresh, message, still_works, within,
};

/// The config closure of `get_or_create` runs under no registry lock, whether the name exists
/// or not: it may read the registry, create breakers, and wait for another thread that creates
/// one (under a read lock, that thread's creation would wait for the write lock for ever).
#[test]
fn repro_a_config_closure_may_wait_for_a_thread_that_creates_a_breaker() {
    within("config closure", || {
        let existing = fresh("config");
        registry().get_or_create(&existing, Config::default);
        for name in [existing, fresh("config")] {
            let b = registry().get_or_create(&name, || {
                let other = std::thread::spawn(|| {
                    registry().get_or_create(&fresh("config.other"), Config::default)
                });
                let made = other.join().unwrap();
                assert!(registry().get(made.name()).is_some());
                assert!(registry().breakers().iter().any(|x| x.ptr_eq(&made)));
                // On this thread too.
                let mine = registry().get_or_create(&fresh("config.nested"), Config::default);
                assert!(registry().get(mine.name()).unwrap().ptr_eq(&mine));
                Config::default()
            });
            assert!(registry().get(&name).unwrap().ptr_eq(&b));
        }
    });
}

/// A config closure that panics, re-enters or blocks, for a new name and for one that exists
/// in each state. A panic leaves no breaker behind and the registry usable.
#[test]
fn config_closure_faults_leave_the_registry_working() {
    within("config closure faults", || {
        // A panic creating a new name: nothing is created, the name stays free.
        let name = fresh("cfg.panic");
        let r = catch_unwind(|| registry().get_or_create(&name, || panic!("config closure")));
        assert_eq!(message(&*r.unwrap_err()), "config closure");
        assert!(registry().get(&name).is_none());
        let clock = ManualClock::new();
        registry().set_clock(&name, clock.clone());
        let b = registry().get_or_create(&name, || config(&clock).build().unwrap());
        still_works(&b, &clock);

        for start in STARTS {
            let clock = ManualClock::new();
            let name = fresh("cfg.state");
            registry().set_clock(&name, clock.clone());
            let b = registry().get_or_create(&name, || config(&clock).build().unwrap());
            enter(&b, start);
            let arm = Arm::new(&b);
            for fault in FAULTS {
                let case = format!("config closure, {fault:?}, in {start:?}");
                arm.once.store(false, SeqCst);
                arm.set(fault);
                let r = catch_unwind(AssertUnwindSafe(|| {
                    registry().get_or_create(&name, || {
                        arm.run(None);
                        config(&clock).build().unwrap()
                    })
                }));
                arm.set(Fault::None);
                match r {
                    Ok(got) => assert!(got.ptr_eq(&b), "{case}"),
                    Err(panic) => {
                        assert_eq!(fault, Fault::Panic, "{case}");
                        assert_eq!(message(&*panic), format!("injected fault in {name}"));
                    }
                }
                let want = if fault.forces_open() {
                    State::ForcedOpen
                } else {
                    start.state()
                };
                assert_eq!(b.state(), want, "{case}");
                arm.assert_clean(&case);
                enter(&b, start);
            }
            still_works(&b, &clock);
        }
    });
}

/// Config closures now run outside the registry's locks, so creators race: every thread gets
/// the one breaker that was inserted first, and a `configure` racing a creation either wins
/// (returns `true`, and the breaker has its config) or finds the breaker there (`false`).
#[test]
fn racing_creators_and_configure_agree_on_one_breaker() {
    within("racing creators", || {
        for _ in 0..200 {
            let name = fresh("race");
            let got: Vec<(Breaker, u32)> = std::thread::scope(|s| {
                let configure = s.spawn(|| {
                    let preset = Config::builder().failures(99).build().unwrap();
                    registry().configure(&name, preset)
                });
                let creators: Vec<_> = (1..=3u32)
                    .map(|n| {
                        let name = &name;
                        s.spawn(move || {
                            let c = || Config::builder().failures(n).build().unwrap();
                            (registry().get_or_create(name, c), n)
                        })
                    })
                    .collect();
                let configured = configure.join().unwrap();
                let got: Vec<_> = creators.into_iter().map(|t| t.join().unwrap()).collect();
                let failures = got[0].0.config().failures().unwrap();
                if configured {
                    assert_eq!(failures, 99, "configure returned true but was not used");
                } else {
                    assert!((1..=3).contains(&failures), "{failures}");
                }
                got
            });
            assert!(
                got.iter().all(|(b, _)| b.ptr_eq(&got[0].0)),
                "two breakers for one name"
            );
            assert!(registry().get(&name).unwrap().ptr_eq(&got[0].0));
        }
    });
}

/// A new breaker reads its clock while it is built, outside the registry's locks, after the
/// registry read which preset applies: a clock that `configure`s the name right then (as
/// another thread could) must not have its preset lost — `configure` said `true`.
#[test]
fn repro_a_configure_while_a_breaker_is_built_is_not_lost() {
    struct Configures {
        name: String,
        done: AtomicBool,
    }
    impl Clock for Configures {
        fn now(&self) -> Duration {
            if !self.done.swap(true, SeqCst) {
                let preset = Config::builder().failures(99).build().unwrap();
                assert!(registry().configure(&self.name, preset));
            }
            Duration::ZERO
        }
    }
    within("configure while building", || {
        let name = fresh("configure-between");
        let clock = Configures {
            name: name.clone(),
            done: AtomicBool::new(false),
        };
        let b = registry().get_or_create(&name, || {
            Config::builder().failures(3).clock(clock).build().unwrap()
        });
        assert_eq!(b.config().failures(), Some(99), "the preset was lost");
        assert!(!registry().configure(&name, Config::default()));
    });
}
