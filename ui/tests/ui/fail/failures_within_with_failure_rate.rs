//! `failures_within` belongs to the consecutive `failures` policy.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 50, failures_within = "10s")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
