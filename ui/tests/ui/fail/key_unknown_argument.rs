//! `key` names an argument the function does not have: reported at the name.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(name = "api", key = host)]
fn call(url: &str) -> Result<(), Error> {
    let _ = url;
    Ok(())
}

fn main() {}
