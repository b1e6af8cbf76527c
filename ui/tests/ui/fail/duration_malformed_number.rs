//! A duration's number has at most one dot.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "1.5.2s")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
