//! `crate = "…"` for users who rename or re-export breakerbox.
extern crate breakerbox as cb;

#[derive(Debug)]
pub struct Error;

impl From<cb::Rejected> for Error {
    fn from(_: cb::Rejected) -> Self {
        Error
    }
}

/// A library that re-exports breakerbox for its users.
mod deps {
    pub use ::breakerbox as breaker_lib;
}

#[cb::circuit_breaker(crate = "cb", failures = 2)]
fn renamed() -> Result<u32, Error> {
    Ok(1)
}

#[cb::circuit_breaker(crate = "::cb")]
fn absolute() -> Result<u32, Error> {
    Ok(2)
}

mod nested {
    #[crate::deps::breaker_lib::circuit_breaker(crate = "crate::deps::breaker_lib")]
    pub fn reexported() -> Result<u32, super::Error> {
        Ok(3)
    }

    // tokio-macros also accepts the path unquoted.
    #[cb::circuit_breaker(crate = crate::deps::breaker_lib)]
    pub fn unquoted() -> Result<u32, super::Error> {
        Ok(4)
    }
}

fn main() {
    assert_eq!(renamed().unwrap(), 1);
    assert_eq!(absolute().unwrap(), 2);
    assert_eq!(nested::reexported().unwrap(), 3);
    assert_eq!(nested::unquoted().unwrap(), 4);
}
