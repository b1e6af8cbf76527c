//! The expansion under strict lints.
//!
//! Checked by `cargo clippy --all-targets`: generated code triggers no lint, and the user's
//! code keeps its own (thiserror `tests/test_lints.rs`). `ui/tests/ui/pass/lints.rs` checks
//! the rustc lints under trybuild; clippy only sees this module, whose lints are its own
//! (`pub`, so that `missing_docs` reaches its items).
#![deny(warnings, clippy::pedantic, clippy::nursery, unused_qualifications)]
#![allow(clippy::unused_async, clippy::missing_const_for_fn)]

use std::sync::Arc;

use breakerbox::{Outcome, Rejected, Timeout, circuit_breaker};

/// The user's error type. Documented, so that `missing_docs` (from `[workspace.lints]`)
/// would flag a public item the expansion added without docs.
#[derive(Debug)]
pub enum Error {
    /// The service is down.
    Down,
    /// The breaker refused the call.
    Rejected(Rejected),
    /// The call timed out.
    Timeout(Timeout),
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Self::Rejected(rejected)
    }
}

impl From<Timeout> for Error {
    fn from(timeout: Timeout) -> Self {
        Self::Timeout(timeout)
    }
}

/// # Errors
///
/// When down or rejected.
#[circuit_breaker(
    name = "lints-fetch",
    failures = 3,
    open_for = "10s",
    backoff = 2.0,
    jitter = 0.1
)]
pub fn fetch(id: u32) -> Result<u32, Error> {
    if id == 0 { Err(Error::Down) } else { Ok(id) }
}

// A classifier takes the result by reference, whatever its size.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn classify_unit((): &()) -> Outcome {
    Outcome::Success
}

const fn nothing() {}

/// A unit function, classified and with a fallback.
#[circuit_breaker(name = "lints-unit", classify = classify_unit, fallback = nothing)]
pub fn unit() {}

/// # Errors
///
/// Never.
#[circuit_breaker(name = "lints-generic")]
pub fn generic<T>(value: T) -> Result<Vec<T>, Error>
where
    T: Clone,
{
    Ok(vec![value.clone(), value])
}

/// # Errors
///
/// Never.
#[circuit_breaker(name = "lints-borrow")]
pub fn borrow(items: &[String]) -> Result<&str, Error> {
    let first = items.first().ok_or(Error::Down)?;
    Ok(first)
}

/// A client with methods under the attribute.
pub struct Client {
    hits: u32,
}

impl Client {
    async fn cached(&self, id: u32) -> Result<u32, Error> {
        Ok(id + self.hits)
    }

    /// # Errors
    ///
    /// Never.
    #[circuit_breaker(name = "lints-async", failure_rate = 50, window = "30s", min_calls = 5, fallback = Self::cached)]
    pub async fn get(&self, id: u32) -> Result<u32, Error> {
        Ok(id)
    }

    /// # Errors
    ///
    /// Never.
    #[circuit_breaker(name = "lints-mut", slow = "1s", slow_rate = 50)]
    pub fn bump(&mut self) -> Result<&mut u32, Error> {
        self.hits += 1;
        Ok(&mut self.hits)
    }

    /// # Errors
    ///
    /// Never.
    #[circuit_breaker(
        name = "lints-arc",
        half_open_calls = 3,
        successes = 2,
        max_concurrent = 8
    )]
    pub fn shared(self: Arc<Self>) -> Result<u32, Error> {
        Ok(self.hits)
    }
}

/// # Errors
///
/// On timeout.
#[cfg(feature = "tokio")]
#[circuit_breaker(name = "lints-timeout", timeout = "1s", probe_timeout = "5s")]
pub async fn bounded(id: u32) -> Result<u32, Error> {
    Ok(id)
}

#[test]
fn lint_clean_functions_run() {
    assert_eq!(fetch(1).unwrap(), 1);
    unit();
    assert_eq!(generic(1).unwrap(), vec![1, 1]);
    let items = vec!["a".to_owned()];
    assert_eq!(borrow(&items).unwrap(), "a");
    let mut client = Client { hits: 0 };
    *client.bump().unwrap() += 1;
    assert_eq!(Arc::new(client).shared().unwrap(), 2);
}
