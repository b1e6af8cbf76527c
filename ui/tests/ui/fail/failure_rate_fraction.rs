//! A rate written as a fraction: the fix says which percentage to write.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 0.5)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
