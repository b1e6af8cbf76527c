//! The tower layer: admission, classification, sharing, readiness, cancellation.
//! Time comes from a `ManualClock`; nothing sleeps.

use std::convert::Infallible;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Waker};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Config, Error, ManualClock, Outcome, RejectReason, State, registry,
};
use breakerbox_tower::{CircuitBreaker, CircuitBreakerLayer};
use tower::{Layer, Service, ServiceExt};
use tower_test::{assert_request_eq, mock};

/// Sets its flag when dropped: held by a listener, it says when the breaker is freed.
struct Flag(Arc<AtomicBool>);

impl Drop for Flag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn config(clock: &ManualClock) -> Config {
    Config::builder()
        .failures(2)
        .open_for(Duration::from_secs(5))
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// A service that fails for id 0 and counts the calls that reached it.
fn counting(
    calls: Arc<AtomicUsize>,
) -> impl Service<u32, Response = u32, Error = &'static str> + Clone {
    tower::service_fn(move |id: u32| {
        calls.fetch_add(1, Ordering::Relaxed);
        async move { if id == 0 { Err("down") } else { Ok(id) } }
    })
}

#[tokio::test]
async fn trips_rejects_without_calling_inner_then_recovers() {
    let clock = ManualClock::new();
    let breaker = Breaker::new("tower-trip", config(&clock));
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = CircuitBreakerLayer::from_breaker(breaker.clone()).layer(counting(calls.clone()));

    assert_eq!(svc.clone().oneshot(7).await.unwrap(), 7);
    for _ in 0..2 {
        let err = svc.clone().oneshot(0).await.unwrap_err();
        assert!(matches!(err, Error::Inner("down")));
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(calls.load(Ordering::Relaxed), 3);

    let err = svc.clone().oneshot(7).await.unwrap_err();
    let rejected = err.rejected().expect("rejected");
    assert_eq!(rejected.reason(), RejectReason::Open);
    assert_eq!(rejected.last_failure().as_deref(), Some("down"));
    assert_eq!(
        calls.load(Ordering::Relaxed),
        3,
        "a rejected call must not reach the service"
    );

    clock.advance(Duration::from_secs(5));
    assert_eq!(svc.clone().oneshot(7).await.unwrap(), 7);
    assert_eq!(breaker.state(), State::Closed);
    let m = breaker.metrics();
    assert_eq!((m.successes, m.failures, m.rejected), (2, 2, 1));
}

#[tokio::test]
async fn clones_and_layers_share_one_registry_breaker() {
    let clock = ManualClock::new();
    registry().set_clock("tower-shared", clock.clone());
    let layer = CircuitBreakerLayer::new("tower-shared", config(&clock));
    let calls = Arc::new(AtomicUsize::new(0));
    let a = layer.layer(counting(calls.clone()));
    let b = layer.clone().layer(counting(calls.clone()));
    assert!(a.breaker().ptr_eq(&registry().get("tower-shared").unwrap()));

    let _ = a.clone().oneshot(0).await;
    let _ = b.clone().oneshot(0).await;
    // One failure through each service: two in a row on the one breaker.
    assert_eq!(layer.breaker().state(), State::Open);
    assert!(a.oneshot(1).await.unwrap_err().rejected().is_some());
}

#[tokio::test]
async fn classifier_decides_the_outcome() {
    let breaker = Breaker::new(
        "tower-classify",
        Config::builder().failures(1).build().unwrap(),
    );
    // "HTTP statuses": 5xx is a failure although the call returned Ok, 404 says nothing.
    let svc = CircuitBreakerLayer::from_breaker(breaker.clone())
        .classify(|r: &Result<u16, Infallible>| match r {
            Ok(500..) => Outcome::Failure,
            Ok(404) => Outcome::Ignored,
            _ => Outcome::Success,
        })
        .layer(tower::service_fn(|status: u16| async move {
            Ok::<_, Infallible>(status)
        }));

    assert_eq!(svc.clone().oneshot(404).await.unwrap(), 404);
    assert_eq!(svc.clone().oneshot(200).await.unwrap(), 200);
    assert_eq!(breaker.metrics().ignored, 1);
    assert_eq!(svc.clone().oneshot(503).await.unwrap(), 503);
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test]
async fn trip_for_from_the_classifier_opens_for_that_long() {
    let clock = ManualClock::new();
    let breaker = Breaker::new("tower-trip-for", config(&clock));
    let svc = CircuitBreakerLayer::from_breaker(breaker.clone())
        .classify(|r: &Result<u16, Infallible>| match r {
            Ok(503) => Outcome::TripFor(Duration::from_secs(30)),
            _ => Outcome::Success,
        })
        .layer(tower::service_fn(|status: u16| async move {
            Ok::<_, Infallible>(status)
        }));
    let _ = svc.clone().oneshot(503).await;
    let rejected = svc.clone().oneshot(200).await.unwrap_err();
    assert_eq!(
        rejected.rejected().unwrap().retry_after(),
        Some(Duration::from_secs(30))
    );
}

#[tokio::test]
async fn readiness_is_the_inner_services() {
    let breaker = Breaker::new(
        "tower-ready",
        Config::builder().failures(1).build().unwrap(),
    );
    let (mut svc, mut handle) =
        mock::spawn_layer::<u32, u32, _>(CircuitBreakerLayer::from_breaker(breaker.clone()));

    handle.allow(0);
    assert!(
        svc.poll_ready().is_pending(),
        "the inner service is not ready"
    );
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let call = svc.call(1);
    assert_request_eq!(handle, 1).send_error("boom");
    assert!(matches!(call.await, Err(Error::Inner(_))));

    // Open: still ready (the call is refused in `call`, not by looking busy forever)…
    assert_eq!(breaker.state(), State::Open);
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    // …and the refused call never reaches the inner service.
    assert!(svc.call(2).await.unwrap_err().rejected().is_some());
    handle.allow(1);
    assert!(svc.poll_ready().is_ready());
    let call = svc.call(3);
    assert!(call.await.is_err());
    assert!(handle.poll_request().is_pending());
}

#[tokio::test]
async fn a_dropped_response_future_counts_as_ignored() {
    let breaker = Breaker::new("tower-cancel", Config::default());
    let mut svc: CircuitBreaker<_> = CircuitBreaker::new(
        tower::service_fn(|()| std::future::pending::<Result<(), Infallible>>()),
        breaker.clone(),
    );
    let fut = svc.ready().await.unwrap().call(());
    drop(fut);
    let m = breaker.metrics();
    assert_eq!((m.ignored, m.successes, m.failures), (1, 0, 0));
}

/// tower's timeout inside the breaker's layer (`.layer(breaker).timeout(d)`) makes a hung call
/// the inner service's error, a failure: two of them trip `failures = 2`. The same timeout
/// outside the layer cancels each hung call, which counts as neither: the breaker stays closed.
#[tokio::test(start_paused = true)]
async fn a_timeout_inside_the_layer_counts_a_hung_call_as_a_failure() {
    let hung = || tower::service_fn(|()| std::future::pending::<Result<(), Infallible>>());
    let timeout = Duration::from_millis(100);
    let clock = ManualClock::new();

    let inside = Breaker::new("tower-timeout-inside", config(&clock));
    let svc = tower::ServiceBuilder::new()
        .layer(CircuitBreakerLayer::from_breaker(inside.clone()))
        .timeout(timeout)
        .service(hung());
    for _ in 0..2 {
        let err = svc.clone().oneshot(()).await.unwrap_err();
        assert!(matches!(&err, Error::Inner(e) if e.is::<tower::timeout::error::Elapsed>()));
    }
    assert_eq!(inside.state(), State::Open);

    let outside = Breaker::new("tower-timeout-outside", config(&clock));
    let svc = tower::ServiceBuilder::new()
        .timeout(timeout)
        .layer(CircuitBreakerLayer::from_breaker(outside.clone()))
        .service(hung());
    for _ in 0..2 {
        let err = svc.clone().oneshot(()).await.unwrap_err();
        assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
    }
    let m = outside.metrics();
    assert_eq!((m.state, m.ignored, m.failures), (State::Closed, 2, 0));
}

/// A rejected response future holds what its rejection reports, not the breaker: the breaker
/// is freed with its last handle, and the future still names it.
#[tokio::test]
async fn a_rejected_response_future_holds_its_report_not_its_breaker() {
    let breaker = Breaker::new("tower-rejected-dropped", Config::default());
    // A listener is dropped with its breaker: the flag says when the breaker is freed.
    let freed = Arc::new(AtomicBool::new(false));
    let flag = Flag(freed.clone());
    breaker.on_state_change(move |_| {
        let _ = &flag;
    });
    breaker.force_open();
    let mut svc: CircuitBreaker<_> = CircuitBreaker::new(
        tower::service_fn(|()| async { Ok::<(), Infallible>(()) }),
        breaker.clone(),
    );
    let fut = svc.ready().await.unwrap().call(());
    drop(svc);
    drop(breaker);
    assert!(
        freed.load(Ordering::SeqCst),
        "freed with its last handle, the rejection pending"
    );
    let error = fut.await.unwrap_err();
    let rejected = error.rejected().expect("a rejection");
    assert_eq!(rejected.name(), "tower-rejected-dropped");
    assert_eq!(rejected.reason(), RejectReason::ForcedOpen);
}

/// A request in flight when the service and every handle to its `Breaker::new` breaker are
/// dropped: its response future keeps the breaker alive (it holds the breaker's state, not a
/// handle), records its failure into it (the listener sees the opening), and frees it when it
/// finishes.
#[tokio::test]
async fn a_running_response_future_keeps_then_frees_its_breaker() {
    let breaker = Breaker::new(
        "tower-running-dropped",
        Config::builder().failures(1).build().unwrap(),
    );
    let (freed, opened) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (flag, seen) = (Flag(freed.clone()), opened.clone());
    breaker.on_state_change(move |e| {
        let _ = &flag;
        seen.store(e.to == State::Open, Ordering::SeqCst);
    });
    let go = Arc::new(AtomicBool::new(false));
    let gate = go.clone();
    let mut svc: CircuitBreaker<_> = CircuitBreaker::new(
        tower::service_fn(move |()| {
            let gate = gate.clone();
            std::future::poll_fn(move |_| {
                if gate.load(Ordering::SeqCst) {
                    std::task::Poll::Ready(Err::<(), _>("upstream down"))
                } else {
                    std::task::Poll::Pending
                }
            })
        }),
        breaker.clone(),
    );
    let mut fut = Box::pin(svc.ready().await.unwrap().call(()));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    drop(svc);
    drop(breaker);
    assert!(
        !freed.load(Ordering::SeqCst),
        "freed under a running request"
    );
    // Finished on another thread, as a work-stealing runtime may.
    go.store(true, Ordering::SeqCst);
    let result = std::thread::spawn(move || {
        let mut cx = Context::from_waker(Waker::noop());
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(r) => r,
            std::task::Poll::Pending => panic!("the request finished"),
        }
    })
    .join()
    .unwrap();
    assert!(matches!(result, Err(Error::Inner("upstream down"))));
    assert!(
        opened.load(Ordering::SeqCst),
        "the failure opened the live breaker"
    );
    assert!(
        freed.load(Ordering::SeqCst),
        "freed when the request finished"
    );
}

