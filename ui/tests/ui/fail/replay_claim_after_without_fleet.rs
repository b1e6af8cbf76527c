//! `replay_claim_after` is when the fleet's instances take over a dead one's entries: a memory
//! or disk journal is one process's, so it is an error there.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay = "disk", replay_claim_after = "1m")]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
