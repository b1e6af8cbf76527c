//! `timeout` with the `tokio` feature, with and without fallback, under strict lints.
#![deny(warnings, clippy::pedantic)]

use breakerbox::{Rejected, Timeout, circuit_breaker};

#[derive(Debug)]
pub enum Error {
    Rejected(Rejected),
    Timeout(Timeout),
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Error::Rejected(rejected)
    }
}

impl From<Timeout> for Error {
    fn from(timeout: Timeout) -> Self {
        Error::Timeout(timeout)
    }
}

#[circuit_breaker(timeout = "500ms")]
async fn bounded(id: u32) -> Result<u32, Error> {
    Ok(id)
}

async fn cached(id: &str) -> Result<usize, Error> {
    Ok(id.len())
}

#[circuit_breaker(timeout = "2s", fallback = cached)]
async fn bounded_with_fallback(id: &str) -> Result<usize, Error> {
    Ok(id.len() + 1)
}

mod reexport {
    pub use ::breakerbox as breaker_lib;
}

/// The feature guard is found through a renamed crate too.
#[circuit_breaker(crate = "crate::reexport::breaker_lib", timeout = "1s")]
async fn renamed(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    runtime.block_on(async {
        assert_eq!(bounded(1).await.unwrap(), 1);
        assert_eq!(renamed(4).await.unwrap(), 4);
        assert_eq!(bounded_with_fallback("ab").await.unwrap(), 3);
        if let Err(Error::Rejected(_) | Error::Timeout(_)) = bounded(2).await {
            unreachable!();
        }
    });
}
