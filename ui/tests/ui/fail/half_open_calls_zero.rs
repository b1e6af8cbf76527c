//! A half-open breaker needs at least one probe.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(half_open_calls = 0)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
