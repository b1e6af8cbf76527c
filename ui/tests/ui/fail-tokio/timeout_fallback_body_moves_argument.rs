//! With `timeout` and `fallback`, the fallback needs the arguments after a timeout, so the
//! body may not move them.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

async fn cached(name: String) -> Result<String, Error> {
    Ok(name)
}

#[circuit_breaker(timeout = "1s", fallback = cached)]
async fn greet(name: String) -> Result<String, Error> {
    let owned = name;
    Ok(owned)
}

fn main() {}
