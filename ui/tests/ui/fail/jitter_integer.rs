//! Jitter is a fraction, not a percentage.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(jitter = 10)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
