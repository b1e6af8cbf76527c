//! A replayed function's arguments are journaled by name: a pattern has none.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "memory")]
fn call((id, count): (u32, u32)) -> Result<u32, Error> {
    Ok(id + count)
}

fn main() {}
