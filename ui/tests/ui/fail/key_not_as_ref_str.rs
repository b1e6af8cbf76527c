//! A `key` that is not string-like (`AsRef<str>`) is reported at the expression, with how
//! to make it one.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(name = "tenants", key = tenant_id)]
fn call(tenant_id: u64) -> Result<(), Error> {
    let _ = tenant_id;
    Ok(())
}

fn main() {}
