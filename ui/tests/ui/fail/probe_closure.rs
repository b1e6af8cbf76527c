//! `probe` takes a function's path, not a closure.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(probe = || true)]
fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
