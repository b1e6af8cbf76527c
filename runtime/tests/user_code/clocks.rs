//! Faults in clocks: panicking, re-entering, acting and blocking reads, in every state.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Clock, Config, ConfigBuilder, ManualClock, State, Window, registry,
};

use crate::support::{
    Arm, Fault, STARTS, Start, config, enter, fresh, message, secs, still_works, within,
};

/// A manual clock that runs the armed fault when read. Reads made while the fault runs (on
/// any thread) are plain, or a re-entering clock would recurse for ever.
struct FaultyClock {
    time: ManualClock,
    arm: Arc<OnceLock<Arc<Arm>>>,
    busy: Arc<AtomicBool>,
}

impl Clock for FaultyClock {
    fn now(&self) -> Duration {
        if let Some(arm) = self.arm.get()
            && !self.busy.swap(true, SeqCst)
        {
            let r = catch_unwind(AssertUnwindSafe(|| arm.run(None)));
            self.busy.store(false, SeqCst);
            if let Err(panic) = r {
                resume_unwind(panic);
            }
        }
        self.time.now()
    }
}

/// A breaker on a faulty clock, its manual time, and the arm that drives its faults.
fn on_faulty_clock(builder: ConfigBuilder) -> (Breaker, ManualClock, Arc<Arm>) {
    let time = ManualClock::new();
    let slot = Arc::new(OnceLock::new());
    let clock = FaultyClock {
        time: time.clone(),
        arm: slot.clone(),
        busy: Arc::default(),
    };
    let b = Breaker::new("faults.clock", builder.clock(clock).build().unwrap());
    let arm = Arm::new(&b);
    slot.set(arm.clone()).ok().unwrap();
    (b, time, arm)
}

/// Every config shape that reads the clock somewhere else: plain (open deadlines, probes),
/// `failures_within`, a time window, and `slow`.
fn clock_configs() -> Vec<(&'static str, ConfigBuilder)> {
    let base = || Config::builder().failures(1).open_for(secs(1));
    let window = Config::builder()
        .open_for(secs(1))
        .failure_rate(50)
        .window(Window::Time(secs(10)))
        .min_calls(1);
    vec![
        ("plain", base()),
        ("failures_within", base().failures_within(secs(10))),
        ("time window", window),
        ("slow", base().slow(secs(5))),
    ]
}

/// Reads the clock wherever the API does, with the fault armed, catching what comes out.
/// Returns the panics that got out.
fn exercise_clock(b: &Breaker, time: &ManualClock, start: Start) -> usize {
    let mut panics = 0;
    let mut step = |f: &dyn Fn()| {
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            panics += 1;
        }
    };
    step(&|| {
        let _ = b.metrics();
    });
    step(&|| {
        let _ = b.export_state();
    });
    if start == Start::Open {
        time.advance(secs(1));
    }
    step(&|| {
        let _ = b.call(|| Ok::<_, &str>(()));
    });
    panics
}

fn clock_faults(fault: Fault, shapes: Vec<(&'static str, ConfigBuilder)>) {
    within("clock faults", move || {
        for (shape, builder) in shapes {
            for start in STARTS {
                let case = format!("clock, {fault:?}, {shape}, in {start:?}");
                let (b, time, arm) = on_faulty_clock(builder.clone());
                enter(&b, start);
                let before = b.metrics();
                arm.set(fault);
                let panics = exercise_clock(&b, &time, start);
                arm.set(Fault::None);
                if fault != Fault::Panic {
                    assert_eq!(panics, 0, "{case}");
                }
                let after = b.metrics();
                // At most the one call is counted, once.
                assert!(after.calls - before.calls <= 1, "{case}");
                if !fault.forces_open() && start == Start::ForcedOpen {
                    assert_eq!(b.state(), State::ForcedOpen, "{case}");
                }
                arm.assert_clean(&case);
                still_works(&b, &time);
            }
        }
    });
}

#[test]
fn a_panicking_clock_leaves_the_breaker_working_in_any_state() {
    clock_faults(Fault::Panic, clock_configs());
}

/// With a bulkhead and `slow`, a panic of the clock in any state leaves the breaker working
/// once reset (the tests below check what it does before any reset).
#[test]
fn a_panicking_clock_leaves_a_bulkhead_working() {
    let bulkhead = Config::builder()
        .failures(1)
        .open_for(secs(1))
        .slow(secs(5))
        .max_concurrent(1);
    clock_faults(Fault::Panic, vec![("slow, bulkhead", bulkhead)]);
}

#[test]
fn a_re_entering_clock_disturbs_nothing_in_any_state() {
    clock_faults(Fault::ReEnter, clock_configs());
}

#[test]
fn a_clock_acting_on_its_breaker_leaves_it_working() {
    clock_faults(Fault::Act, clock_configs());
}

#[test]
fn a_clock_blocking_on_a_thread_that_uses_the_breaker_does_not_deadlock() {
    clock_faults(Fault::Block, clock_configs());
}

/// A clock that panics when the registry creates its breaker: the creation fails, the name
/// stays free and the registry usable; the next creation with a working clock succeeds.
#[test]
fn a_clock_panicking_at_creation_leaves_the_registry_working() {
    within("clock at creation", || {
        struct Broken;
        impl Clock for Broken {
            fn now(&self) -> Duration {
                panic!("broken clock")
            }
        }
        let name = fresh("clock.create");
        let r = catch_unwind(|| {
            registry().get_or_create(&name, || Config::builder().clock(Broken).build().unwrap())
        });
        assert_eq!(message(&*r.unwrap_err()), "broken clock");
        assert!(registry().get(&name).is_none());
        let clock = ManualClock::new();
        let b = registry().get_or_create(&name, || config(&clock).build().unwrap());
        still_works(&b, &clock);
        let r = catch_unwind(|| {
            Breaker::new(
                "faults.broken",
                Config::builder().clock(Broken).build().unwrap(),
            )
        });
        assert_eq!(message(&*r.unwrap_err()), "broken clock");
    });
}

/// A clock whose precise (`now`) and coarse (`now_coarse`) readings each panic once when armed,
/// so that a test picks which reading of the breaker fails.
struct OneShotFault {
    time: ManualClock,
    precise: AtomicBool,
    coarse: AtomicBool,
}

impl Clock for OneShotFault {
    fn now(&self) -> Duration {
        assert!(!self.precise.swap(false, SeqCst), "precise reading failed");
        self.time.now()
    }

    fn now_coarse(&self) -> Duration {
        assert!(!self.coarse.swap(false, SeqCst), "coarse reading failed");
        self.time.now()
    }

    fn timers(&self) -> Option<Arc<breakerbox_runtime::Timers>> {
        self.time.timers()
    }
}

/// A breaker on a [`OneShotFault`] clock, and that clock.
fn on_one_shot_clock(builder: ConfigBuilder) -> (Breaker, Arc<OneShotFault>) {
    let clock = Arc::new(OneShotFault {
        time: ManualClock::new(),
        precise: AtomicBool::new(false),
        coarse: AtomicBool::new(false),
    });
    let shared: Arc<dyn Clock> = clock.clone();
    let b = Breaker::new("faults.one-shot", builder.clock(shared).build().unwrap());
    (b, clock)
}

/// A clock that panics as a timed call is admitted through a bulkhead takes no place: with
/// `max_concurrent = 1`, the next call is admitted, with no reset.
#[test]
fn a_clock_panic_at_admission_takes_no_bulkhead_place() {
    let builder = Config::builder().max_concurrent(1).slow(secs(5));
    let (b, clock) = on_one_shot_clock(builder);
    clock.precise.store(true, SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| drop(b.try_acquire()))).is_err());
    assert_eq!(b.state(), State::Closed);
    let permit = b.try_acquire().expect("the place is free");
    permit.success();
    assert_eq!(b.metrics().successes, 1);
}

