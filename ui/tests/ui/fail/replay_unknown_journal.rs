//! `replay` is "memory", "disk" or "fleet".
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "file")]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
