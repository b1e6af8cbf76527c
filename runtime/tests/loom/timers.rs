//! loom models of the open timer (src/timer.rs): a timer firing races calls, a reset and a
//! shutdown, through the real code (`ManualClock::advance` fires the timers); and timers on
//! two runtimes (a clock whose timers are the current thread's runtime's, as `TokioClock`'s
//! are): a timer armed on one runtime while the breaker re-opens, is called, or is reset on
//! another, that runtime shutting down, and best-effort timers (a current-thread runtime's)
//! firing late.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Clock, Config, Event, ManualClock, Reason, State, Timers};
use loom::thread;

fn opened() -> (Breaker, ManualClock, Arc<AtomicUsize>) {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    let b = Breaker::new("loom-timer", config);
    b.try_acquire().unwrap().failure();
    let elapsed = Arc::new(AtomicUsize::new(0));
    let n = elapsed.clone();
    b.on_state_change(move |e: &Event| {
        if e.reason == Reason::OpenElapsed {
            n.fetch_add(1, Ordering::Relaxed);
        }
    });
    (b, clock, elapsed)
}

/// The timer fires while a call arrives: the call is rejected (the timer has not moved it yet)
/// or admitted as the probe; the breaker half-opens exactly once.
#[test]
fn a_timer_firing_races_a_call() {
    loom::model(|| {
        let (b, clock, elapsed) = opened();
        let t = thread::spawn(move || clock.advance(Duration::from_secs(1)));
        let probe = b.try_acquire_owned();
        t.join().unwrap();
        match probe {
            Ok(p) => {
                assert!(p.is_probe());
                std::mem::forget(p);
            }
            Err(r) => assert!(r.retry_after().is_some()),
        }
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(elapsed.load(Ordering::Relaxed), 1);
    });
}

/// A reset races the timer: closed either way, and never half-opened after the reset.
#[test]
fn a_timer_firing_races_a_reset() {
    loom::model(|| {
        let (b, clock, elapsed) = opened();
        let c = b.clone();
        let t = thread::spawn(move || c.reset());
        clock.advance(Duration::from_secs(1));
        t.join().unwrap();
        assert_eq!(b.state(), State::Closed);
        assert!(elapsed.load(Ordering::Relaxed) <= 1);
    });
}

/// The timers shut down while one fires: half-open, or open without a timer, and then the
/// first call (the time being up) is admitted as the probe. Never open for good.
#[test]
fn a_shutdown_races_a_firing() {
    loom::model(|| {
        let (b, clock, _) = opened();
        let timers = clock.timers().unwrap();
        let t = thread::spawn(move || timers.shutdown());
        clock.advance(Duration::from_secs(1));
        t.join().unwrap();
        let p = b.try_acquire_owned().unwrap();
        assert!(p.is_probe());
        std::mem::forget(p);
        assert_eq!(b.state(), State::HalfOpen);
    });
}

/// Two runtimes' timers on one time, as `TokioClock` has one `Timers` per runtime: a breaker
/// that opens arms its timer on the runtime of the thread it opens on (`enter`).
struct Runtimes {
    time: ManualClock,
    timers: [Arc<Timers>; 2],
}

loom::thread_local! {
    /// The runtime this thread is in.
    static RUNTIME: Cell<usize> = Cell::new(0);
}

/// Puts this thread in runtime `i`.
fn enter(i: usize) {
    RUNTIME.with(|r| r.set(i));
}

impl Clock for Runtimes {
    fn now(&self) -> Duration {
        self.time.now()
    }

    fn timers(&self) -> Option<Arc<Timers>> {
        Some(self.timers[RUNTIME.with(Cell::get)].clone())
    }
}

impl Runtimes {
    /// Runtime `i`'s timer task runs, at the time now.
    fn fire(&self, i: usize) {
        self.timers[i].fire_due(self.time.now());
    }
}

/// A breaker opened for a second on runtime 0 (this thread), whose timers are `first`; runtime
/// 1's are relied on. Counts its `OpenElapsed` events.
fn opened_on_runtimes(first: Timers) -> (Breaker, Arc<Runtimes>, Arc<AtomicUsize>) {
    let runtimes = Arc::new(Runtimes {
        time: ManualClock::without_timers(),
        timers: [Arc::new(first), Arc::new(Timers::new())],
    });
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(1))
        .clock(runtimes.clone())
        .build()
        .unwrap();
    let b = Breaker::new("loom-runtimes", config);
    let elapsed = Arc::new(AtomicUsize::new(0));
    let n = elapsed.clone();
    b.on_state_change(move |e: &Event| {
        if e.reason == Reason::OpenElapsed {
            n.fetch_add(1, Ordering::Relaxed);
        }
    });
    enter(0);
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), State::Open);
    (b, runtimes, elapsed)
}

