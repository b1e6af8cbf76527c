//! `replay` on sync and async functions, memory and disk, with a key, `classify` and
//! `timeout`.
use breakerbox::{Outcome, Timeout};
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

impl From<Timeout> for Error {
    fn from(_: Timeout) -> Self {
        Error
    }
}

#[derive(Clone)]
pub struct Order {
    pub id: u32,
}

#[circuit_breaker(replay = "memory", replay_key = order.id.to_string(), replay_max = 100, replay_ttl = "10m", replay_rate = 5, replay_attempts = 3)]
fn send(order: Order, mut tries: u32) -> Result<u32, Error> {
    tries += 1;
    Ok(order.id + tries)
}

#[circuit_breaker(replay = "disk", timeout = "1s")]
async fn record(id: u64, note: String) -> Result<u64, Error> {
    if note.is_empty() {
        return Err(Error);
    }
    Ok(id)
}

fn by_code(code: &Result<u16, Error>) -> Outcome {
    match code {
        Ok(200) => Outcome::Success,
        _ => Outcome::Failure,
    }
}

#[circuit_breaker(replay = "memory", classify = by_code)]
async fn post(body: Vec<u8>) -> Result<u16, Error> {
    Ok(if body.is_empty() { 400 } else { 200 })
}

fn main() {}
