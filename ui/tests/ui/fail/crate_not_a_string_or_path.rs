//! `crate` is a path, quoted or not: a number is neither.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(crate = 5)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
