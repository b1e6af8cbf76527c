//! A value is written after `=`, not in parentheses.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures(5))]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
