//! A count must fit in a u32.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures = 5000000000)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
