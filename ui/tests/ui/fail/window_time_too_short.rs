//! A time window is split into 10 buckets, so it lasts at least 10ms.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 50, window = "5ms")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
