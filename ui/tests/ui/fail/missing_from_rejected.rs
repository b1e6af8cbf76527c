//! Without a fallback, the error type must implement `From<breakerbox::Rejected>`.
use breakerbox::circuit_breaker;

#[derive(Debug)]
pub struct Error;

#[circuit_breaker]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
