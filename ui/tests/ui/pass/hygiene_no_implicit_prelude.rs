//! The expansion names nothing from the prelude.
#![no_implicit_prelude]

extern crate breakerbox;
extern crate std;

use std::result::Result::{self, Ok};

#[derive(Debug)]
pub struct Error;

impl std::convert::From<breakerbox::Rejected> for Error {
    fn from(_: breakerbox::Rejected) -> Self {
        Error
    }
}

#[breakerbox::circuit_breaker(failures = 2, open_for = "1s")]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

async fn fallback(id: u32) -> Result<u32, Error> {
    Ok(id)
}

#[breakerbox::circuit_breaker(fallback = fallback)]
async fn call_async(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {
    let _ = call(1);
    let _ = call_async(1);
}
