//! `replay_key` names a journal entry: without `replay` there is no journal.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(replay_key = id.to_string())]
fn call(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn main() {}
