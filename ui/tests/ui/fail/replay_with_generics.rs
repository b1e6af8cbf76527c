//! A replay journals arguments of one type: no generic parameters.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "memory")]
fn call<T: Clone + Send + 'static>(value: T) -> Result<T, Error> {
    Ok(value)
}

fn main() {}
