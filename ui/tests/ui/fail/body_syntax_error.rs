//! A syntax error in the body is reported where it is, not as a misplaced attribute.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker]
fn call() -> Result<u32, Error> {
    let = 5;
    Ok(1)
}

fn main() {}
