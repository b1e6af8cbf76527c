//! True state without traffic: an open breaker turns half-open when its open time ends,
//! whether or not a call arrives, and tells its listeners; a timed rejection reads no clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Clock, Config, ConfigBuilder, Event, ManualClock, Reason, RejectReason, State,
};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn breaker(name: &str, config: ConfigBuilder, clock: &ManualClock) -> Breaker {
    Breaker::new(name, config.clock(clock.clone()).build().unwrap())
}

/// Events as (from, to, reason, at).
type Seen = Arc<Mutex<Vec<(State, State, Reason, Duration)>>>;

fn events(b: &Breaker) -> Seen {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    b.on_state_change(move |e: &Event| log.lock().unwrap().push((e.from, e.to, e.reason, e.at)));
    seen
}

#[test]
fn the_open_time_ending_half_opens_it_without_a_call() {
    let clock = ManualClock::new();
    let b = breaker(
        "timed",
        Config::builder().failures(1).open_for(secs(10)),
        &clock,
    );
    let seen = events(&b);
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.advance(secs(4));
    // Rejected with the time left, read when asked.
    let r = b.try_acquire().unwrap_err();
    assert_eq!(r.reason(), RejectReason::Open);
    assert_eq!(r.retry_after(), Some(secs(6)));
    assert!(r.to_string().contains("retry in 6.0s"), "{r}");
    clock.advance(secs(5));
    assert_eq!(b.state(), State::Open);
    // Past the deadline: half-open, told before `advance` returns, at the deadline's time.
    clock.advance(secs(3));
    assert_eq!(b.state(), State::HalfOpen);
    let m = b.metrics();
    assert_eq!((m.calls, m.rejected, m.time_in_state), (2, 1, secs(2)));
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (State::Closed, State::Open, Reason::Failures(1), secs(0)),
            (State::Open, State::HalfOpen, Reason::OpenElapsed, secs(10)),
        ]
    );
    assert!(clock.timers().unwrap().next_due().is_none());
    // The probe works as ever.
    b.call(|| Ok::<_, &str>(())).unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_timer_left_from_an_earlier_opening_does_nothing() {
    let clock = ManualClock::new();
    let b = breaker(
        "stale-timer",
        Config::builder().failures(1).open_for(secs(10)),
        &clock,
    );
    let seen = events(&b);
    b.call(|| Err::<(), _>("down")).unwrap_err();
    b.reset();
    clock.advance(secs(10));
    assert_eq!(
        b.state(),
        State::Closed,
        "a reset's breaker is not half-opened"
    );
    // A re-trip moves the deadline: the first timer finds another opening and leaves it.
    b.trip_for(secs(5));
    clock.advance(secs(3));
    b.trip_for(secs(5));
    clock.advance(secs(2));
    assert_eq!(b.state(), State::Open);
    clock.advance(secs(3));
    assert_eq!(b.state(), State::HalfOpen);
    let reasons: Vec<Reason> = seen.lock().unwrap().iter().map(|e| e.2).collect();
    assert_eq!(
        reasons,
        [
            Reason::Failures(1),
            Reason::Reset,
            Reason::TripFor(secs(5)),
            Reason::OpenElapsed
        ]
    );
}

#[test]
fn a_panicking_listener_stops_no_timer() {
    let clock = ManualClock::new();
    let a = breaker(
        "panics",
        Config::builder().failures(1).open_for(secs(1)),
        &clock,
    );
    let b = breaker(
        "after-it",
        Config::builder().failures(1).open_for(secs(2)),
        &clock,
    );
    a.on_state_change(|e| {
        if e.to == State::HalfOpen {
            panic!("listener panics on half-open");
        }
    });
    let told = Arc::new(AtomicUsize::new(0));
    let n = told.clone();
    b.on_state_change(move |e| {
        if e.to == State::HalfOpen {
            n.fetch_add(1, Ordering::Relaxed);
        }
    });
    a.call(|| Err::<(), _>("down")).unwrap_err();
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.advance(secs(5));
    assert_eq!((a.state(), b.state()), (State::HalfOpen, State::HalfOpen));
    assert_eq!(told.load(Ordering::Relaxed), 1);
}

