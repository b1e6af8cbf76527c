//! Modules named like the crates the generated code uses do not capture its paths
//! (tracing #3119/#3126 broke for users with a module named `tracing`).
#![allow(dead_code)]

mod core {}
mod std {}
mod breakerbox {
    pub mod __private {}
}

#[derive(Debug)]
pub struct Error;

impl From<::breakerbox::Rejected> for Error {
    fn from(_: ::breakerbox::Rejected) -> Self {
        Error
    }
}

#[::breakerbox::circuit_breaker(open_for = "2s")]
fn call() -> Result<u32, Error> {
    Ok(1)
}

mod nested {
    mod core {}

    #[::breakerbox::circuit_breaker]
    pub fn call() -> ::core::result::Result<u32, super::Error> {
        Ok(2)
    }
}

fn main() {
    assert_eq!(call().unwrap(), 1);
    assert_eq!(nested::call().unwrap(), 2);
}
