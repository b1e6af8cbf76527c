//! Inner attributes stay at the top of the body and keep applying to all of it.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker]
fn call() -> Result<u32, Error> {
    #![allow(unused_variables)]
    //! Inner docs are inner attributes too.
    let unused = 1;
    Ok(2)
}

#[circuit_breaker]
async fn call_async() -> Result<u32, Error> {
    #![allow(unused_variables)]
    let unused = 1;
    Ok(2)
}

fn main() {
    call().unwrap();
    let _ = call_async();
}
