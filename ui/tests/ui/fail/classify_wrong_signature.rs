//! A classifier must be `fn(&ReturnType) -> Outcome`: the error points at the classify path.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn classify(result: Result<u32, Error>) -> bool {
    result.is_ok()
}

#[circuit_breaker(classify = classify)]
fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {}
