//! A duration with an unknown unit lists the valid units.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "2x")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
