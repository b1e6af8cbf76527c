//! Jitter is a fraction from 0.0 to 1.0.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(jitter = 1.5)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
