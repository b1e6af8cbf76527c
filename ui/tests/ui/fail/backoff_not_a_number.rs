//! `backoff` and `jitter` are number literals; each one's example is in its range.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(backoff = fast)]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(jitter = high)]
fn call1() -> Result<(), Error> {
    Ok(())
}

fn main() {}
