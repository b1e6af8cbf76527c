//! A space and a unit people write (`sec`): the advice is itself a valid duration.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "2 sec")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
