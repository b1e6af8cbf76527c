//! `replay` journals every argument in a tuple of their types: one under `#[cfg]` may not be
//! there, and is told so rather than reported as a missing value.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "memory")]
fn send(id: u64, #[cfg(any())] tenant: String) -> Result<u64, Error> {
    Ok(id)
}

fn main() {
    let _ = send(1);
}
