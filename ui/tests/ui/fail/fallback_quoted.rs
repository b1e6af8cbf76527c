//! `fallback` is a path, not a string.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(fallback = "cached")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn cached() -> Result<(), Error> {
    Ok(())
}

fn main() {}
