//! Without `window`, the window is the default 100 calls: `min_calls` above it
//! could never be reached.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 50, min_calls = 150)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
