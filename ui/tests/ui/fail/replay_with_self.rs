//! A replay runs the body later from a task, where there is no `self`.
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
    #[circuit_breaker(replay = "memory")]
    pub fn send(&self, id: u32) -> Result<u32, Error> {
        Ok(id)
    }
}

fn main() {}
