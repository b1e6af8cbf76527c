//! A window only matters to `failure_rate` or `slow_rate`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(window = 50)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
