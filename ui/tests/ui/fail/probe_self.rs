//! The probe is stored in a static, where `Self` is unknown: name the type instead.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

pub struct Client;

impl Client {
    fn health() -> bool {
        true
    }

    #[circuit_breaker(probe = Self::health)]
    fn call(&self) -> Result<u32, Error> {
        Ok(1)
    }
}

fn main() {}
