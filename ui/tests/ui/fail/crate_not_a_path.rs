//! `crate` is the path where breakerbox is.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(crate = "not a path")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
