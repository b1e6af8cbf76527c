//! User code that panics through the tower layer: panics in the inner future, the probe, the classifier, an
//! error's `Display`, and a clock that panics while the inner future unwinds.

use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use breakerbox::tower::CircuitBreakerLayer;
use breakerbox::{Breaker, Config, Error, ManualClock, Outcome, State};
use tower::{Layer, Service};

const S: Duration = Duration::from_secs(1);

// A panic in the inner future behind a panic catcher.
/// Polls `fut` once inside `catch_unwind`, as a panic catcher around the layer does, and
/// keeps the future alive afterwards (dropped by the caller, not while unwinding).
fn poll_catching<F: Future>(fut: &mut Pin<Box<F>>) -> Result<Poll<F::Output>, ()> {
    let mut cx = Context::from_waker(Waker::noop());
    catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))).map_err(|_| ())
}

fn panicking_service()
-> impl Service<u32, Response = u32, Error = &'static str, Future: Send> + Clone {
    tower::service_fn(|id: u32| async move {
        if id == 0 {
            panic!("inner future panics");
        }
        Ok::<u32, &'static str>(id)
    })
}

fn ready<S: Service<u32>>(svc: &mut S) {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(svc.poll_ready(&mut cx), Poll::Ready(Ok(()))));
}

#[test]
fn panic_in_inner_future_behind_a_catcher_counts_as_failure() {
    let clock = ManualClock::new();
    let breaker = Breaker::new(
        "tower-user-code",
        Config::builder()
            .failures(2)
            .open_for(S)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone()).layer(panicking_service());
    for i in 0..2 {
        ready(&mut svc);
        let mut fut = Box::pin(svc.call(0));
        assert!(
            poll_catching(&mut fut).is_err(),
            "the panic reaches the catcher"
        );
        drop(fut); // dropped after the unwind was caught
        assert_eq!(breaker.metrics().failures, i + 1);
        assert_eq!(breaker.metrics().ignored, 0);
    }
    assert_eq!(breaker.state(), State::Open);
}

#[test]
fn panicking_probe_behind_a_catcher_reopens() {
    let clock = ManualClock::new();
    let breaker = Breaker::new(
        "tower-user-code-probe",
        Config::builder()
            .failures(1)
            .open_for(S)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    breaker.trip_for(S);
    clock.advance(S);
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone()).layer(panicking_service());
    ready(&mut svc);
    let mut fut = Box::pin(svc.call(0));
    assert!(poll_catching(&mut fut).is_err());
    drop(fut);
    assert_eq!(breaker.state(), State::Open, "a panicking probe re-opens");
    // And the next probe after open_for works.
    clock.advance(S * 2);
    ready(&mut svc);
    let mut fut = Box::pin(svc.call(5));
    assert!(matches!(poll_catching(&mut fut), Ok(Poll::Ready(Ok(5)))));
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn panicking_classifier_counts_and_does_not_corrupt() {
    let clock = ManualClock::new();
    let breaker = Breaker::new(
        "tower-user-code-classify",
        Config::builder()
            .failures(1)
            .open_for(S)
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    breaker.trip_for(S);
    clock.advance(S);
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone())
        .classify(|_: &Result<u32, &'static str>| -> Outcome { panic!("classifier panics") })
        .layer(panicking_service());
    ready(&mut svc);
    let mut fut = Box::pin(svc.call(3));
    assert!(
        poll_catching(&mut fut).is_err(),
        "the classifier's panic is the caller's"
    );
    drop(fut);
    // The probe counted as a failure: open again, not half-open with a lost slot.
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.metrics().failures, 1);
}

/// An error whose Display panics.
#[derive(Debug)]
struct PanickyError;
impl fmt::Display for PanickyError {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        panic!("Display panics")
    }
}

#[test]
fn tower_error_display_panicking_on_the_trip_does_not_reach_the_caller() {
    let breaker = Breaker::new(
        "adv-tower-display",
        Config::builder().failures(1).build().unwrap(),
    );
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone()).layer(tower::service_fn(
        |_: u32| async { Err::<u32, PanickyError>(PanickyError) },
    ));
    ready(&mut svc);
    let mut fut = Box::pin(svc.call(1));
    let out = poll_catching(&mut fut).expect("no panic reaches the caller");
    assert!(matches!(out, Poll::Ready(Err(Error::Inner(PanickyError)))));
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.metrics().times_opened, 1);
}

// A clock that panics while the inner future's panic unwinds through the layer. An abort
// would kill this binary, so the case runs in a child process of it.
struct UnwindPanicClock(ManualClock);
impl breakerbox::Clock for UnwindPanicClock {
    fn now(&self) -> Duration {
        if std::thread::panicking() {
            panic!("clock read while unwinding panics");
        }
        self.0.now()
    }
}

fn tower_unwind_clock_case() {
    let clock = ManualClock::new();
    let breaker = Breaker::new(
        "adv-tower-unwind-clock",
        Config::builder()
            .failures(1)
            .failures_within(S)
            .slow(S)
            .clock(UnwindPanicClock(clock.clone()))
            .build()
            .unwrap(),
    );
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone()).layer(panicking_service());
    ready(&mut svc);
    let mut fut = Box::pin(svc.call(0));
    assert!(
        poll_catching(&mut fut).is_err(),
        "the inner panic reaches the catcher"
    );
    drop(fut);
    breaker.reset();
    ready(&mut svc);
    let mut fut = Box::pin(svc.call(4));
    assert!(matches!(poll_catching(&mut fut), Ok(Poll::Ready(Ok(4)))));
}

#[test]
fn tower_clock_panicking_while_the_inner_future_unwinds_does_not_abort() {
    if std::env::var_os("ADV_TOWER_UNWIND_CLOCK").is_some() {
        tower_unwind_clock_case();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tower_clock_panicking_while_the_inner_future_unwinds_does_not_abort",
            "--test-threads=1",
        ])
        .env("ADV_TOWER_UNWIND_CLOCK", "1")
        .output()
        .unwrap();
    // The child runs exactly this test, so a renamed test cannot pass by running nothing.
    let ran = String::from_utf8_lossy(&out.stdout).contains("test result: ok. 1 passed");
    assert!(
        out.status.success() && ran,
        "{:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
