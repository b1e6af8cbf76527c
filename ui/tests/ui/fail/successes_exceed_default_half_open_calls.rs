//! `successes` above the default `half_open_calls` (1) could never close the breaker.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(successes = 2)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