/// A listener may act on its own breaker from the timer's transition: it runs under no lock.
#[test]
fn a_listener_may_reopen_its_breaker_from_the_timer() {
    let clock = ManualClock::new();
    let b = breaker(
        "reentrant",
        Config::builder().failures(1).open_for(secs(1)),
        &clock,
    );
    let weak = b.downgrade();
    b.on_state_change(move |e| {
        if e.to == State::HalfOpen
            && let Some(b) = weak.upgrade()
        {
            b.trip_for(Duration::from_secs(1));
        }
    });
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.advance(secs(1));
    assert_eq!(b.state(), State::Open, "re-opened by its listener");
    assert_eq!(clock.timers().unwrap().next_due(), Some(secs(2)));
}

/// If the timers stop (as the system timer thread's would if it died), no breaker is left
/// open for good: each goes back to reading its clock, and the first call after its open
/// time half-opens it.
#[test]
fn stopped_timers_leave_no_breaker_open_for_good() {
    let clock = ManualClock::new();
    let b = breaker(
        "stopped",
        Config::builder().failures(1).open_for(secs(10)),
        &clock,
    );
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.timers().unwrap().shutdown();
    clock.advance(secs(4));
    assert_eq!(b.try_acquire().unwrap_err().retry_after(), Some(secs(6)));
    clock.advance(secs(6));
    assert_eq!(b.state(), State::Open, "no timer: open until a call");
    assert!(b.try_acquire().unwrap().is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    // Openings after the stop are not timed either, and still end.
    b.trip_for(secs(1));
    clock.advance(secs(1));
    assert!(b.try_acquire().unwrap().is_probe());
}

/// A user clock without timers: as before, open until a call arrives after the open time.
#[test]
fn a_clock_without_timers_half_opens_at_the_first_call() {
    #[derive(Clone)]
    struct Plain(ManualClock);
    impl Clock for Plain {
        fn now(&self) -> Duration {
            self.0.now()
        }
    }
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(secs(1))
        .clock(Plain(clock.clone()));
    let b = Breaker::new("untimed", config.build().unwrap());
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.advance(secs(1));
    assert_eq!(b.state(), State::Open);
    assert!(b.try_acquire().unwrap().is_probe());
}

/// A clock whose `timers` panics counts as one without.
#[test]
fn a_clock_whose_timers_panic_is_read_on_each_rejection() {
    struct Bad(ManualClock);
    impl Clock for Bad {
        fn now(&self) -> Duration {
            self.0.now()
        }
        fn timers(&self) -> Option<Arc<breakerbox_runtime::Timers>> {
            panic!("timers panics")
        }
    }
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(secs(1))
        .clock(Bad(clock.clone()));
    let b = Breaker::new("bad-timers", config.build().unwrap());
    b.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(b.state(), State::Open);
    clock.advance(secs(1));
    assert!(b.try_acquire().unwrap().is_probe());
}

/// The system clock's timer thread: a breaker opened for 1 ms turns half-open with no call,
/// its event told by the notifier thread. (This waits on the event, not on a time: a loaded
/// machine makes it slower, never wrong.)
#[test]
fn the_system_timer_half_opens_without_a_call() {
    let b = Breaker::new(
        "system-timed",
        Config::builder().failures(1).build().unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    b.on_state_change(move |e| {
        let _ = tx.lock().unwrap().send((
            e.to,
            e.reason,
            std::thread::current().name().map(str::to_owned),
        ));
    });
    b.trip_for(Duration::from_millis(1));
    assert_eq!(rx.recv().unwrap().0, State::Open);
    let (to, reason, thread) = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!((to, reason), (State::HalfOpen, Reason::OpenElapsed));
    assert_eq!(thread.as_deref(), Some("breakerbox-notify"));
    assert_eq!(b.state(), State::HalfOpen);
}

#[test]
fn a_clock_shared_in_an_arc_keeps_its_timers() {
    let clock = Arc::new(ManualClock::new());
    let config = Config::builder()
        .failures(1)
        .open_for(secs(30))
        .clock(clock.clone())
        .build()
        .unwrap();
    let b = Breaker::new("arc", config);
    b.call(|| Err::<(), _>("down")).unwrap_err();
    clock.advance(secs(30));
    assert_eq!(b.state(), State::HalfOpen, "moved on without a call");
}
