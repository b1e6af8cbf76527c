//! A probe takes no arguments, so it cannot check one key's service.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn health() -> bool {
    true
}

#[circuit_breaker(key = host, probe = health)]
fn call(host: &str) -> Result<u32, Error> {
    Ok(host.len() as u32)
}

fn main() {}
