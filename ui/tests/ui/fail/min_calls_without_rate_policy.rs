//! `min_calls` only matters to `failure_rate` or `slow_rate`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(min_calls = 10)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
