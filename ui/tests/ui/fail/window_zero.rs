//! A count window holds 1 to 10000 calls.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 50, window = 0)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
