//! A keyed family has no replay: the error points at `key`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(key = host.as_str(), replay = "memory")]
fn call(host: String) -> Result<u32, Error> {
    Ok(host.len() as u32)
}

fn main() {}