/// Armed on runtime 0, re-opened on runtime 1 while runtime 0's task fires late: runtime 0's
/// timer half-opens only the opening it was armed for, never the later one, which stays open
/// until its own time and is then moved on by runtime 1's timer.
#[test]
fn a_timer_of_one_runtime_never_moves_an_opening_armed_on_another() {
    loom::model(|| {
        let (b, rt, elapsed) = opened_on_runtimes(Timers::new());
        rt.time.advance(Duration::from_secs(1));
        let c = b.clone();
        let t = thread::spawn(move || {
            enter(1);
            c.trip_for(Duration::from_secs(1));
        });
        rt.fire(0);
        t.join().unwrap();
        assert_eq!(b.state(), State::Open, "the re-opening stands");
        let before = elapsed.load(Ordering::Relaxed);
        assert!(before <= 1);
        rt.time.advance(Duration::from_secs(1));
        rt.fire(0);
        assert_eq!(b.state(), State::Open, "runtime 0 holds nothing for it");
        rt.fire(1);
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(elapsed.load(Ordering::Relaxed), before + 1);
    });
}

/// Runtime 0 shuts down (is dropped) while a call on runtime 1 arrives after the open time:
/// the call is rejected (the timer was still armed) or is the probe; the next call is
/// admitted either way. Never open for good.
#[test]
fn a_runtime_shutting_down_races_a_call_on_another() {
    loom::model(|| {
        let (b, rt, _) = opened_on_runtimes(Timers::new());
        rt.time.advance(Duration::from_secs(1));
        let c = b.clone();
        let t = thread::spawn(move || {
            enter(1);
            match c.try_acquire_owned() {
                Ok(p) => {
                    assert!(p.is_probe());
                    p.success();
                    true
                }
                Err(r) => {
                    assert!(r.retry_after().is_some());
                    false
                }
            }
        });
        rt.timers[0].shutdown();
        let probed = t.join().unwrap();
        enter(1);
        let p = b.try_acquire().unwrap();
        assert_eq!(p.is_probe(), !probed);
        p.success();
        assert_eq!(b.state(), State::Closed);
    });
}

/// Runtime 0's timers are best-effort (a current-thread runtime's). Its task fires late while
/// a call arrives on runtime 1 after the open time: the call is the probe whichever comes
/// first, and the breaker half-opens once.
#[test]
fn a_late_best_effort_timer_races_a_call_on_another_runtime() {
    loom::model(|| {
        let (b, rt, elapsed) = opened_on_runtimes(Timers::best_effort());
        rt.time.advance(Duration::from_secs(1));
        let r = rt.clone();
        let t = thread::spawn(move || r.fire(0));
        enter(1);
        let p = b.try_acquire_owned().unwrap();
        assert!(p.is_probe());
        t.join().unwrap();
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(elapsed.load(Ordering::Relaxed), 1);
        p.success();
        assert_eq!(b.state(), State::Closed);
    });
}

/// A reset races a best-effort timer firing late and a call after the open time: the call
/// is admitted (as the probe, or closed after the reset), the breaker half-opened at most
/// once, and it is closed once the reset is done: nothing moves it after that.
#[test]
fn a_reset_races_a_late_best_effort_timer_and_a_call() {
    loom::model(|| {
        let (b, rt, elapsed) = opened_on_runtimes(Timers::best_effort());
        rt.time.advance(Duration::from_secs(1));
        let c = b.clone();
        let t = thread::spawn(move || c.reset());
        enter(1);
        let p = b.try_acquire_owned().unwrap();
        rt.fire(0);
        t.join().unwrap();
        assert!(elapsed.load(Ordering::Relaxed) <= 1);
        // A probe left unrecorded: the reset's close stands all the same.
        std::mem::forget(p);
        assert_eq!(b.state(), State::Closed);
        rt.fire(0);
        assert_eq!(b.state(), State::Closed);
    });
}
