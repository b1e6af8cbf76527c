//! A key is one name: a path in its place is an unknown key, with the list of keys.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(breaker::failures = 3)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
