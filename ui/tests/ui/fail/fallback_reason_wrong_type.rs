//! A `fallback_with_reason` fallback whose last parameter is not a `FallbackReason`: the error
//! points at the fallback path and names both types.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

fn cached(_id: u32, _reason: Rejected) -> Result<String, Error> {
    Ok(String::new())
}

#[circuit_breaker(fallback_with_reason = cached)]
fn user(id: u32) -> Result<String, Error> {
    Ok(format!("{id}"))
}

fn main() {}
