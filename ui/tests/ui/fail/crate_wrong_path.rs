//! `crate` names a path where breakerbox is not: one error, at the path.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

pub mod not_breakerbox {}

#[circuit_breaker(crate = not_breakerbox)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
