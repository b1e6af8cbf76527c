//! `#[circuit_breaker]` on async functions and methods, end to end.
//!
//! Every test uses its own breaker name (tests run in parallel in one process). Time comes
//! from a `ManualClock` registered for that name, or from tokio's paused clock for
//! `timeout`; nothing sleeps.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::task::{Context, Waker};
use std::time::Duration;

use crate::support::{ApiError, manual_clock, state};
use breakerbox::{Outcome, State, circuit_breaker, registry};

/// Yields once, so that every call really is asynchronous.
async fn yield_now() {
    tokio::task::yield_now().await;
}

static UP: AtomicBool = AtomicBool::new(false);

async fn cached_user(id: u32) -> Result<String, ApiError> {
    yield_now().await;
    Ok(format!("cached {id}"))
}

#[circuit_breaker(name = "async-trip", failures = 2, open_for = "30s", fallback = cached_user)]
async fn fetch_user(id: u32) -> Result<String, ApiError> {
    yield_now().await;
    if UP.load(Ordering::SeqCst) {
        Ok(format!("user {id}"))
    } else {
        Err(ApiError::Down)
    }
}

#[tokio::test]
async fn trips_falls_back_probes_and_closes() {
    let clock = manual_clock("async-trip");
    assert!(matches!(fetch_user(1).await, Err(ApiError::Down)));
    assert!(matches!(fetch_user(1).await, Err(ApiError::Down)));
    assert_eq!(state("async-trip"), State::Open);
    // The fallback is awaited and gets the arguments.
    assert_eq!(fetch_user(3).await.unwrap(), "cached 3");

    clock.advance(Duration::from_secs(30));
    UP.store(true, Ordering::SeqCst);
    assert_eq!(fetch_user(4).await.unwrap(), "user 4");
    assert_eq!(state("async-trip"), State::Closed);
}

#[circuit_breaker(name = "async-no-fallback", failures = 1, open_for = "1s")]
async fn down() -> Result<(), ApiError> {
    yield_now().await;
    Err(ApiError::Down)
}