#[tokio::test]
async fn a_cancelled_probe_frees_its_slot() {
    let clock = ManualClock::new();
    let breaker = Breaker::new("tower-cancel-probe", config(&clock));
    breaker.trip_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    let mut svc = CircuitBreaker::new(
        tower::service_fn(|ok: bool| async move {
            if ok {
                Ok(())
            } else {
                std::future::pending::<Result<(), Infallible>>().await
            }
        }),
        breaker.clone(),
    );
    drop(svc.ready().await.unwrap().call(false)); // the probe, cancelled
    assert_eq!(breaker.state(), State::HalfOpen);
    svc.ready().await.unwrap().call(true).await.unwrap(); // a new probe gets the slot
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn errors_box_for_boxed_stacks() {
    let breaker = Breaker::new("tower-box", Config::default());
    breaker.force_open();
    let svc = CircuitBreakerLayer::from_breaker(breaker)
        .layer(tower::service_fn(|()| async {
            Ok::<_, std::io::Error>(())
        }))
        .map_err(Error::into_box_error);
    let err: tower::BoxError = svc.oneshot(()).await.unwrap_err();
    let rejected = err
        .downcast_ref::<breakerbox_runtime::Rejected>()
        .expect("a Rejected in the box");
    assert_eq!(rejected.reason(), RejectReason::ForcedOpen);
    assert_eq!(
        err.to_string(),
        "circuit breaker 'tower-box' is forced open"
    );
}

#[tokio::test]
async fn inside_an_axum_router_a_rejection_is_a_503_without_running_the_handler() {
    use axum::body::Body;
    use axum::error_handling::HandleErrorLayer;
    use axum::http::{Request, StatusCode};
    use axum::response::Response;

    let breaker = Breaker::new("tower-axum", Config::builder().failures(1).build().unwrap());
    let layer = tower::ServiceBuilder::new()
        .layer(HandleErrorLayer::new(|e: Error<Infallible>| async move {
            (StatusCode::SERVICE_UNAVAILABLE, e.to_string())
        }))
        .layer(CircuitBreakerLayer::from_breaker(breaker.clone()).classify(
            |r: &Result<Response, Infallible>| match r {
                Ok(resp) if resp.status().is_server_error() => Outcome::Failure,
                _ => Outcome::Success,
            },
        ));
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(move || {
                counted.fetch_add(1, Ordering::Relaxed);
                async { StatusCode::INTERNAL_SERVER_ERROR }
            }),
        )
        .route_layer(layer);
    let request = || Request::builder().uri("/").body(Body::empty()).unwrap();

    let first = app.clone().oneshot(request()).await.unwrap();
    assert_eq!(first.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(breaker.state(), State::Open);

    let second = app.oneshot(request()).await.unwrap();
    assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = axum::body::to_bytes(second.into_body(), 1024)
        .await
        .unwrap();
    assert!(body.starts_with(b"circuit breaker 'tower-axum' is open; retry in"));
    assert_eq!(calls.load(Ordering::Relaxed), 1, "the handler ran once");
}

/// A service whose future panics when asked to (`true`) and succeeds otherwise.
fn panicking() -> impl Service<bool, Response = (), Error = Infallible> + Clone {
    tower::service_fn(|panic: bool| async move {
        if panic {
            panic!("the inner future panicked");
        }
        Ok::<_, Infallible>(())
    })
}

/// Calls `svc` and polls the response future inside `catch_unwind`, as a panic catcher above
/// the layer does (tower-http's `CatchPanicLayer`, `FutureExt::catch_unwind`), then drops the
/// future. Whether the poll panicked.
fn call_catching_panics<S: Service<bool>>(svc: &mut S, request: bool) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(svc.poll_ready(&mut cx).is_ready());
    let mut future = Box::pin(svc.call(request));
    let polled = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
    drop(future); // after the unwind was caught: not while panicking
    match polled {
        Ok(poll) => {
            assert!(poll.is_ready());
            false
        }
        Err(_) => true,
    }
}

