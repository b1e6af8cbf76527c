//! `config` is written with the characters of a bare TOML key.
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

#[circuit_breaker(config = "fast backends")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = cached;
}
