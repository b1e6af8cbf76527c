//! `fallback`, `probe` and `classify` take the path of a function: not a number,
//! nor a method call on a value.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(fallback = 5)]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(fallback = cache.get)]
fn call1() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(probe = client.health)]
fn call2() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(classify = 3)]
fn call3() -> Result<(), Error> {
    Ok(())
}

fn main() {}
