//! A fallback that takes fewer arguments than the function: the error points at the fallback path.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn cached() -> Result<String, Error> {
    Ok(String::new())
}

#[circuit_breaker(fallback = cached)]
fn user(id: u32, region: &str) -> Result<String, Error> {
    Ok(format!("{id}@{region}"))
}

fn main() {}
