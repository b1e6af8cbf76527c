//! A number written as a string: the fix is to drop the quotes.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures = "5")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
