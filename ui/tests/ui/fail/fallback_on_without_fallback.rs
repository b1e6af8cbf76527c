//! `fallback_on` needs a fallback.
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

#[circuit_breaker(fallback_on = "error")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = cached;
}
