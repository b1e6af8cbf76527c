//! `half_open_calls` and `successes` are counted in 16 bits: at most 65535.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(half_open_calls = 70000)]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(half_open_calls = 70000, successes = 70000)]
fn call1() -> Result<(), Error> {
    Ok(())
}

fn main() {}
