//! `config` names a base as a string literal.
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

#[circuit_breaker(config = fast)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = cached;
}
