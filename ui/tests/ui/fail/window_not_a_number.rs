//! A window is a number of calls or a duration string.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 50, window = true)]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(failure_rate = 50, window = -10)]
fn call1() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(failure_rate = 50, window = 2.5)]
fn call2() -> Result<(), Error> {
    Ok(())
}

fn main() {}
