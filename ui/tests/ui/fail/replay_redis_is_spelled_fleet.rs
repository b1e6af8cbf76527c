//! A journal in Redis is spelled `replay = "fleet"`: `"redis"` gets an error that says so.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "redis")]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
