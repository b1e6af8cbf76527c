//! `fallback_on = "error"`: the fallback also answers calls that ran and failed — an `Err`,
//! or a result `classify` judges a failure or a trip — after the failure is recorded; it is
//! told which case with `FallbackReason::Failed`. Panics are not answered: they go on.
//!
//! Every test uses its own breaker name (tests run in parallel in one process).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::{ApiError, state};
use breakerbox::{FallbackReason, Outcome, State, circuit_breaker, registry};

fn cached(id: u32) -> Result<String, ApiError> {
    Ok(format!("cached {id}"))
}

#[circuit_breaker(name = "on-error-sync", failures = 2, fallback = cached, fallback_on = "error")]
fn sync_user(id: u32) -> Result<String, ApiError> {
    if id == 0 {
        Err(ApiError::Down)
    } else {
        Ok(format!("user {id}"))
    }
}

#[test]
fn a_failed_sync_call_is_recorded_then_answered_by_the_fallback() {
    assert_eq!(sync_user(1).unwrap(), "user 1");
    assert_eq!(sync_user(0).unwrap(), "cached 0", "the Err is answered");
    let b = registry().get("on-error-sync").unwrap();
    assert_eq!(b.metrics().failures, 1, "and recorded first");
    assert_eq!(sync_user(0).unwrap(), "cached 0");
    assert_eq!(state("on-error-sync"), State::Open, "the failures count");
    assert_eq!(
        sync_user(1).unwrap(),
        "cached 1",
        "rejected, as without fallback_on"
    );
}

#[circuit_breaker(name = "on-rejected-sync", failures = 2, fallback = cached, fallback_on = "rejected")]
fn rejected_only(id: u32) -> Result<String, ApiError> {
    if id == 0 {
        Err(ApiError::Down)
    } else {
        Ok(format!("user {id}"))
    }
}

#[test]
fn fallback_on_rejected_returns_the_error_as_before() {
    assert!(matches!(rejected_only(0), Err(ApiError::Down)));
    assert!(matches!(rejected_only(0), Err(ApiError::Down)));
    assert_eq!(rejected_only(1).unwrap(), "cached 1");
}

static REASONS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn told(id: u32, reason: FallbackReason) -> Result<String, ApiError> {
    let case = match &reason {
        FallbackReason::Rejected(_) => "rejected".to_owned(),
        FallbackReason::TimedOut(_) => "timed out".to_owned(),
        FallbackReason::Failed(f) => {
            format!("failed classified={} {:?}", f.classified(), f.outcome())
        }
        other => format!("{other}"),
    };
    REASONS.lock().unwrap().push(case);
    Ok(format!("fallback {id}"))
}

#[circuit_breaker(name = "on-error-reason", failures = 2, fallback_with_reason = told, fallback_on = "error")]
fn with_reason(id: u32) -> Result<String, ApiError> {
    if id == 0 {
        Err(ApiError::Down)
    } else {
        Ok(format!("user {id}"))
    }
}

#[test]
fn the_fallback_is_told_the_call_failed_or_was_rejected() {
    assert_eq!(with_reason(0).unwrap(), "fallback 0");
    assert_eq!(with_reason(0).unwrap(), "fallback 0");
    assert_eq!(with_reason(1).unwrap(), "fallback 1");
    let reasons = REASONS.lock().unwrap().clone();
    assert_eq!(
        reasons,
        [
            "failed classified=false Failure",
            "failed classified=false Failure",
            "rejected"
        ]
    );
    let reason = FallbackReason::Failed(breakerbox::CallFailed::new(
        registry().get("on-error-reason").unwrap(),
        Outcome::Failure,
        false,
    ));
    assert_eq!(reason.name(), "on-error-reason");
    assert!(reason.failed().is_some() && reason.rejected().is_none());
    assert_eq!(
        reason.to_string(),
        "the call through circuit breaker 'on-error-reason' failed"
    );
}

/// An HTTP-like response that `classify` judges.
#[derive(Debug, PartialEq)]
struct Response(u16);

fn by_status(r: &Response) -> Outcome {
    match r.0 {
        503 => Outcome::trip_for_with(Duration::from_secs(5), "HTTP 503"),
        500.. => Outcome::failure_with("HTTP 5xx"),
        404 => Outcome::Ignored,
        _ => Outcome::Success,
    }
}

