//! The tower layer allocates nothing per request: admission, the owned permit, the response
//! future and recording, for admitted and for rejected calls. Counted by `allocation-counter`'s
//! global allocator, per thread, so the other tests' threads do not disturb the count.

use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use breakerbox_runtime::{Breaker, Config, Outcome, registry};
use breakerbox_tower::CircuitBreakerLayer;
use tower::{Layer, Service};

/// An inner service that allocates nothing: answers at once, fails for odd numbers.
#[derive(Clone)]
struct Echo;

impl Service<u32> for Echo {
    type Response = u32;
    type Error = &'static str;
    type Future = Ready<Result<u32, &'static str>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, n: u32) -> Self::Future {
        ready(if n.is_multiple_of(2) {
            Ok(n)
        } else {
            Err("odd")
        })
    }
}

/// Calls `svc` with each of `requests` and drives each future to completion; returns the
/// allocations made.
fn allocations_of<S>(svc: &mut S, requests: impl Iterator<Item = u32>) -> u64
where
    S: Service<u32>,
{
    let mut cx = Context::from_waker(Waker::noop());
    let counted = allocation_counter::measure(|| {
        for n in requests {
            assert!(svc.poll_ready(&mut cx).is_ready());
            let fut = pin!(svc.call(n));
            assert!(fut.poll(&mut cx).is_ready());
        }
    });
    counted.count_total
}

fn check(breaker: Breaker) {
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone())
        .classify(|r: &Result<u32, &'static str>| match r {
            Ok(n) if *n == 4 => Outcome::Ignored,
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Failure,
        })
        .layer(Echo);
    // Warm up: whatever the breaker sets up on a thread's first call is not per request.
    let _ = allocations_of(&mut svc, 0..64);

    // Closed: successes, ignored calls and failures that do not trip.
    let pattern = [0, 2, 4, 1, 6, 1, 8];
    assert_eq!(
        allocations_of(&mut svc, pattern.iter().copied().cycle().take(10_000)),
        0
    );

    // Open: every call is refused, with the rejection in the error.
    breaker.force_open();
    let _ = allocations_of(&mut svc, 0..1);
    assert_eq!(allocations_of(&mut svc, 0..10_000), 0);
    breaker.reset();
    assert!(breaker.metrics().rejected >= 10_000);
}

#[test]
fn no_allocation_per_request() {
    let config = || Config::builder().failures(1_000_000).build().unwrap();
    // A registry breaker (a `'static` handle) and one of its own (reference-counted).
    check(registry().get_or_create("tower-alloc", config));
    check(Breaker::new("tower-alloc-own", config()));
}
