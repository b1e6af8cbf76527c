//! A replayed function without `classify` returns a `Result`, whose `Err` is a failed
//! replay.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "memory")]
fn call(id: u32) -> u32 {
    id
}

fn main() {}
