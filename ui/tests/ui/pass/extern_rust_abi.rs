//! `extern "Rust"` is the ABI every Rust function has: written out, it is wrapped as usual.
#![deny(warnings)]
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker]
extern "Rust" fn get(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {
    assert_eq!(get(1).unwrap(), 1);
}
