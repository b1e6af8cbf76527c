//! `extern "C"` functions are not wrapped.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker]
extern "C" fn call() -> u32 {
    0
}

fn main() {}
