//! What the attribute tests share: an error type with the conversions the attribute needs, a
//! `ManualClock` registered for a name before its first call, a breaker's state by name, and
//! a test run alone in a process that starts with the environment it needs.

use std::fmt;
use std::time::Duration;

use breakerbox::{ManualClock, Rejected, State, Timeout, registry};

/// A service's error: what the protected functions return.
#[derive(Debug)]
pub enum ApiError {
    Down,
    NotFound,
    Busy { retry_after: Duration },
    Rejected(Rejected),
    Timeout(Timeout),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Down => f.write_str("service down"),
            ApiError::NotFound => f.write_str("not found"),
            ApiError::Busy { retry_after } => write!(f, "busy, retry after {retry_after:?}"),
            ApiError::Rejected(rejected) => rejected.fmt(f),
            ApiError::Timeout(timeout) => timeout.fmt(f),
        }
    }
}

impl From<Rejected> for ApiError {
    fn from(rejected: Rejected) -> Self {
        ApiError::Rejected(rejected)
    }
}

impl From<Timeout> for ApiError {
    fn from(timeout: Timeout) -> Self {
        ApiError::Timeout(timeout)
    }
}

/// A clock for the breaker or keyed family `name`, which must not have been used yet.
pub fn manual_clock(name: &str) -> ManualClock {
    let clock = ManualClock::new();
    assert!(
        registry().set_clock(name, clock.clone()),
        "breaker {name} already exists"
    );
    clock
}

/// The state of the registry's breaker `name`.
pub fn state(name: &str) -> State {
    registry()
        .get(name)
        .expect("the breaker exists after the first call")
        .state()
}

/// A test run alone in a process that starts with the environment variables it needs: the
/// runtime's tests' helper, one file for every package.
#[allow(dead_code)]
#[path = "../../runtime/tests/common/alone.rs"]
mod alone;
#[allow(unused_imports)]
pub use alone::alone_with_env;
