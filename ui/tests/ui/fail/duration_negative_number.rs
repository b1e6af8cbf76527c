//! A duration written as a negative number.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = -5)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
