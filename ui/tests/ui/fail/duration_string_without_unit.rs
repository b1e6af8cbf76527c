//! A quoted number without a unit is not a duration.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "30")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
