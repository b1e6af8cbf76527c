//! The fleet journal writes each argument to Redis: one that is not `Serialize +
//! DeserializeOwned` is an error at that argument.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[derive(Clone)]
pub struct Order {
    pub id: u32,
}

#[circuit_breaker(replay = "fleet")]
async fn call(id: u32, order: Order) -> Result<u32, Error> {
    Ok(id + order.id)
}

fn main() {}
