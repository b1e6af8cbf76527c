//! Listeners that panic, re-enter, add listeners or change the state; registry-wide
//! listeners; events from racing threads told once each, in order.

use std::panic::{AssertUnwindSafe, catch_unwind, panic_any};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use breakerbox_runtime::{Breaker, Config, Error, ManualClock, State, registry};

use crate::calls::{BombPayload, S, clocked, fail, ok};

#[test]
fn listener_panicking_during_a_panicking_protected_call_does_not_abort() {
    let b = Breaker::new(
        "listener-panics-unwind",
        Config::builder().failures(1).build().unwrap(),
    );
    let later = Arc::new(AtomicU32::new(0));
    b.on_state_change(|_| panic!("listener panics"));
    let l = later.clone();
    b.on_state_change(move |_| {
        l.fetch_add(1, Ordering::SeqCst);
    });
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _: Result<(), Error<&str>> = b.call(|| panic!("the protected call panics"));
    }));
    let payload = caught.expect_err("the protected call's panic resumes");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the protected call panics"),
        "the caller sees the call's own panic, not the listener's"
    );
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().failures, 1);
    assert_eq!(
        later.load(Ordering::SeqCst),
        1,
        "a later listener still runs"
    );
}

#[test]
fn listener_panics_never_reach_an_unrelated_caller() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "listener-panics-caller",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    let told = Arc::new(Mutex::new(Vec::new()));
    b.on_state_change(|_| panic!("string listener panic"));
    b.on_state_change(|_| panic_any(42u32)); // a payload that is not a string
    b.on_state_change(|e| {
        if e.to == State::HalfOpen {
            panic_any(vec![1u8, 2, 3]);
        }
    });
    let t = told.clone();
    b.on_state_change(move |e| t.lock().unwrap().push((e.from, e.to)));
    fail(&b, "x"); // closed -> open
    clock.advance(S);
    ok(&b); // open -> half-open -> closed
    b.force_open();
    b.disable();
    b.trip_for(S);
    b.reset();
    assert_eq!(
        *told.lock().unwrap(),
        [
            (State::Closed, State::Open),
            (State::Open, State::HalfOpen),
            (State::HalfOpen, State::Closed),
            (State::Closed, State::ForcedOpen),
            (State::ForcedOpen, State::Disabled),
            (State::Disabled, State::Open),
            (State::Open, State::Closed),
        ]
    );
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn listener_panic_whose_payload_panics_on_drop_is_contained() {
    let b = Breaker::new("listener-panics-bomb", Config::default());
    b.on_state_change(|_| panic_any(BombPayload));
    b.force_open();
    b.reset();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn listener_that_adds_a_listener_while_being_told() {
    let b = Breaker::new("listener-panics-add", Config::default());
    let weak = b.downgrade();
    let added = Arc::new(AtomicU32::new(0));
    let a = added.clone();
    b.on_state_change(move |_| {
        let b = weak.upgrade().unwrap();
        let a = a.clone();
        b.on_state_change(move |_| {
            a.fetch_add(1, Ordering::SeqCst);
        });
    });
    b.force_open(); // adds listener #2 (not told this event, or told: either is fine)
    let after_first = added.load(Ordering::SeqCst);
    assert!(after_first <= 1);
    b.reset(); // listener #2 told; #3 added
    // A listener added while an event is told is told the later events.
    assert!(added.load(Ordering::SeqCst) > after_first);
    b.force_open();
    assert!(added.load(Ordering::SeqCst) >= after_first + 3);
}

#[test]
fn listener_that_changes_the_state_and_panics() {
    let b = Breaker::new("listener-panics-act", Config::default());
    let weak = b.downgrade();
    let seen = Arc::new(Mutex::new(Vec::new()));
    b.on_state_change(move |e| {
        if e.to == State::ForcedOpen {
            weak.upgrade().unwrap().reset();
            panic!("after acting");
        }
    });
    let s = seen.clone();
    b.on_state_change(move |e| s.lock().unwrap().push(e.to));
    b.force_open();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(*seen.lock().unwrap(), [State::ForcedOpen, State::Closed]);
}

#[test]
fn registry_listener_that_panics_is_contained() {
    let name = "listener-panics-registry-listener";
    let told = Arc::new(AtomicU32::new(0));
    registry().on_state_change(move |e| {
        if e.name == name {
            panic_any(7i64);
        }
    });
    let t = told.clone();
    registry().on_state_change(move |e| {
        if e.name == name {
            t.fetch_add(1, Ordering::SeqCst);
        }
    });
    let b = registry().get_or_create(name, || Config::builder().failures(1).build().unwrap());
    b.on_state_change(|_| panic!("own listener too"));
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _: Result<(), Error<&str>> = b.call(|| panic!("call panics"));
    }));
    assert!(caught.is_err());
    assert_eq!(b.state(), State::Open);
    b.reset();
    assert_eq!(told.load(Ordering::SeqCst), 2);
}

#[test]
fn registry_listener_may_use_the_registry() {
    let name = "listener-panics-registry-reenter";
    let made = Arc::new(AtomicBool::new(false));
    let m = made.clone();
    registry().on_state_change(move |e| {
        if e.name == name {
            let other =
                registry().get_or_create("listener-panics-registry-reenter-other", Config::default);
            other.force_open();
            let _ = registry().snapshot();
            m.store(true, Ordering::SeqCst);
        }
    });
    let b = registry().get_or_create(name, Config::default);
    b.force_open();
    assert!(made.load(Ordering::SeqCst));
    assert_eq!(
        registry()
            .get("listener-panics-registry-reenter-other")
            .unwrap()
            .state(),
        State::ForcedOpen
    );
}

#[test]
fn events_from_racing_threads_are_told_once_each_in_order_despite_panicking_listeners() {
    let b = Breaker::new("adv-events-race", Config::default());
    let seen: Arc<Mutex<Vec<(State, State)>>> = Arc::default();
    let n = Arc::new(AtomicU64::new(0));
    let n2 = n.clone();
    b.on_state_change(move |_| {
        if n2.fetch_add(1, Ordering::Relaxed) % 7 == 3 {
            panic!("every seventh event");
        }
    });
    let s = seen.clone();
    b.on_state_change(move |e| s.lock().unwrap().push((e.from, e.to)));
    std::thread::scope(|scope| {
        for t in 0..4 {
            let b = &b;
            scope.spawn(move || {
                for i in 0..2_000 {
                    match (t + i) % 3 {
                        0 => b.trip_for(S),
                        1 => b.disable(),
                        _ => b.reset(),
                    }
                }
            });
        }
    });
    // Quiet now: a last change is told on this thread, after any left queued.
    b.force_open();
    let seen = seen.lock().unwrap();
    assert_eq!(
        n.load(Ordering::Relaxed) as usize,
        seen.len(),
        "each event told to each listener once"
    );
    assert_eq!(seen[0].0, State::Closed);
    for w in seen.windows(2) {
        assert_eq!(w[0].1, w[1].0, "events out of order or lost: {w:?}");
    }
    assert_eq!(seen.last().unwrap().1, State::ForcedOpen);
    assert_eq!(b.state(), State::ForcedOpen);
    let opened = seen.iter().filter(|(_, to)| *to == State::Open).count();
    assert_eq!(opened as u64, b.metrics().times_opened);
}
