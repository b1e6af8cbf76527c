//! A breaker name is a string or a `&str` constant.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(name = 42)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
