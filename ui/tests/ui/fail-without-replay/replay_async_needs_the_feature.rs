//! An `async fn` without the `replay` feature: the error says so, and nothing else.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "memory", replay_key = id.to_string())]
async fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
