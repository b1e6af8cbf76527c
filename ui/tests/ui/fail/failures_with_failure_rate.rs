//! `failures` and `failure_rate` are two different trip policies.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures = 5, failure_rate = 50)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
