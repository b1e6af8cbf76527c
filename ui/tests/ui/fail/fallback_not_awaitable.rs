//! An async function's fallback is awaited, so it must be async too.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn cached(_id: u32) -> Result<String, Error> {
    Ok(String::new())
}

#[circuit_breaker(fallback = cached)]
async fn user(id: u32) -> Result<String, Error> {
    Ok(id.to_string())
}

fn main() {}
