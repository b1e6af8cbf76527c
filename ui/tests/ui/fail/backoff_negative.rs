//! `backoff` and `jitter` cannot be negative; the message gives each one's range.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(backoff = -2.0)]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(jitter = -0.1)]
fn call1() -> Result<(), Error> {
    Ok(())
}

fn main() {}