/// A clock that panics as a probe is admitted takes no probe slot: the next call is the
/// probe at once, not a `HalfOpenFull` rejection until `probe_timeout` reopens the breaker.
#[test]
fn a_clock_panic_at_probe_admission_takes_no_probe_slot() {
    let builder = Config::builder()
        .failures(1)
        .open_for(secs(1))
        .half_open_calls(1)
        .slow(secs(5));
    let (b, clock) = on_one_shot_clock(builder);
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.time.advance(secs(1));
    assert_eq!(b.state(), State::HalfOpen);
    clock.precise.store(true, SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| drop(b.try_acquire()))).is_err());
    let probe = b.try_acquire().expect("the probe slot is free");
    assert!(probe.is_probe());
    probe.success();
    assert_eq!(b.state(), State::Closed);
}

/// A clock that panics as the failure that reaches `failures` trips the breaker leaves the
/// streak one short of the threshold, never at it with the breaker closed: the next failure
/// trips it.
#[test]
fn a_clock_panic_at_a_trip_leaves_the_next_failure_to_trip() {
    let (b, clock) = on_one_shot_clock(Config::builder().failures(2).open_for(secs(1)));
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.coarse.store(true, SeqCst);
    let r = catch_unwind(AssertUnwindSafe(|| b.call(|| Err::<(), _>("down"))));
    assert!(r.is_err(), "the clock's panic reaches the caller");
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().consecutive_failures, 1);
    assert_eq!(b.metrics().failures, 2, "both failures are counted");
    b.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(b.state(), State::Open);
}

/// A clock that panics as a success trips a count window (at `min_calls`) leaves the window to
/// be judged again: the next success, with the same rate over the window, trips it.
#[test]
fn a_clock_panic_at_a_rate_trip_leaves_the_next_success_to_trip() {
    let builder = Config::builder()
        .failure_rate(50)
        .window(Window::Calls(4))
        .min_calls(4)
        .open_for(secs(1));
    let (b, clock) = on_one_shot_clock(builder);
    b.call(|| Ok::<_, &str>(())).unwrap();
    b.call(|| Err::<(), _>("down")).unwrap_err();
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.coarse.store(true, SeqCst);
    let r = catch_unwind(AssertUnwindSafe(|| b.call(|| Ok::<_, &str>(()))));
    assert!(r.is_err(), "the clock's panic reaches the caller");
    assert_eq!(b.state(), State::Closed);
    b.call(|| Ok::<_, &str>(())).unwrap();
    assert_eq!(
        b.state(),
        State::Open,
        "two failures of the last four calls"
    );
}

/// A clock that panics as a timed call ends, when its duration is read, loses no count: the
/// call is in the breaker's totals.
#[test]
fn a_clock_panic_as_a_timed_call_ends_still_counts_it() {
    let (b, clock) = on_one_shot_clock(Config::builder().failures(3).slow(secs(5)));
    let permit = b.try_acquire().unwrap();
    clock.precise.store(true, SeqCst);
    assert!(catch_unwind(AssertUnwindSafe(|| permit.failure())).is_err());
    let m = b.metrics();
    assert_eq!((m.calls, m.failures), (1, 1));
}
