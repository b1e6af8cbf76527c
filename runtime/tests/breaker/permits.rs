//! Permits: dropped, panicking, outliving their state, and the counts they add up to.

use crate::support::{breaker, fail, ms, rate_config, rejected, secs, succeed, to_half_open};
use breakerbox_runtime::{Config, State, Window};
use std::panic::{AssertUnwindSafe, catch_unwind};

#[test]
fn a_permit_dropped_while_panicking_is_a_failure() {
    let (b, _) = breaker(Config::builder().failures(2));
    for _ in 0..2 {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _permit = b.try_acquire().unwrap();
            panic!("boom");
        }));
        assert!(r.is_err());
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().failures, 2);
}

#[test]
fn a_panic_in_call_is_a_failure_and_resumes() {
    let (b, _) = breaker(Config::builder().failures(1));
    let r = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), &str> { panic!("boom") })
    }));
    assert_eq!(*r.unwrap_err().downcast::<&str>().unwrap(), "boom");
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_permit_dropped_otherwise_is_ignored() {
    let (b, _) = breaker(Config::builder().failures(1));
    drop(b.try_acquire().unwrap());
    let m = b.metrics();
    assert_eq!((m.calls, m.ignored, m.failures), (1, 1, 0));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_dropped_call_async_future_is_ignored() {
    let (b, _) = breaker(Config::builder().failures(1));
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = Box::pin(b.call_async(async {
        std::future::pending::<()>().await;
        Err::<(), _>("never")
    }));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    drop(fut);
    let m = b.metrics();
    assert_eq!((m.calls, m.ignored, m.failures), (1, 1, 0));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_call_async_future_asks_for_its_permit_when_first_polled_not_when_made() {
    let (b, _) = breaker(Config::builder().failures(1));
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = Box::pin(b.call_async(async { Ok::<u32, &str>(7) }));
    assert_eq!(b.metrics().calls, 0, "made, not polled: no call yet");
    b.force_open();
    // Opened between making and polling: the call is rejected, its future never polled.
    let std::task::Poll::Ready(Err(breakerbox_runtime::Error::Rejected(r))) =
        fut.as_mut().poll(&mut cx)
    else {
        panic!("a rejection");
    };
    assert_eq!(r.reason(), breakerbox_runtime::RejectReason::ForcedOpen);
    let m = b.metrics();
    assert_eq!(
        (m.rejected, m.successes, m.failures, m.ignored),
        (1, 0, 0, 0)
    );
}

#[test]
fn a_call_async_future_polled_again_after_its_rejection_panics_without_running_the_call() {
    let (b, _) = breaker(Config::builder().failures(1));
    b.force_open();
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let ran = std::cell::Cell::new(false);
    let mut fut = Box::pin(b.call_async(async {
        ran.set(true);
        Ok::<u32, &str>(7)
    }));
    assert!(matches!(
        fut.as_mut().poll(&mut cx),
        std::task::Poll::Ready(Err(_))
    ));
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = fut.as_mut().poll(&mut cx);
    }));
    let message = *again.unwrap_err().downcast::<&str>().unwrap();
    assert_eq!(
        message,
        "`Breaker::call_async`'s future polled after it completed"
    );
    assert!(!ran.get(), "the call ran without a permit");
    drop(fut);
    let m = b.metrics();
    assert_eq!(
        (m.rejected, m.successes, m.failures, m.ignored),
        (1, 0, 0, 0)
    );
}

#[test]
fn a_call_async_future_polled_again_after_it_finished_panics_and_counts_the_call_once() {
    let (b, _) = breaker(Config::builder().failures(1));
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = Box::pin(b.call_async(async { Err::<u32, &str>("down") }));
    assert!(matches!(
        fut.as_mut().poll(&mut cx),
        std::task::Poll::Ready(Err(breakerbox_runtime::Error::Inner("down")))
    ));
    assert_eq!(b.state(), State::Open);
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = fut.as_mut().poll(&mut cx);
    }));
    assert!(again.is_err());
    drop(fut);
    let m = b.metrics();
    assert_eq!((m.calls, m.failures, m.ignored), (1, 1, 0));
}

/// A closed-state permit held across a reset: its failure would trip a `failures(1)` breaker,
/// but it is only counted.
#[test]
fn a_closed_permit_failing_after_a_reset_is_counted_but_trips_nothing() {
    let (b, _) = breaker(Config::builder().failures(1));
    let held = b.try_acquire().unwrap();
    b.reset();
    assert_eq!(b.state(), State::Closed);
    held.failure();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failures, 1);
    assert_eq!(b.metrics().consecutive_failures, 0);
}

/// A closed-state permit outliving a trip: its failure does not reopen or count an opening.
#[test]
fn a_closed_permit_failing_after_a_trip_does_not_reopen() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)));
    let held = b.try_acquire().unwrap();
    to_half_open(&b, &clock);
    held.failure();
    // The clock's timer moved it to half-open when its open time ended.
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "still the first opening's round"
    );
    assert_eq!(b.metrics().times_opened, 1);
    assert_eq!(b.metrics().retry_after, None);
}

/// A probe outliving its round: the round's other probe closed the breaker, and the late
/// failure is counted without reopening it.
#[test]
fn a_probe_failing_after_its_round_closed_does_not_reopen() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .half_open_calls(2),
    );
    to_half_open(&b, &clock);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    p1.success();
    assert_eq!(b.state(), State::Closed);
    p2.failure();
    assert_eq!(b.state(), State::Closed);
    let m = b.metrics();
    assert_eq!((m.successes, m.failures), (1, 2));
}

/// A rate-window permit held across a reset stays out of the new window.
#[test]
fn a_window_permit_failing_after_a_reset_stays_out_of_the_new_window() {
    let (b, _) = breaker(rate_config(Window::Calls(10), 1, 50));
    let held = b.try_acquire().unwrap();
    b.reset();
    held.failure();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().window_calls, 0);
}

#[test]
fn metrics_add_up() {
    let (b, clock) = breaker(Config::builder().failures(2).open_for(secs(1)));
    succeed(&b);
    fail(&b);
    b.try_acquire().unwrap().ignore();
    fail(&b);
    rejected(&b);
    rejected(&b);
    clock.advance(ms(300));
    let m = b.metrics();
    assert_eq!(m.name, "b");
    assert_eq!(m.state, State::Open);
    assert_eq!(m.time_in_state, ms(300));
    assert_eq!(
        (m.calls, m.successes, m.failures, m.ignored, m.rejected),
        (6, 1, 2, 1, 2)
    );
    assert_eq!(m.calls, m.successes + m.failures + m.ignored + m.rejected);
    assert_eq!(m.times_opened, 1);
    assert_eq!(m.retry_after, Some(ms(700)));
    assert_eq!(
        (m.window_calls, m.failure_rate, m.slow_rate),
        (0, None, None)
    );
}
