//! `latency`, `health` and `critical` are booleans: unquoted `true` or `false`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(latency = 1)]
fn timed() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(critical = "true")]
fn critical() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(health = yes)]
fn counted() -> Result<(), Error> {
    Ok(())
}

fn main() {}
