//! `#[circuit_breaker(probe = path, probe_every = "…")]` end to end: blocking and async
//! probes on sync and async functions and methods, a config given by name keeping the
//! attribute's probe. Each test has its own breaker name and clock; nothing sleeps: a test
//! waits for its probe to be handled (`health_probes`), never for time.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::support::{ApiError, manual_clock, state};
use breakerbox::{Breaker, Config, HealthProbes, Reason, State, circuit_breaker, registry};

fn breaker(name: &str) -> Breaker {
    registry().get(name).expect("created by its first call")
}

/// Waits until `started` probes were started and every one of them was handled.
fn settled(name: &str, started: u64) -> HealthProbes {
    let breaker = breaker(name);
    loop {
        let p = breaker.health_probes();
        if p.started >= started && p.running == 0 {
            return p;
        }
        std::thread::yield_now();
    }
}

static SYNC_HEALTHY: AtomicBool = AtomicBool::new(false);
static SYNC_PROBES: AtomicU32 = AtomicU32::new(0);

fn sync_ping() -> bool {
    SYNC_PROBES.fetch_add(1, Ordering::SeqCst);
    SYNC_HEALTHY.load(Ordering::SeqCst)
}

#[circuit_breaker(name = "probe-attr-sync", failures = 1, open_for = "60s", probe = sync_ping, probe_every = "1s")]
fn sync_fetch(up: bool) -> Result<u32, ApiError> {
    if up { Ok(1) } else { Err(ApiError::Down) }
}

#[test]
fn a_sync_function_with_a_blocking_probe() {
    let name = "probe-attr-sync";
    let clock = manual_clock(name);
    assert!(sync_fetch(false).is_err());
    assert_eq!(state(name), State::Open);
    let config = breaker(name).config().clone();
    assert!(config.probe().unwrap().name().ends_with("sync_ping"));
    assert_eq!(config.probe_every(), Duration::from_secs(1));
    clock.advance(Duration::from_secs(1));
    let p = settled(name, 1);
    assert_eq!((p.failed, p.passed), (1, 0));
    assert_eq!(state(name), State::Open);
    SYNC_HEALTHY.store(true, Ordering::SeqCst);
    clock.advance(Duration::from_secs(1));
    let p = settled(name, 2);
    assert_eq!(p.passed, 1);
    assert_eq!(state(name), State::HalfOpen);
    assert_eq!(SYNC_PROBES.load(Ordering::SeqCst), 2);
    assert_eq!(sync_fetch(true).unwrap(), 1);
    assert_eq!(state(name), State::Closed);
}

struct Users;

impl Users {
    fn health() -> Result<(), ApiError> {
        Ok(())
    }

    #[circuit_breaker(name = "probe-attr-method", failures = 1, probe = Users::health, probe_every = "2s")]
    fn get(&self, id: u32) -> Result<u32, ApiError> {
        if id == 0 {
            Err(ApiError::NotFound)
        } else {
            Ok(id)
        }
    }

    #[circuit_breaker(name = "probe-attr-async-method", failures = 1, probe = Users::health)]
    async fn get_async(&self, id: u32) -> Result<u32, ApiError> {
        tokio::task::yield_now().await;
        if id == 0 {
            Err(ApiError::NotFound)
        } else {
            Ok(id)
        }
    }
}

#[test]
fn a_method_with_an_associated_probe() {
    let name = "probe-attr-method";
    let clock = manual_clock(name);
    assert!(Users.get(0).is_err());
    assert_eq!(state(name), State::Open);
    clock.advance(Duration::from_secs(1));
    assert_eq!(breaker(name).health_probes().started, 0, "every 2 s");
    clock.advance(Duration::from_secs(1));
    settled(name, 1);
    assert_eq!(state(name), State::HalfOpen);
    let explained = breaker(name).explain().to_string();
    assert!(
        explained.contains("a health probe succeeded"),
        "{explained}"
    );
}

/// An async method with a blocking probe, timed by a manual clock (the default 5 s).
#[tokio::test]
async fn an_async_method_with_a_blocking_probe() {
    let name = "probe-attr-async-method";
    let clock = manual_clock(name);
    assert!(Users.get_async(0).await.is_err());
    let reasons = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = reasons.clone();
    breaker(name).on_state_change(move |e| log.lock().unwrap().push(e.reason));
    clock.advance(Duration::from_secs(5));
    settled(name, 1);
    assert_eq!(state(name), State::HalfOpen);
    assert_eq!(*reasons.lock().unwrap(), vec![Reason::HealthProbe]);
    assert_eq!(Users.get_async(7).await.unwrap(), 7);
    assert_eq!(state(name), State::Closed);
}

fn kept() -> bool {
    true
}

#[circuit_breaker(name = "probe-attr-configured", failures = 3, probe = kept)]
fn configured() -> Result<u32, ApiError> {
    Err(ApiError::Down)
}

/// A config given by name (as a config file gives it) has no probe function: the
/// attribute's stays, with the config's `probe_every`.
#[test]
fn a_config_by_name_keeps_the_attributes_probe() {
    let name = "probe-attr-configured";
    let clock = manual_clock(name);
    let config = Config::builder()
        .failures(1)
        .probe_every(Duration::from_secs(3))
        .build()
        .unwrap();
    assert!(registry().configure(name, config));
    assert!(configured().is_err());
    assert_eq!(state(name), State::Open, "the config's `failures = 1`");
    let config = breaker(name).config().clone();
    assert!(config.probe().unwrap().name().ends_with("kept"));
    assert_eq!(config.probe_every(), Duration::from_secs(3));
    clock.advance(Duration::from_secs(3));
    settled(name, 1);
    assert_eq!(state(name), State::HalfOpen);
}

#[cfg(feature = "tokio")]
mod async_probes {
    use super::*;
    use breakerbox::TokioClock;
    use tokio::time::sleep;

    static ASYNC_PROBES: AtomicU32 = AtomicU32::new(0);

    async fn ping() -> Result<(), ApiError> {
        tokio::task::yield_now().await;
        match ASYNC_PROBES.fetch_add(1, Ordering::SeqCst) {
            0 => Err(ApiError::Down),
            _ => Ok(()),
        }
    }

    #[circuit_breaker(name = "probe-attr-async", failures = 1, probe = ping, probe_every = "1s")]
    async fn fetch(up: bool) -> Result<u32, ApiError> {
        tokio::task::yield_now().await;
        if up { Ok(1) } else { Err(ApiError::Down) }
    }

    /// Lets the runtime run the probe's task until `started` probes were handled.
    async fn settled(name: &str, started: u64) -> HealthProbes {
        let breaker = breaker(name);
        loop {
            let p = breaker.health_probes();
            if p.started >= started && p.running == 0 {
                return p;
            }
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_async_function_with_an_async_probe_on_paused_time() {
        let name = "probe-attr-async";
        assert!(registry().set_clock(name, TokioClock));
        assert!(fetch(false).await.is_err());
        assert!(breaker(name).config().probe().unwrap().is_async());
        sleep(Duration::from_millis(1001)).await;
        let p = settled(name, 1).await;
        assert_eq!((p.failed, p.passed), (1, 0));
        assert_eq!(state(name), State::Open);
        sleep(Duration::from_secs(1)).await;
        let p = settled(name, 2).await;
        assert_eq!(p.passed, 1);
        assert_eq!(state(name), State::HalfOpen);
        assert_eq!(fetch(true).await.unwrap(), 1);
        assert_eq!(state(name), State::Closed);
    }
}
