//! `replay = "fleet"` journals in the fleet's Redis: with `replay` but without `redis`, the
//! error says which feature is missing, and nothing else.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "fleet")]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
