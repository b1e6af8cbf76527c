//! `fallback_on` is a string.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn cached() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(fallback = cached, fallback_on = error)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = cached;
}
