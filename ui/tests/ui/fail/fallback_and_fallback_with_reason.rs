//! `fallback` and `fallback_with_reason` together: one fallback only.
use breakerbox::{FallbackReason, circuit_breaker};

#[derive(Debug)]
pub struct Error;

fn cached(_id: u32) -> Result<String, Error> {
    Ok(String::new())
}

fn explained(_id: u32, _reason: FallbackReason) -> Result<String, Error> {
    Ok(String::new())
}

#[circuit_breaker(fallback = cached, fallback_with_reason = explained)]
fn user(id: u32) -> Result<String, Error> {
    Ok(format!("{id}"))
}

fn main() {}
