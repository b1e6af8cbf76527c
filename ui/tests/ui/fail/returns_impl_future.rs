//! A function that returns a future would be measured when the future is created.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker]
fn call() -> impl Future<Output = Result<(), Error>> {
    async { Ok(()) }
}

fn main() {}
