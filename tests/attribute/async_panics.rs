//! Async calls and panics: a call whose own future panics is a failure, also when a catcher
//! around it stops the unwind before the future is dropped; a call cancelled because another
//! future of its task panicked (`join!`, `select!`: the task's future is dropped while that
//! panic unwinds) is `Ignored`. For `#[circuit_breaker]` on an `async fn` and for
//! `Breaker::call_async`. The cancelled calls counted as failures before `Guarded` held their
//! permit (a permit held across an `.await` took any unwind for its own call's panic); the
//! caught panics were failures before too, and now depend on `Guarded`'s own guard.
//!
//! The futures are polled by hand with a no-op waker: no runtime, no time.

use std::fmt;
use std::future::{Future, pending};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use breakerbox::{Breaker, Config, Error, Rejected, State, circuit_breaker, registry};

#[derive(Debug)]
struct ApiError;

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("api error")
    }
}

impl From<Rejected> for ApiError {
    fn from(_: Rejected) -> Self {
        ApiError
    }
}

/// Polls `future` once.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Panics when asked to, else waits for ever: a request in flight.
#[circuit_breaker(name = "async-panics-sibling", failures = 2)]
async fn sibling(panic: bool) -> Result<(), ApiError> {
    if panic {
        panic!("this call's own future panicked");
    }
    pending::<()>().await;
    Ok(())
}

#[circuit_breaker(name = "async-panics-caught", failures = 1)]
async fn caught() -> Result<(), ApiError> {
    panic!("this call's own future panicked")
}

#[test]
fn attribute_a_call_cancelled_by_a_sibling_panic_is_ignored() {
    let in_flight = sibling(false);
    let unwound = catch_unwind(AssertUnwindSafe(move || {
        let mut in_flight = pin!(in_flight);
        assert!(
            poll_once(in_flight.as_mut()).is_pending(),
            "admitted, in flight"
        );
        // The task's other future panics; `in_flight` is dropped while that unwinds.
        let mut panicking = pin!(sibling(true));
        let _ = poll_once(panicking.as_mut());
    }));
    assert!(unwound.is_err());
    let b = registry().get("async-panics-sibling").unwrap();
    let m = b.metrics();
    assert_eq!(
        (m.failures, m.ignored),
        (1, 1),
        "the panicking call failed, the cancelled one is ignored"
    );
    assert_eq!(b.state(), State::Closed, "one failure of the two allowed");
}

#[test]
fn attribute_a_panic_stopped_by_a_catcher_is_still_a_failure() {
    let mut call = Box::pin(caught());
    // A catcher around the future (`FutureExt::catch_unwind`, tower-http's
    // `CatchPanicLayer`): the unwind stops here, and the future is dropped later, normally.
    let unwound = catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut())));
    assert!(unwound.is_err());
    drop(call);
    let b = registry().get("async-panics-caught").unwrap();
    let m = b.metrics();
    assert_eq!((m.failures, m.ignored), (1, 0));
    assert_eq!(b.state(), State::Open, "failures = 1: the panic tripped it");
}

#[test]
fn call_async_a_call_cancelled_by_a_sibling_panic_is_ignored() {
    let b = Breaker::new(
        "async-panics-call-async",
        Config::builder().failures(2).build().unwrap(),
    );
    let in_flight = b.call_async(async { pending::<Result<(), ApiError>>().await });
    let unwound = catch_unwind(AssertUnwindSafe(|| {
        let mut in_flight = pin!(in_flight);
        assert!(poll_once(in_flight.as_mut()).is_pending());
        let mut panicking = pin!(b.call_async(async {
            panic!("this call's own future panicked");
            #[allow(unreachable_code)]
            Ok::<(), ApiError>(())
        }));
        let _ = poll_once(panicking.as_mut());
    }));
    assert!(unwound.is_err());
    let m = b.metrics();
    assert_eq!((m.failures, m.ignored), (1, 1));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn call_async_a_panic_stopped_by_a_catcher_is_still_a_failure() {
    let b = Breaker::new(
        "async-panics-call-async-caught",
        Config::builder().failures(1).build().unwrap(),
    );
    let mut call = Box::pin(b.call_async(async {
        panic!("this call's own future panicked");
        #[allow(unreachable_code)]
        Ok::<(), ApiError>(())
    }));
    let unwound = catch_unwind(AssertUnwindSafe(|| poll_once(call.as_mut())));
    assert!(unwound.is_err());
    drop(call);
    let m = b.metrics();
    assert_eq!((m.failures, m.ignored), (1, 0));
    assert_eq!(b.state(), State::Open);
    // And it still closes and trips: the breaker is not corrupted.
    let r: Result<(), Error<ApiError>> = b.call(|| Ok(()));
    assert!(matches!(r, Err(Error::Rejected(_))));
}
