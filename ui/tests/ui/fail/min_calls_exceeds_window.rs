//! A `min_calls` larger than the count window could never be reached.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 50, window = 20, min_calls = 50)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
