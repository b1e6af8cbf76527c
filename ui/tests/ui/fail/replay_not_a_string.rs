//! `replay` is a quoted string.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = memory)]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
