//! With `replay` a rejected call answers with its journaled `Rejected`, not a fallback.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn cached(id: u32) -> Result<u32, Error> {
    Ok(id)
}

#[circuit_breaker(replay = "memory", fallback = cached)]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
