//! The memory journal keeps a copy of each argument: one that is not `Clone` is an error
//! at that argument.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

pub struct Order {
    pub id: u32,
}

#[circuit_breaker(replay = "memory")]
fn call(id: u32, order: Order) -> Result<u32, Error> {
    Ok(id + order.id)
}

fn main() {}
