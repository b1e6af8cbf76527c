//! A key given twice is reported at the second one.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failures = 3, open_for = "1s", failures = 4)]
fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
