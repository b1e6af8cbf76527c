//! A fallback that returns another type than the function: the error points at the fallback path.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn cached(_id: u32) -> Option<String> {
    None
}

#[circuit_breaker(fallback = cached)]
fn user(id: u32) -> Result<String, Error> {
    Ok(id.to_string())
}

fn main() {}
