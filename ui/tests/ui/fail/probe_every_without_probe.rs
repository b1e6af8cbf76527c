//! `probe_every` without `probe` would do nothing: the error is at `probe_every`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(probe_every = "2s")]
fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
