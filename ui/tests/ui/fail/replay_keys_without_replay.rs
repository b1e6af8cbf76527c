//! Every `replay_*` key needs `replay`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay_max = 100, replay_ttl = "1h", replay_rate = 10, replay_attempts = 3, replay_claim_after = "30s")]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
