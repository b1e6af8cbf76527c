//! A panic while an attribute's breaker (or keyed family) is created fails that call only:
//! the next call creates it and runs, for a plain function, an async one and a keyed one.
//!
//! The panic comes from a clock given to the name with `registry().set_clock` that panics at
//! its first readings and then works, as a clock that is not ready yet would. Every test uses
//! its own name (tests run in parallel in one process); nothing sleeps.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::support::{ApiError, state};
use breakerbox::{Clock, ManualClock, State, circuit_breaker, registry};

/// A clock that panics at its first readings, then reads its `ManualClock`.
struct FailsFirst {
    panics_left: AtomicU32,
    time: ManualClock,
}

impl Clock for FailsFirst {
    fn now(&self) -> Duration {
        let left = self.panics_left.load(Ordering::SeqCst);
        if left > 0 {
            self.panics_left.store(left - 1, Ordering::SeqCst);
            panic!("clock not ready");
        }
        self.time.now()
    }
}

/// Gives `name` a clock that panics at its first reading; returns it.
fn failing_clock(name: &str) -> Arc<FailsFirst> {
    let clock = Arc::new(FailsFirst {
        panics_left: AtomicU32::new(1),
        time: ManualClock::without_timers(),
    });
    assert!(
        registry().set_clock(name, clock.clone()),
        "{name} already exists"
    );
    clock
}

/// Runs `f`, which must panic; the test's own panic message, not a poisoned lock's.
fn panics_with_the_clock<T>(f: impl FnOnce() -> T) {
    let payload = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => panic!("the first call did not read the panicking clock"),
        Err(payload) => payload,
    };
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or_default();
    assert_eq!(message, "clock not ready");
}

#[circuit_breaker(name = "poison-sync", failures = 1)]
fn fetch(up: bool) -> Result<u32, ApiError> {
    if up { Ok(1) } else { Err(ApiError::Down) }
}

#[test]
fn a_panic_creating_a_functions_breaker_fails_that_call_only() {
    let clock = failing_clock("poison-sync");
    panics_with_the_clock(|| fetch(true));
    assert_eq!(clock.panics_left.load(Ordering::SeqCst), 0);
    // The next call creates the breaker and runs; the breaker works as configured.
    assert_eq!(fetch(true).unwrap(), 1);
    assert!(matches!(fetch(false), Err(ApiError::Down)));
    assert_eq!(state("poison-sync"), State::Open);
    assert!(matches!(fetch(true), Err(ApiError::Rejected(_))));
}

#[circuit_breaker(name = "poison-async", failures = 1)]
async fn fetch_async(up: bool) -> Result<u32, ApiError> {
    tokio::task::yield_now().await;
    if up { Ok(1) } else { Err(ApiError::Down) }
}

#[tokio::test]
async fn a_panic_creating_an_async_functions_breaker_fails_that_call_only() {
    let _clock = failing_clock("poison-async");
    let first = tokio::spawn(fetch_async(true)).await.unwrap_err();
    assert!(first.is_panic());
    let message = first.into_panic();
    assert_eq!(message.downcast_ref::<&str>(), Some(&"clock not ready"));
    assert_eq!(fetch_async(true).await.unwrap(), 1);
    assert!(matches!(fetch_async(false).await, Err(ApiError::Down)));
    assert_eq!(state("poison-async"), State::Open);
}

/// The keys seen by the keyed function's body.
static SEEN: LazyLock<std::sync::Mutex<Vec<String>>> = LazyLock::new(Default::default);

#[circuit_breaker(name = "poison-keyed", key = tenant, failures = 1)]
fn fetch_for(tenant: &str, up: bool) -> Result<u32, ApiError> {
    SEEN.lock().unwrap().push(tenant.to_owned());
    if up { Ok(1) } else { Err(ApiError::Down) }
}

#[test]
fn a_panic_creating_a_keyed_functions_family_fails_that_call_only() {
    let clock = failing_clock("poison-keyed");
    panics_with_the_clock(|| fetch_for("acme", true));
    assert_eq!(clock.panics_left.load(Ordering::SeqCst), 0);
    assert!(SEEN.lock().unwrap().is_empty(), "the body did not run");
    assert_eq!(fetch_for("acme", true).unwrap(), 1);
    assert!(matches!(fetch_for("acme", false), Err(ApiError::Down)));
    // Each key has its own breaker, as ever.
    assert!(matches!(
        fetch_for("acme", true),
        Err(ApiError::Rejected(_))
    ));
    assert_eq!(fetch_for("globex", true).unwrap(), 1);
    assert_eq!(*SEEN.lock().unwrap(), ["acme", "acme", "globex"]);
}
