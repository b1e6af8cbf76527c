//! Keys are separated by commas: a missing one is a syntax error at the next key.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures = 5 open_for = "30s")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
