//! A backoff multiplier below 1.0 would shrink the open time.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(backoff = 0.5)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
