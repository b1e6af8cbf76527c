//! More successes than a half-open round admits could never close the breaker.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(half_open_calls = 2, successes = 3)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
