//! Health probes (docs/probes.md): at most one probe function of a breaker runs at a
//! time across openings, and the user's probe function dropped on the thread that fires the
//! timers cannot take the timers down with a panic. Manual clock only; each test waits for
//! probes by their counts, never for time.

use breakerbox_runtime::{Breaker, Config, ManualClock, State};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn trip(breaker: &Breaker) {
    breaker.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
}

/// A probe that hangs (a connect to a black-holed host) holds its opening's probing; the
/// breaker half-opens at its open time, a real call fails and re-opens it. The new opening
/// must not start a second probe thread while the first still runs: "one at a time per
/// breaker" and "bounded in concurrency" (docs/probes.md); otherwise every opening of a
/// flapping breaker would add one more hung thread.
#[test]
fn a_hung_blocking_probe_is_not_joined_by_another_after_a_re_open() {
    let clock = ManualClock::new();
    let (entered_tx, entered) = mpsc::channel::<u32>();
    let (release, release_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let release_rx = Mutex::new(release_rx);
    let n = Arc::new(AtomicU32::new(0));
    let count = n.clone();
    let probe = move || {
        let call = count.fetch_add(1, Ordering::SeqCst) + 1;
        entered_tx.lock().unwrap().send(call).unwrap();
        // Hangs until the test lets it go (each send releases one probe).
        let _ = release_rx.lock().unwrap().recv();
        false
    };
    let config = Config::builder()
        .failures(1)
        .open_for(secs(3))
        .probe_every(secs(1))
        .probe(probe)
        .clock(clock.clone())
        .build()
        .unwrap();
    let breaker = Breaker::new("one-at-a-time-probe-hung", config);
    trip(&breaker);
    clock.advance(secs(1));
    assert_eq!(entered.recv().unwrap(), 1);
    // Its opening ends (the open timer), and the breaker opens again (an operator's
    // `trip_for`, or a failed trial call): a new opening.
    clock.advance(secs(2));
    assert_eq!(breaker.state(), State::HalfOpen);
    breaker.trip_for(secs(60));
    // The new opening's ticks: the first probe still runs, so none may start.
    clock.advance(secs(1));
    clock.advance(secs(1));
    let p = breaker.health_probes();
    // Let every probe thread go before asserting, so a failure leaves none hanging.
    for _ in 0..p.running {
        release.send(()).unwrap();
    }
    assert_eq!(
        (p.started, p.running),
        (1, 1),
        "a second probe thread started while the first one hung"
    );
    assert_eq!(n.load(Ordering::SeqCst), 1);
    // Once it returns, the next tick probes again.
    while breaker.health_probes().running != 0 {
        std::thread::yield_now();
    }
    clock.advance(secs(1));
    assert_eq!(entered.recv().unwrap(), 2);
    release.send(()).unwrap();
    while breaker.health_probes().running != 0 {
        std::thread::yield_now();
    }
}

/// Panics when dropped: a user value captured by a probe closure (a client, a guard).
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a probe's captured value panics in Drop");
        }
    }
}

/// A breaker dropped while open leaves its next tick holding the last handle to the user's
/// probe function: it is dropped on the thread that fires the timers (here the caller of
/// `advance`; for the system clock the `breakerbox-timer` thread, which a panic ends, leaving
/// every breaker in the process without open timers or probes). The panic must be caught,
/// and the other timers due fire as usual.
#[test]
fn a_probe_whose_drop_panics_does_not_break_the_timers() {
    let clock = ManualClock::new();
    let guard = PanicsOnDrop;
    let probe = move || {
        let _ = &guard;
        false
    };
    let probed = Config::builder()
        .failures(1)
        .open_for(secs(60))
        .probe_every(secs(1))
        .probe(probe)
        .clock(clock.clone())
        .build()
        .unwrap();
    let breaker = Breaker::new("one-at-a-time-probe-drop-panics", probed);
    trip(&breaker);
    drop(breaker);
    // Another breaker on the same clock, due at the same moment as the tick.
    let other = Breaker::new(
        "one-at-a-time-probe-drop-other",
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    trip(&other);
    let advanced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        clock.advance(secs(1));
    }));
    assert!(
        advanced.is_ok(),
        "the probe's Drop panicked out of the thread that fires the timers"
    );
    assert_eq!(other.state(), State::HalfOpen, "the other timer due fired");
}

/// A probe tick armed on a manual clock's timers is held by those timers, and the tick holds
/// its opening's probing. Dropping the breaker and the clock with the tick still armed must
/// free both and the user's probe function: a probing that held the timers strongly would
/// keep the two alive for ever, with the function's captures.
#[test]
fn dropping_the_clock_with_a_probe_tick_armed_frees_the_probe() {
    let clock = ManualClock::new();
    let captured = Arc::new(());
    let held = captured.clone();
    let probe = move || {
        let _ = &held;
        true
    };
    let breaker = Breaker::new(
        "probe-clock-dropped",
        Config::builder()
            .failures(1)
            .open_for(secs(60))
            .probe_every(secs(1))
            .clock(clock.clone())
            .probe(probe)
            .build()
            .unwrap(),
    );
    trip(&breaker);
    assert_eq!(
        Arc::strong_count(&captured),
        2,
        "the probe function holds it"
    );
    drop(breaker);
    drop(clock);
    assert_eq!(
        Arc::strong_count(&captured),
        1,
        "the probe function was leaked"
    );
}