static CLASSIFIED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn degraded(status: u16, reason: FallbackReason) -> Response {
    let f = reason.failed().expect("a failed call");
    assert!(f.classified());
    CLASSIFIED.lock().unwrap().push(f.to_string());
    Response(if status == 503 { 299 } else { 298 })
}

#[circuit_breaker(
    name = "on-error-classify",
    failures = 5,
    classify = by_status,
    fallback_with_reason = degraded,
    fallback_on = "error",
)]
fn get(status: u16) -> Response {
    Response(status)
}

#[test]
fn a_classified_failure_or_trip_is_answered_and_an_ignored_call_is_not() {
    assert_eq!(get(200), Response(200));
    assert_eq!(get(404), Response(404), "Ignored is no failure");
    assert_eq!(
        get(500),
        Response(298),
        "a 500 comes back Ok(500), classified a failure"
    );
    assert_eq!(state("on-error-classify"), State::Closed);
    assert_eq!(get(503), Response(299), "a trip is answered too");
    assert_eq!(
        state("on-error-classify"),
        State::Open,
        "and recorded first"
    );
    assert_eq!(
        *CLASSIFIED.lock().unwrap(),
        [
            "the call through circuit breaker 'on-error-classify' failed: HTTP 5xx",
            "the call through circuit breaker 'on-error-classify' failed: HTTP 503",
        ]
    );
}

async fn cached_async(id: u32) -> Result<String, ApiError> {
    tokio::task::yield_now().await;
    Ok(format!("cached {id}"))
}

#[circuit_breaker(name = "on-error-async", failures = 3, fallback = cached_async, fallback_on = "error")]
async fn async_user(id: u32) -> Result<String, ApiError> {
    tokio::task::yield_now().await;
    if id == 0 {
        Err(ApiError::Down)
    } else {
        Ok(format!("user {id}"))
    }
}

#[tokio::test]
async fn a_failed_async_call_is_answered_by_the_awaited_fallback() {
    assert_eq!(async_user(2).await.unwrap(), "user 2");
    assert_eq!(async_user(0).await.unwrap(), "cached 0");
    let b = registry().get("on-error-async").unwrap();
    assert_eq!(b.metrics().failures, 1);
}

struct Client {
    calls: AtomicU32,
    name: String,
}

impl Client {
    #[circuit_breaker(name = "on-error-method", failures = 3, fallback = Self::stale, fallback_on = "error")]
    fn user(&self, id: u32) -> Result<String, ApiError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if id == 0 {
            Err(ApiError::Down)
        } else {
            Ok(format!("{} {id}", self.name))
        }
    }

    fn stale(&self, id: u32) -> Result<String, ApiError> {
        Ok(format!("stale {} {id}", self.name))
    }

    #[circuit_breaker(name = "on-error-async-method", failures = 3, fallback = Self::stale_async, fallback_on = "error")]
    async fn user_async(&self, id: u32) -> Result<String, ApiError> {
        tokio::task::yield_now().await;
        if id == 0 {
            Err(ApiError::Down)
        } else {
            Ok(format!("{} {id}", self.name))
        }
    }

    async fn stale_async(&self, id: u32) -> Result<String, ApiError> {
        Ok(format!("stale {} {id}", self.name))
    }
}

#[tokio::test]
async fn a_failed_method_call_is_answered_with_self() {
    let client = Client {
        calls: AtomicU32::new(0),
        name: "api".into(),
    };
    assert_eq!(client.user(1).unwrap(), "api 1");
    assert_eq!(client.user(0).unwrap(), "stale api 0");
    assert_eq!(client.calls.load(Ordering::Relaxed), 2, "the body ran");
    assert_eq!(client.user_async(0).await.unwrap(), "stale api 0");
    assert_eq!(client.user_async(3).await.unwrap(), "api 3");
}

#[circuit_breaker(name = "on-error-panic", failures = 5, fallback = cached, fallback_on = "error")]
fn panics(id: u32) -> Result<String, ApiError> {
    if id == 0 {
        panic!("a bug, not a failure of the service");
    }
    Ok(format!("user {id}"))
}

/// A panic is a bug in the program, not an answer of the service: it is recorded as a
/// failure and goes on, unanswered.
#[test]
fn a_panic_is_recorded_and_goes_on_unanswered() {
    let caught = std::panic::catch_unwind(|| panics(0));
    assert!(caught.is_err(), "the panic went on");
    let b = registry().get("on-error-panic").unwrap();
    assert_eq!(b.metrics().failures, 1);
    assert_eq!(panics(1).unwrap(), "user 1");
}
