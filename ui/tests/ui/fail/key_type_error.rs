//! A `key` expression with a type error is reported at the expression.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

pub struct Url {
    pub host: String,
}

#[circuit_breaker(name = "api", key = url.hostname())]
fn call(url: &Url) -> Result<(), Error> {
    let _ = url;
    Ok(())
}

fn main() {}
