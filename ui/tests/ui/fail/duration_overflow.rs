//! A duration longer than u64::MAX nanoseconds.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(open_for = "6000000h")]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
