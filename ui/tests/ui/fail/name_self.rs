//! The name is read in a static, where `Self` is unknown: name the type instead.
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
    const NAME: &'static str = "client";

    #[circuit_breaker(name = Self::NAME)]
    fn call(&self) -> Result<u32, Error> {
        Ok(1)
    }
}

fn main() {}
