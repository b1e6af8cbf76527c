//! The clocks' unit tests.

use core::time::Duration;
use std::sync::Arc;

use super::{Clock, ClockRef, ManualClock};
use crate::{Breaker, Config, State};

/// One clock method takes a clock by value or shared: a breaker on an `Arc<ManualClock>`
/// follows the test's handle to it, and configs given one `Arc<dyn Clock>` share it (and
/// so compare equal), as configs given one clock do.
#[test]
fn a_shared_clock_is_a_clock() {
    let manual = Arc::new(ManualClock::new());
    let config = Config::builder().failures(1).clock(manual.clone()).build();
    let breaker = Breaker::new("arc-clock", config.unwrap());
    breaker.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
    manual.advance(Duration::from_secs(60));
    breaker.call(|| Ok::<(), &str>(())).unwrap();
    assert_eq!(
        breaker.state(),
        State::Closed,
        "probed after the shared clock moved"
    );

    let shared: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let a = Config::builder().clock(shared.clone()).build().unwrap();
    let b = Config::builder().clock(shared.clone()).build().unwrap();
    assert_eq!(a, b, "one shared clock");
    let ClockRef::Custom(inner) = &a.clock else {
        panic!("a custom clock")
    };
    assert!(
        Arc::ptr_eq(inner, &shared),
        "kept as it is, not boxed again"
    );
    let c = Config::builder()
        .clock(Arc::clone(&manual))
        .build()
        .unwrap();
    assert_ne!(a, c, "another clock");
}

/// The timer a breaker on the system clock times its calls by measures what
/// `std::time::Instant` measures over the same stretch of work, within 5%. Its readings
/// bracket the `Instant` ones, so it never reads less (beyond its calibration's error); the
/// best of five rounds must agree, so that a preemption between two readings cannot fail it.
#[test]
#[cfg_attr(
    miri,
    ignore = "measures real time, which Miri's interpreter stretches"
)]
fn the_calls_timer_measures_what_the_monotonic_clock_does() {
    use super::SystemClock;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = SystemClock.timer_nanos();
        let i0 = std::time::Instant::now();
        let mut x = 1u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
        }
        let i1 = std::time::Instant::now();
        let t1 = SystemClock.timer_nanos();
        let ratio = t1.saturating_sub(t0) as f64 / (i1 - i0).as_nanos() as f64;
        assert!(ratio >= 0.95, "timer/Instant {ratio}");
        best = best.min(ratio);
    }
    assert!(best <= 1.05, "timer/Instant at best {best}");
}

/// A breaker on the system clock times a call by that timer: a call that runs 3 ms against a
/// 1 ms threshold is slow, and its latency reads at least 3 ms.
#[test]
#[cfg_attr(
    miri,
    ignore = "measures real time, which Miri's interpreter stretches"
)]
fn a_call_on_the_system_clock_is_timed_against_its_threshold() {
    let breaker = Breaker::new(
        "timed-on-the-system-clock",
        Config::builder()
            .slow(Duration::from_millis(1))
            .build()
            .unwrap(),
    );
    breaker
        .call(|| {
            // Runs for 3 ms of the OS's clock: a call of known length, not a wait for an event.
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_millis(3) {
                std::hint::spin_loop();
            }
            Ok::<(), &str>(())
        })
        .unwrap();
    breaker.call(|| Ok::<(), &str>(())).unwrap();
    let metrics = breaker.metrics();
    assert_eq!((metrics.successes, metrics.slow), (2, 1));
    let latency = breaker.latency().expect("a timed breaker");
    assert_eq!(latency.calls, 2);
    assert!(latency.sum >= Duration::from_millis(3), "{:?}", latency.sum);
    assert!(latency.sum < Duration::from_secs(3), "{:?}", latency.sum);
}
