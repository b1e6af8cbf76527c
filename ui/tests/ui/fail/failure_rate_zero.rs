//! A failure rate is a percentage from 1 to 100.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 0)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
