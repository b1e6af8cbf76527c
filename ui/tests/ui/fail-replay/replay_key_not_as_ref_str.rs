//! A `replay_key` that is not string-like is reported at the expression.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "memory", replay_key = id)]
fn call(id: u64) -> Result<u64, Error> {
    Ok(id)
}

fn main() {}
