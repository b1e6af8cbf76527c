//! With a fallback, each argument is passed on by name, so patterns cannot be.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn cached(_pair: (u32, u32)) -> Result<u32, Error> {
    Ok(0)
}

#[circuit_breaker(fallback = cached)]
fn sum((a, b): (u32, u32)) -> Result<u32, Error> {
    Ok(a + b)
}

fn main() {}
