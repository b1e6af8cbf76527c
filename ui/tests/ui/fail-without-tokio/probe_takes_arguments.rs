//! A health probe takes no arguments: the error points at the probe path (without the
//! `tokio` feature rustc names the arity; with it, what a probe may be).
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn health(url: &str) -> bool {
    !url.is_empty()
}

#[circuit_breaker(probe = health)]
fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
