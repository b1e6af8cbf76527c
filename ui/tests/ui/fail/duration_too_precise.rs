//! A duration is a whole number of nanoseconds.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "1.5ns")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
