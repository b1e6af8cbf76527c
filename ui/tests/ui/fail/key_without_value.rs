//! A key without a value says how to write one.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
