//! A trait method without a body has nothing to wrap.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

trait Users {
    #[circuit_breaker]
    fn get(&self, id: u32) -> Result<String, Error>;
}

fn main() {}
