//! `replay = "fleet"` on sync and async functions, with a key, the bounds and `timeout`.
use breakerbox::{Rejected, Timeout, circuit_breaker};

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

#[circuit_breaker(replay = "fleet", replay_key = format!("{id}"), replay_max = 100, replay_ttl = "10m", replay_rate = 5, replay_attempts = 3)]
fn send(id: u64, body: Vec<u8>) -> Result<usize, Error> {
    Ok(body.len() + id as usize)
}

#[circuit_breaker(replay = "fleet", timeout = "1s", replay_claim_after = "2m")]
async fn record(id: u64, note: String) -> Result<u64, Error> {
    if note.is_empty() {
        return Err(Error);
    }
    Ok(id)
}

fn main() {}
