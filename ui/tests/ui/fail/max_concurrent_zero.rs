//! A bulkhead of zero would reject every call.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(max_concurrent = 0)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