#[test]
fn a_panic_in_the_inner_future_is_a_failure_when_a_catcher_stops_it() {
    let breaker = Breaker::new(
        "tower-caught-panic",
        Config::builder().failures(2).build().unwrap(),
    );
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone()).layer(panicking());
    assert!(call_catching_panics(&mut svc, true));
    let m = breaker.metrics();
    assert_eq!((m.failures, m.ignored, m.successes), (1, 0, 0));
    assert!(call_catching_panics(&mut svc, true));
    assert_eq!(
        breaker.state(),
        State::Open,
        "two failures in a row trip it"
    );
    // The permit is recorded once: the panic, not the drop of the future after it.
    assert_eq!(breaker.metrics().failures, 2);
}

#[test]
fn a_panicking_probe_reopens_the_breaker_when_a_catcher_stops_it() {
    let clock = ManualClock::new();
    let breaker = Breaker::new("tower-caught-panic-probe", config(&clock));
    breaker.trip_for(Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    let mut svc = CircuitBreaker::new(panicking(), breaker.clone());
    assert!(call_catching_panics(&mut svc, true)); // the probe
    assert_eq!(breaker.state(), State::Open, "a failed probe re-opens");
    assert_eq!(breaker.metrics().ignored, 0);
    // A non-panicking call through the same service is recorded as before.
    clock.advance(Duration::from_secs(5));
    assert!(!call_catching_panics(&mut svc, false));
    assert_eq!(breaker.state(), State::Closed);
}

#[test]
fn a_panicking_classifier_is_a_failure_when_a_catcher_stops_it() {
    let breaker = Breaker::new(
        "tower-caught-classifier",
        Config::builder().failures(5).build().unwrap(),
    );
    let mut svc = CircuitBreakerLayer::from_breaker(breaker.clone())
        .classify(|_: &Result<(), Infallible>| -> Outcome { panic!("the classifier panicked") })
        .layer(panicking());
    assert!(call_catching_panics(&mut svc, false));
    let m = breaker.metrics();
    assert_eq!((m.failures, m.ignored, m.successes), (1, 0, 0));
}

#[tokio::test]
async fn keyed_layer_trips_each_key_on_its_own() {
    use breakerbox_tower::KeyedCircuitBreakerLayer;
    let clock = ManualClock::new();
    assert!(registry().set_clock("tower-keyed", clock.clone()));
    let family = registry()
        .family::<u32>("tower-keyed", || {
            Config::builder()
                .failures(2)
                .open_for(Duration::from_secs(5))
                .build()
                .unwrap()
        })
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    // Requests are `(tenant, id)`; the tenant is the key.
    let inner = {
        let calls = calls.clone();
        tower::service_fn(move |(_tenant, id): (u32, u32)| {
            calls.fetch_add(1, Ordering::Relaxed);
            async move { if id == 0 { Err("down") } else { Ok(id) } }
        })
    };
    let svc = KeyedCircuitBreakerLayer::new(family.clone(), |req: &(u32, u32)| req.0).layer(inner);

    for _ in 0..2 {
        let err = svc.clone().oneshot((1, 0)).await.unwrap_err();
        assert!(matches!(err, Error::Inner("down")));
    }
    assert_eq!(family.get(&1).unwrap().state(), State::Open);
    // Tenant 1 is rejected without reaching the service; tenant 2 is served.
    let err = svc.clone().oneshot((1, 7)).await.unwrap_err();
    assert_eq!(
        err.rejected().expect("rejected").reason(),
        RejectReason::Open
    );
    assert_eq!(svc.clone().oneshot((2, 7)).await.unwrap(), 7);
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert_eq!(family.get(&2).unwrap().state(), State::Closed);
    clock.advance(Duration::from_secs(5));
    assert_eq!(svc.clone().oneshot((1, 7)).await.unwrap(), 7);
    assert_eq!(family.get(&1).unwrap().state(), State::Closed);
    let listed = registry().families();
    let keyed = listed.iter().find(|f| f.name == "tower-keyed").unwrap();
    assert_eq!(keyed.keys.len(), 2);
}
