//! A duration is a string with a unit, not a float or an expression.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = 1.5)]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(open_for = std::time::Duration::from_secs(1))]
fn call1() -> Result<(), Error> {
    Ok(())
}

fn main() {}
