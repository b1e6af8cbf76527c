//! `fallback` is the path of a function, not a closure.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(fallback = || Ok(()))]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
