//! An `impl Trait` argument has no type a journal can hold.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "memory")]
fn call(id: impl Into<u32>) -> Result<u32, Error> {
    Ok(id.into())
}

fn main() {}
