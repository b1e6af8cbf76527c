//! A health probe returns `bool` or a `Result`: the error points at the probe path.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn health() -> u32 {
    200
}

#[circuit_breaker(probe = health)]
fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
