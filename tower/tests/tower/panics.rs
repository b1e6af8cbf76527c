//! The tower layer when a task's other work panics: a request cancelled by that unwind is
//! `Ignored`, not a failure. Nothing sleeps: time comes from a `ManualClock`, and every interleaving is forced
//! by hand.

use std::convert::Infallible;
use std::future::{Future, pending};
use std::task::Poll;
use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, ManualClock, State};
use breakerbox_tower::{CircuitBreaker, CircuitBreakerLayer};
use tower::{Layer, Service, ServiceExt};

/// A service whose future panics when asked to (`true`) and otherwise never finishes: an
/// in-flight request.
fn panics_or_hangs()
-> impl Service<bool, Response = (), Error = Infallible, Future: Send> + Clone + Send + 'static {
    tower::service_fn(|panic: bool| async move {
        if panic {
            panic!("the inner future panicked");
        }
        pending::<Result<(), Infallible>>().await
    })
}

/// Scenario: a handler (a tokio task) sends two requests through the layer at once
/// (`tokio::join!`); one's inner future panics. The panic unwinds out of the task, and tokio
/// drops the task's future while still unwinding, so the *other* request, still in flight, is
/// cancelled. The module docs promise: "A response future dropped before it finishes records
/// the call as `Outcome::Ignored`", and a panic "in the inner service's future" is a failure:
/// one failure (the panicking call) and one ignored call (the cancelled sibling).
///
/// The cancelled sibling's `OwnedPermit` is dropped while the thread is panicking; were it to
/// record `Failure` there (the `Permit` rule for synchronous code), one panic would count once
/// per request in flight in the task and, with `failures(2)`, trip the breaker on its own.
#[tokio::test]
async fn a_request_cancelled_by_a_sibling_panic_is_ignored_not_a_failure() {
    let breaker = Breaker::new(
        "tower-sibling-panic",
        Config::builder().failures(2).build().unwrap(),
    );
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone()).layer(panics_or_hangs());
    let task = tokio::spawn(async move {
        // Both admitted in `call`: each holds a permit from here.
        let in_flight = svc.ready().await.unwrap().call(false);
        let panicking = svc.ready().await.unwrap().call(true);
        tokio::join!(in_flight, panicking)
    });
    assert!(task.await.unwrap_err().is_panic());

    let m = breaker.metrics();
    assert_eq!(
        (m.failures, m.ignored),
        (1, 1),
        "one panicking call (failure) and one cancelled call (ignored)"
    );
    assert_eq!(breaker.state(), State::Closed, "one failure of two");
}

/// Scenario: the breaker is half-open and a request takes the probe slot; while the probe is
/// in flight, the handler that made it panics for a reason of its own (a bug after the call
/// was started, an `unwrap` on another branch). Tokio drops the task's future while
/// unwinding, which cancels the probe. A cancelled probe is `Ignored` and frees its slot (as
/// `a_cancelled_probe_frees_its_slot` in `layer.rs` checks for a plain drop), so the breaker
/// should stay half-open and let the next request probe.
///
/// Recorded as a `Failure`, the probe would re-open the breaker for another `open_for`,
/// although the service never answered, because of a bug in the caller.
#[tokio::test]
async fn a_probe_cancelled_by_an_unrelated_panic_frees_its_slot() {
    let clock = ManualClock::new();
    let breaker = Breaker::new(
        "tower-probe-unrelated-panic",
        Config::builder()
            .failures(1)
            .open_for(Duration::from_secs(5))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    breaker.trip_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    let mut svc = CircuitBreaker::new(panics_or_hangs(), breaker.clone());
    let task = tokio::spawn(async move {
        let mut probe = Box::pin(svc.ready().await.unwrap().call(false));
        // The probe is in flight: its inner future has started and is waiting.
        let started = std::future::poll_fn(|cx| Poll::Ready(probe.as_mut().poll(cx).is_pending()));
        assert!(started.await);
        panic!("a bug in the handler, unrelated to the service");
    });
    assert!(task.await.unwrap_err().is_panic());

    let m = breaker.metrics();
    assert_eq!(
        (m.failures, m.ignored),
        (0, 1),
        "the probe was cancelled, not failed"
    );
    assert_eq!(
        breaker.state(),
        State::HalfOpen,
        "the probe slot is free again"
    );
}
