//! The expansion is warning-free under strict lints: the user's code keeps its lints and
//! generated code triggers none (thiserror `tests/test_lints.rs`).
#![deny(warnings, clippy::pedantic, unused_qualifications, unused_results)]
#![deny(missing_docs, unreachable_pub, unused_lifetimes)]

use breakerbox::{Outcome, Rejected, circuit_breaker};

/// The error.
#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

/// A documented public function.
///
/// # Errors
///
/// When the service is down or the breaker is open.
#[circuit_breaker(failures = 3, open_for = "10s", backoff = 2.0, jitter = 0.1, max_open_for = "1m")]
pub fn fetch(id: u32) -> Result<u32, Error> {
    Ok(id)
}

/// Unit results.
#[circuit_breaker(classify = classify_unit, fallback = nothing)]
pub fn unit() {}

fn nothing() {}

fn classify_unit((): &()) -> Outcome {
    Outcome::Success
}

/// An async function with a fallback.
///
/// # Errors
///
/// Never.
#[circuit_breaker(fallback = cached, failure_rate = 50, window = "30s", min_calls = 5)]
pub async fn fetch_async(id: u32) -> Result<u32, Error> {
    Ok(id)
}

async fn cached(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {
    let _ = fetch(1);
    unit();
    drop(fetch_async(1));
}
