//! `probe_every` is a duration string, checked like every other duration.
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

#[circuit_breaker(probe = health, probe_every = 5)]
fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
