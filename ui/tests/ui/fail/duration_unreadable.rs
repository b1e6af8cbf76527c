//! A duration that no valid one is close to: the message says the form instead
//! of a guess.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "2 weeks")]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(open_for = "-soon")]
fn call1() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(open_for = "+later")]
fn call2() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(open_for = "1h30x")]
fn call3() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(open_for = "2fortnights")]
fn call4() -> Result<(), Error> {
    Ok(())
}

fn main() {}