#[tokio::test]
async fn without_fallback_the_rejection_is_returned() {
    manual_clock("async-no-fallback");
    assert!(matches!(down().await, Err(ApiError::Down)));
    match down().await {
        Err(ApiError::Rejected(rejected)) => {
            assert_eq!(rejected.name(), "async-no-fallback");
            assert_eq!(rejected.last_failure().as_deref(), Some("service down"));
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
}

struct Client {
    up: AtomicBool,
    calls: AtomicU32,
}

impl Client {
    async fn offline(&self, id: u32) -> Result<String, ApiError> {
        Ok(format!("offline {id}"))
    }

    #[circuit_breaker(name = "async-method", failures = 1, open_for = "2s", fallback = Self::offline)]
    async fn get(&self, id: u32) -> Result<String, ApiError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        yield_now().await;
        if self.up.load(Ordering::SeqCst) {
            Ok(format!("user {id}"))
        } else {
            Err(ApiError::Down)
        }
    }

    #[circuit_breaker(name = "async-method-arc", failures = 1)]
    async fn calls(self: Arc<Self>) -> Result<u32, ApiError> {
        yield_now().await;
        Ok(self.calls.load(Ordering::SeqCst))
    }
}

#[tokio::test]
async fn async_methods() {
    let clock = manual_clock("async-method");
    let client = Arc::new(Client {
        up: AtomicBool::new(false),
        calls: AtomicU32::new(0),
    });
    assert!(client.get(1).await.is_err());
    assert_eq!(client.get(1).await.unwrap(), "offline 1");
    assert_eq!(
        client.calls.load(Ordering::SeqCst),
        1,
        "the rejected call did not run"
    );
    clock.advance(Duration::from_secs(2));
    client.up.store(true, Ordering::SeqCst);
    assert_eq!(client.get(2).await.unwrap(), "user 2");
    assert_eq!(state("async-method"), State::Closed);
    assert_eq!(client.clone().calls().await.unwrap(), 2);
}

/// Native `async fn` in a trait, annotated in the impl.
trait Users {
    async fn name(&self, id: u32) -> Result<String, ApiError>;
}

struct Remote;

impl Users for Remote {
    #[circuit_breaker(name = "async-trait-impl", failures = 1)]
    async fn name(&self, id: u32) -> Result<String, ApiError> {
        yield_now().await;
        if id == 0 {
            Err(ApiError::NotFound)
        } else {
            Ok(format!("remote {id}"))
        }
    }
}

#[tokio::test]
async fn async_fn_in_trait_impl() {
    manual_clock("async-trait-impl");
    assert_eq!(Remote.name(1).await.unwrap(), "remote 1");
    assert!(matches!(Remote.name(0).await, Err(ApiError::NotFound)));
    assert!(matches!(Remote.name(1).await, Err(ApiError::Rejected(_))));
}

fn ignore_not_found(result: &Result<String, ApiError>) -> Outcome {
    match result {
        Err(ApiError::NotFound) => Outcome::Ignored,
        Err(_) => Outcome::TripFor(Duration::from_secs(9)),
        Ok(_) => Outcome::Success,
    }
}

#[circuit_breaker(name = "async-classify", failures = 1, classify = ignore_not_found)]
async fn lookup(id: u32) -> Result<String, ApiError> {
    yield_now().await;
    match id {
        0 => Err(ApiError::NotFound),
        1 => Err(ApiError::Down),
        _ => Ok(id.to_string()),
    }
}

#[tokio::test]
async fn classify_ignores_and_trips_for() {
    let clock = manual_clock("async-classify");
    for _ in 0..3 {
        assert!(lookup(0).await.is_err());
    }
    assert_eq!(state("async-classify"), State::Closed);
    assert!(matches!(lookup(1).await, Err(ApiError::Down)));
    let Err(ApiError::Rejected(rejected)) = lookup(2).await else {
        panic!("expected a rejection");
    };
    assert_eq!(rejected.retry_after(), Some(Duration::from_secs(9)));
    clock.advance(Duration::from_secs(9));
    assert_eq!(lookup(2).await.unwrap(), "2");
}

#[circuit_breaker(name = "async-dropped", failures = 1)]
async fn never_finishes() -> Result<(), ApiError> {
    std::future::pending::<()>().await;
    Ok(())
}

#[test]
fn a_dropped_future_counts_as_neither() {
    manual_clock("async-dropped");
    {
        let mut future = pin!(never_finishes());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(future.as_mut().poll(&mut cx).is_pending());
    }
    let metrics = registry().get("async-dropped").unwrap().metrics();
    assert_eq!(
        (metrics.failures, metrics.successes, metrics.ignored),
        (0, 0, 1)
    );
    assert_eq!(metrics.state, State::Closed);
}

#[circuit_breaker(name = "async-panic", failures = 1)]
async fn panics() -> Result<(), ApiError> {
    yield_now().await;
    panic!("boom");
}

#[tokio::test]
async fn a_panic_counts_as_a_failure_and_resumes() {
    manual_clock("async-panic");
    let joined = tokio::spawn(panics()).await;
    assert!(joined.unwrap_err().is_panic());
    assert_eq!(state("async-panic"), State::Open);
}

#[test]
fn futures_stay_send() {
    fn assert_send<T: Send>(_: &T) {}
    assert_send(&fetch_user(1));
    assert_send(&lookup(1));
    let client = Client {
        up: AtomicBool::new(true),
        calls: AtomicU32::new(0),
    };
    assert_send(&client.get(1));
}

#[cfg(feature = "tokio")]
mod timeout {
    use super::{ApiError, State, circuit_breaker, registry, yield_now};

    #[circuit_breaker(name = "async-timeout", failures = 2, timeout = "100ms")]
    async fn hangs() -> Result<(), ApiError> {
        std::future::pending::<()>().await;
        Ok(())
    }

    #[test]
    fn futures_with_a_timeout_stay_send() {
        fn assert_send<T: Send>(_: &T) {}
        assert_send(&hangs());
        assert_send(&slow(1));
    }

    #[tokio::test(start_paused = true)]
    async fn fires_on_a_hung_call_and_counts_as_a_failure() {
        let started = tokio::time::Instant::now();
        let Err(ApiError::Timeout(timeout)) = hangs().await else {
            panic!("expected a timeout");
        };
        assert_eq!(started.elapsed(), std::time::Duration::from_millis(100));
        assert_eq!(timeout.name(), "async-timeout");
        assert!(hangs().await.is_err());
        let breaker = registry().get("async-timeout").unwrap();
        assert_eq!(breaker.state(), State::Open);
        let m = breaker.metrics();
        assert_eq!((m.failures, m.timeouts), (2, 2));
        assert_eq!(
            breaker.last_failure().as_deref(),
            Some("call through circuit breaker 'async-timeout' timed out after 100ms")
        );
        assert!(matches!(hangs().await, Err(ApiError::Rejected(_))));
        assert_eq!(breaker.metrics().timeouts, 2, "a rejection is no timeout");
    }

    #[circuit_breaker(name = "async-timeout-no-timer", failures = 2, timeout = "1s")]
    async fn timed_without_a_timer() -> Result<(), ApiError> {
        Ok(())
    }

    /// On a runtime built without timers, a function with `timeout` panics with tokio's
    /// message at each call: the program's setup error reaches the caller every time, and
    /// never counts as the service's failure, so the breaker stays closed and keeps telling.
    #[test]
    fn a_timeout_on_a_runtime_without_timers_panics_and_never_trips() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for _ in 0..3 {
            let call = std::panic::AssertUnwindSafe(timed_without_a_timer());
            let panic = rt.block_on(futures_catch(call)).unwrap_err();
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            assert!(message.contains("timers are disabled"), "{message}");
        }
        let m = registry().get("async-timeout-no-timer").unwrap().metrics();
        assert_eq!((m.state, m.failures, m.ignored), (State::Closed, 0, 3));
    }

    /// `future`'s output, or the payload of its panic.
    async fn futures_catch<F: std::future::Future + std::panic::UnwindSafe>(
        future: F,
    ) -> std::thread::Result<F::Output> {
        let mut future = std::pin::pin!(future);
        std::future::poll_fn(|cx| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                future.as_mut().poll(cx)
            })) {
                Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
                Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
                Err(panic) => std::task::Poll::Ready(Err(panic)),
            }
        })
        .await
    }

    #[circuit_breaker(
        name = "async-timeout-latency",
        failures = 5,
        timeout = "2s",
        latency = true
    )]
    async fn sometimes_hangs(hang: bool) -> Result<(), ApiError> {
        if hang {
            std::future::pending::<()>().await;
        }
        yield_now().await;
        Ok(())
    }

    /// On tokio's paused clock no real time passes, and the breaker's clock (the system one)
    /// sees none: the timed-out call is timed as its timeout, so a hang shows in p99.
    #[tokio::test(start_paused = true)]
    async fn a_timed_out_call_is_timed_as_its_timeout() {
        for _ in 0..9 {
            sometimes_hangs(false).await.unwrap();
        }
        let started = tokio::time::Instant::now();
        assert!(matches!(
            sometimes_hangs(true).await,
            Err(ApiError::Timeout(_))
        ));
        assert_eq!(started.elapsed(), std::time::Duration::from_secs(2));
        let breaker = registry().get("async-timeout-latency").unwrap();
        let m = breaker.metrics();
        assert_eq!((m.successes, m.failures, m.timeouts), (9, 1, 1));
        let l = breaker.latency().unwrap();
        assert_eq!(l.recent_calls, 10);
        let p99 = l.p99.unwrap().as_secs_f64();
        assert!((p99 - 2.0).abs() <= 2.0 / 16.0, "{l:?}");
        assert!(
            l.p50.unwrap() < std::time::Duration::from_millis(100),
            "{l:?}"
        );
        assert!(l.sum >= std::time::Duration::from_secs(2), "{l:?}");
    }

    async fn slow_fallback(id: u32) -> Result<u32, ApiError> {
        Ok(id + 1000)
    }

    #[circuit_breaker(name = "async-timeout-fallback", timeout = "1s", fallback = slow_fallback)]
    async fn slow(id: u32) -> Result<u32, ApiError> {
        if id == 0 {
            std::future::pending::<()>().await;
        }
        yield_now().await;
        Ok(id)
    }

    #[tokio::test(start_paused = true)]
    async fn with_a_fallback_the_fallback_answers_a_timeout() {
        assert_eq!(slow(5).await.unwrap(), 5);
        assert_eq!(slow(0).await.unwrap(), 1000);
        let metrics = registry().get("async-timeout-fallback").unwrap().metrics();
        assert_eq!(
            (metrics.successes, metrics.failures, metrics.timeouts),
            (1, 1, 1)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// `fallback_with_reason`: the fallback is told why it answers.

/// Answers with the request and the reason, as text a test can compare.
async fn explain(id: u32, reason: breakerbox::FallbackReason) -> Result<String, ApiError> {
    yield_now().await;
    let why = match &reason {
        breakerbox::FallbackReason::Rejected(rejected) => format!("{:?}", rejected.reason()),
        breakerbox::FallbackReason::TimedOut(timeout) => {
            format!("timed out after {:?}", timeout.after())
        }
        _ => "unknown".to_owned(),
    };
    Ok(format!("{id} {} {why}", reason.name()))
}

#[circuit_breaker(name = "async-fallback-reason", failures = 1, open_for = "1s", fallback_with_reason = explain)]
async fn explained(id: u32) -> Result<String, ApiError> {
    yield_now().await;
    if id == 0 {
        Err(ApiError::Down)
    } else {
        Ok(format!("{id}"))
    }
}

#[tokio::test]
async fn an_async_fallback_with_reason_is_awaited_with_the_rejection() {
    manual_clock("async-fallback-reason");
    assert_eq!(explained(1).await.unwrap(), "1");
    assert!(matches!(explained(0).await, Err(ApiError::Down)));
    assert_eq!(explained(2).await.unwrap(), "2 async-fallback-reason Open");
}

#[cfg(feature = "tokio")]
mod timeout_reason {
    use super::{ApiError, circuit_breaker, explain, registry, yield_now};

    #[circuit_breaker(name = "async-timeout-reason", failures = 2, timeout = "1s", fallback_with_reason = explain)]
    async fn slow(id: u32) -> Result<String, ApiError> {
        if id == 0 {
            std::future::pending::<()>().await;
        }
        yield_now().await;
        Ok(format!("{id}"))
    }

    #[tokio::test(start_paused = true)]
    async fn the_fallback_is_told_the_call_timed_out_then_that_it_was_rejected() {
        assert_eq!(slow(5).await.unwrap(), "5");
        assert_eq!(
            slow(0).await.unwrap(),
            "0 async-timeout-reason timed out after 1s"
        );
        assert_eq!(
            slow(0).await.unwrap(),
            "0 async-timeout-reason timed out after 1s"
        );
        // Two timeouts are two failures: open, and the next call is rejected.
        assert_eq!(slow(7).await.unwrap(), "7 async-timeout-reason Open");
        let metrics = registry().get("async-timeout-reason").unwrap().metrics();
        assert_eq!(
            (metrics.successes, metrics.failures, metrics.rejected),
            (1, 2, 1)
        );
    }
}
