//! An unknown key is reported at the key, with a suggestion and the list of valid keys.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure = 3)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
