//! A C-variadic function cannot be wrapped.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker()]
unsafe extern "C" fn call(n: u32, mut args: ...) -> Result<u32, Error> {
    let _ = &mut args;
    Ok(n)
}

fn main() {}
