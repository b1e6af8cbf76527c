//! A fallback that is the function itself would call itself forever while the breaker is open.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(fallback = user)]
fn user(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
