//! Without a fallback, a timed-out call is returned as an error: the function must
//! return a `Result`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(timeout = "1s")]
async fn call() -> u32 {
    1
}

fn main() {}
