//! A count cannot be negative.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures = -1)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
