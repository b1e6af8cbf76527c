//! `max_keys` and `idle_for` configure a keyed family: without `key` they are errors at
//! the key.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(name = "api", max_keys = 100, idle_for = "5m")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
