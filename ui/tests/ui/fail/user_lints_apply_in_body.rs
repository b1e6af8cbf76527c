//! The user's lints still apply to the body: the expansion allows nothing around it.
#![deny(unused_variables)]

use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker]
pub fn call() -> Result<u32, Error> {
    let unused = 1;
    Ok(2)
}

fn main() {}
