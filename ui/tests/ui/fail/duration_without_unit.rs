//! A duration written as a bare number: the fix adds the unit.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = 30)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
