//! Faults in state-change listeners, per breaker and registry-wide, in every state.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, LazyLock, Mutex};

use breakerbox_runtime::{Breaker, ManualClock, State, registry};

use crate::support::{
    Arm, Fault, STARTS, Start, config, enter, fresh, leave, message, secs, still_works, within,
};

/// The registry listener, installed once for the process: it runs the fault armed on the
/// breaker the event is about, if any.
fn registry_arms() -> &'static Mutex<HashMap<String, Arc<Arm>>> {
    static ARMS: LazyLock<Mutex<HashMap<String, Arc<Arm>>>> = LazyLock::new(|| {
        registry().on_state_change(|e| {
            let arm = registry_arms().lock().unwrap().get(&e.name).cloned();
            if let Some(arm) = arm {
                arm.run(Some(e));
            }
        });
        Mutex::default()
    });
    &ARMS
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Site {
    /// A listener of the breaker's own.
    Breaker,
    /// A registry-wide listener.
    Registry,
}

/// One case: a listener at `site` with `fault`, while the breaker leaves `start` (by a
/// panicking call if `panicking`).
fn listener_case(site: Site, fault: Fault, start: Start, panicking: bool) {
    let case = format!("{site:?} listener, {fault:?}, from {start:?}, panicking call: {panicking}");
    let clock = ManualClock::new();
    let b = match site {
        Site::Breaker => Breaker::new("faults.listener", config(&clock).build().unwrap()),
        Site::Registry => {
            let name = fresh("listener");
            registry().set_clock(&name, clock.clone());
            registry().get_or_create(&name, || config(&clock).build().unwrap())
        }
    };
    let arm = Arm::new(&b);
    match site {
        Site::Breaker => {
            let a = arm.clone();
            b.on_state_change(move |e| a.run(Some(e)));
        }
        Site::Registry => {
            registry_arms()
                .lock()
                .unwrap()
                .insert(b.name().to_owned(), arm.clone());
        }
    }
    // Told after the faulty listener (before it, for a registry one: a breaker's own
    // listeners are told first).
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    b.on_state_change(move |e| log.lock().unwrap().push((e.from, e.to)));

    enter(&b, start);
    seen.lock().unwrap().clear();
    let before = b.metrics();
    arm.set(fault);
    let (mut want, mut end) = leave(&b, &clock, start, panicking);
    arm.set(Fault::None);
    assert!(arm.ran.load(SeqCst) > 0, "{case}: the listener did not run");
    if fault.forces_open() {
        // Forced open at the first event, told right after it; a call after that is refused.
        let first = want[0];
        want.truncate(1);
        if first.1 != State::ForcedOpen {
            want.push((first.1, State::ForcedOpen));
        }
        end = State::ForcedOpen;
    }
    assert_eq!(*seen.lock().unwrap(), want, "{case}: events");
    assert_eq!(b.state(), end, "{case}: state");
    let after = b.metrics();
    let calls = after.calls - before.calls;
    assert!(calls <= 1, "{case}: {calls} calls counted for one");
    if start != Start::Disabled {
        assert_eq!(calls, 1, "{case}: the call was not counted once");
    }
    arm.assert_clean(&case);
    still_works(&b, &clock);
    if site == Site::Registry {
        registry_arms().lock().unwrap().remove(b.name());
    }
}

fn listener_faults(site: Site, fault: Fault) {
    within("listener faults", move || {
        for start in STARTS {
            for panicking in [false, true] {
                listener_case(site, fault, start, panicking);
            }
        }
    });
}

#[test]
fn a_panicking_listener_disturbs_nothing_in_any_state() {
    listener_faults(Site::Breaker, Fault::Panic);
}

#[test]
fn a_re_entering_listener_disturbs_nothing_in_any_state() {
    listener_faults(Site::Breaker, Fault::ReEnter);
}

#[test]
fn a_listener_acting_on_its_breaker_is_told_in_order_in_any_state() {
    listener_faults(Site::Breaker, Fault::Act);
}

#[test]
fn a_listener_blocking_on_a_thread_that_uses_the_breaker_does_not_deadlock() {
    listener_faults(Site::Breaker, Fault::Block);
}

#[test]
fn a_panicking_registry_listener_disturbs_nothing_in_any_state() {
    listener_faults(Site::Registry, Fault::Panic);
}

#[test]
fn a_re_entering_registry_listener_disturbs_nothing_in_any_state() {
    listener_faults(Site::Registry, Fault::ReEnter);
}

#[test]
fn a_registry_listener_acting_on_the_breaker_is_told_in_order_in_any_state() {
    listener_faults(Site::Registry, Fault::Act);
}

#[test]
fn a_registry_listener_blocking_on_a_thread_that_uses_the_registry_does_not_deadlock() {
    listener_faults(Site::Registry, Fault::Block);
}

/// A listener that panics while the call that trips the breaker is itself panicking (its
/// permit records the failure during the unwind) would abort the process, this test binary
/// with it, were the listener's panic not caught: the call's own panic comes out, and the
/// listeners after it, and the registry's, are told.
#[test]
fn repro_a_listener_panicking_during_a_panicking_call_does_not_abort() {
    let clock = ManualClock::new();
    let name = fresh("listeners");
    registry().set_clock(&name, clock.clone());
    let b = registry().get_or_create(&name, || config(&clock).build().unwrap());
    let told = Arc::new(Mutex::new(Vec::new()));
    let log = told.clone();
    b.on_state_change(move |e| log.lock().unwrap().push(("before", e.to)));
    b.on_state_change(|e| panic!("listener on {}", e.name));
    let log = told.clone();
    b.on_state_change(move |e| log.lock().unwrap().push(("after", e.to)));
    let log = told.clone();
    let mine = name.clone();
    registry().on_state_change(move |e| {
        if e.name == mine {
            log.lock().unwrap().push(("registry", e.to));
        }
    });
    let r = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), &str> { panic!("the protected call") })
    }));
    assert_eq!(message(&*r.unwrap_err()), "the protected call");
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        *told.lock().unwrap(),
        [
            ("before", State::Open),
            ("after", State::Open),
            ("registry", State::Open)
        ]
    );
    assert_eq!(b.metrics().failures, 1);
    // A panicking registry listener, too, during a panicking probe.
    let mine = name.clone();
    registry().on_state_change(move |e| {
        if e.name == mine && e.to == State::Closed {
            panic!("registry listener on {}", e.name);
        }
    });
    clock.advance(secs(1));
    let r = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), &str> { panic!("the probe") })
    }));
    assert_eq!(message(&*r.unwrap_err()), "the probe");
    assert_eq!(b.state(), State::Open, "the panicking probe re-opened it");
    clock.advance(secs(1));
    b.call(|| Ok::<_, &str>(())).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        told.lock().unwrap()[3..],
        [
            ("before", State::HalfOpen),
            ("after", State::HalfOpen),
            ("registry", State::HalfOpen),
            ("before", State::Open),
            ("after", State::Open),
            ("registry", State::Open),
            ("before", State::HalfOpen),
            ("after", State::HalfOpen),
            ("registry", State::HalfOpen),
            ("before", State::Closed),
            ("after", State::Closed),
            ("registry", State::Closed),
        ]
    );
}
