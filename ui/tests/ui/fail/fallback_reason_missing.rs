//! A `fallback_with_reason` fallback without the reason parameter: the error points at the
//! fallback path and says which argument is extra.
use breakerbox::circuit_breaker;

#[derive(Debug)]
pub struct Error;

fn cached(_id: u32) -> Result<String, Error> {
    Ok(String::new())
}

#[circuit_breaker(fallback_with_reason = cached)]
fn user(id: u32) -> Result<String, Error> {
    Ok(format!("{id}"))
}

fn main() {}
