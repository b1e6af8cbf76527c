//! `timeout` uses tokio's timer: without the `tokio` feature, the error names the feature.
use breakerbox::{Rejected, Timeout, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

impl From<Timeout> for Error {
    fn from(_: Timeout) -> Self {
        Error
    }
}

#[circuit_breaker(timeout = "500ms")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
