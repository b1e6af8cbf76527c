//! An async probe runs on tokio: without the `tokio` feature the error says so.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

async fn health() -> bool {
    true
}

#[circuit_breaker(probe = health)]
fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
