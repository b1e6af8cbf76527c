//! A duration has no sign.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "+30s")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
