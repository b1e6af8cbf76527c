//! An unknown key close to no valid key lists the valid keys without a guess.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(colour = "red")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
