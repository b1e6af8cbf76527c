//! A unit other libraries spell differently is answered with ours.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "2sec")]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(open_for = "1day")]
fn call1() -> Result<(), Error> {
    Ok(())
}

fn main() {}
