//! A journaled argument outlives the call: a borrowed one is an error at that argument.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "memory")]
fn call(name: &'static str, id: &u32) -> Result<u32, Error> {
    Ok(name.len() as u32 + id)
}

fn main() {}
