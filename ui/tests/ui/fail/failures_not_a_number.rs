//! A count is a number literal, not a name or an expression.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures = five)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
