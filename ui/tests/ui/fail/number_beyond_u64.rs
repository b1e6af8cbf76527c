//! A number too large for any integer type is reported with the key's bound.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures = 99999999999999999999999)]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(failure_rate = 99999999999999999999999)]
fn call1() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(failure_rate = 50, window = 99999999999999999999999)]
fn call2() -> Result<(), Error> {
    Ok(())
}

fn main() {}
