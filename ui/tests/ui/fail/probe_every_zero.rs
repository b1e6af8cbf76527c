//! `probe_every` must be longer than zero.
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

#[circuit_breaker(probe = health, probe_every = "0s")]
fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
