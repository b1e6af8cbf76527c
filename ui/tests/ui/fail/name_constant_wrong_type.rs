//! A name constant must be a `&str`: the type error points at the constant.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

const USERS: u32 = 7;

#[circuit_breaker(name = USERS)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
