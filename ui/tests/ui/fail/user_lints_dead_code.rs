//! An unused annotated function is still reported as dead code: the expansion keeps the
//! user's own tokens (tracing #3108: call-site braces switched `dead_code` off).
#![deny(dead_code)]

use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker]
fn never_called() -> Result<u32, Error> {
    Ok(2)
}

fn main() {}
