//! Without `open_for`, `max_open_for` is checked against the default `open_for`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(max_open_for = "30s")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
