//! `TokioClock`'s open timer under every runtime shape: a breaker opened on a current-thread
//! runtime that is only ever driven by `block_on` (the sync-over-async wrapper), on a runtime
//! that is dropped while the breaker is open, and outside any runtime, half-opens at its open
//! time, inside or outside that runtime.
//!
//! No test sleeps. Time moves on tokio's paused clocks: a paused runtime's clock starts at the
//! real time it was built, so a paused runtime built after a breaker opened and advanced past
//! the open time reads a time after the breaker's deadline, whichever runtime (or none) opened
//! it.
#![cfg(feature = "tokio")]

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, RejectReason, State, TokioClock};

const OPEN_FOR: Duration = Duration::from_secs(30);
const PAST_IT: Duration = Duration::from_secs(31);

fn on_tokio(name: &str) -> Breaker {
    let config = Config::builder()
        .failures(1)
        .open_for(OPEN_FOR)
        .clock(TokioClock)
        .build()
        .unwrap();
    Breaker::new(name, config)
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

fn trip(breaker: &Breaker) {
    breaker.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
}

/// A call is rejected as open, with the time left to wait.
fn rejected(breaker: &Breaker) {
    let r = breaker.try_acquire().unwrap_err();
    assert_eq!(r.reason(), RejectReason::Open);
    assert!(r.retry_after().is_some_and(|left| left <= OPEN_FOR), "{r}");
}

/// A call is admitted as the half-open probe, and its success closes the breaker.
fn probes(breaker: &Breaker) {
    let permit = match breaker.try_acquire() {
        Ok(permit) => permit,
        Err(r) => panic!("rejected after the open time: {r}"),
    };
    assert!(permit.is_probe());
    permit.success();
    assert_eq!(breaker.state(), State::Closed);
}

/// Runs `f` on a fresh paused runtime after moving its clock `by` past the real time.
fn later<T>(by: Duration, f: impl FnOnce() -> T) -> T {
    paused().block_on(async {
        tokio::time::advance(by).await;
        f()
    })
}

/// Moves the current runtime's paused clock on without letting any other task run: what
/// happens to a runtime only driven by `block_on` whose calls all finish at their first poll,
/// while the real time goes on between them. `tokio::time::advance` moves the clock at its
/// first poll, then yields to the other tasks; it is polled once and dropped.
fn advance_without_running_tasks(by: Duration) {
    let mut advance = pin!(tokio::time::advance(by));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(advance.as_mut().poll(&mut cx).is_pending());
}

/// The sync-over-async wrapper: every call is a `block_on` whose future is ready at its first
/// poll, so the runtime never runs another task. The breaker opened there half-opens at its
/// open time all the same: the first call after it, on that runtime, is the probe.
#[test]
fn a_breaker_opened_under_block_on_only_half_opens_at_its_open_time() {
    let runtime = paused();
    let breaker = on_tokio("block-on-only");
    runtime.block_on(async { trip(&breaker) });
    runtime.block_on(async { rejected(&breaker) });
    runtime.block_on(async {
        advance_without_running_tasks(OPEN_FOR - Duration::from_secs(1));
        rejected(&breaker);
    });
    runtime.block_on(async {
        advance_without_running_tasks(Duration::from_secs(2));
        probes(&breaker);
    });
}

/// The same breaker called elsewhere once its open time is over (on another runtime here;
/// outside any runtime `TokioClock` reads the real time): the first call is the probe, though
/// the runtime that opened it is alive and has never run its timer.
#[test]
fn a_breaker_opened_under_block_on_only_half_opens_on_another_runtime() {
    let runtime = paused();
    let breaker = on_tokio("block-on-only-elsewhere");
    runtime.block_on(async { trip(&breaker) });
    later(Duration::ZERO, || rejected(&breaker));
    later(PAST_IT, || probes(&breaker));
    // The runtime that opened it, never driven since, does not take it back.
    runtime.block_on(async { assert_eq!(breaker.state(), State::Closed) });
}

/// The same on a runtime on the real clock, driven the same way: the breaker half-opens at
/// the first call after its open time.
#[test]
fn a_breaker_opened_under_block_on_on_the_real_clock_half_opens() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let breaker = on_tokio("block-on-real-clock");
    runtime.block_on(async { trip(&breaker) });
    runtime.block_on(async { rejected(&breaker) });
    later(PAST_IT, || probes(&breaker));
}

/// A current-thread runtime dropped while its breaker is open, its timer task never run: the
/// breaker half-opens at the first call after its open time.
#[test]
fn a_current_thread_runtime_dropped_while_open_leaves_no_breaker_open() {
    let runtime = paused();
    let breaker = on_tokio("dropped-current-thread");
    runtime.block_on(async { trip(&breaker) });
    drop(runtime);
    later(Duration::ZERO, || rejected(&breaker));
    later(PAST_IT, || probes(&breaker));
}

/// A multi-thread runtime dropped while its breaker is open (its timer task armed on the
/// runtime's workers): the breaker half-opens at the first call after its open time.
#[test]
fn a_multi_thread_runtime_dropped_while_open_leaves_no_breaker_open() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let breaker = on_tokio("dropped-multi-thread");
    runtime.block_on(async { trip(&breaker) });
    drop(runtime);
    later(Duration::ZERO, || rejected(&breaker));
    later(PAST_IT, || probes(&breaker));
}

/// A breaker opened outside any runtime has no timer: the first call after its open time,
/// inside a runtime or not, is the probe.
#[test]
fn a_breaker_opened_outside_any_runtime_half_opens_at_its_open_time() {
    let breaker = on_tokio("outside-any-runtime");
    trip(&breaker);
    rejected(&breaker);
    later(Duration::ZERO, || rejected(&breaker));
    later(PAST_IT, || probes(&breaker));
}
