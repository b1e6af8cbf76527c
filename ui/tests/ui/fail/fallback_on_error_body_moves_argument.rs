//! With `fallback_on = "error"`, the fallback needs the arguments after the body failed, so
//! the body may not move them.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn cached(name: String) -> Result<String, Error> {
    Ok(name)
}

#[circuit_breaker(fallback = cached, fallback_on = "error")]
fn greet(name: String) -> Result<String, Error> {
    let owned = name;
    Ok(owned)
}

fn main() {}
