//! `slow_rate` needs `slow`, the duration from which a call is slow.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(slow_rate = 50)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
