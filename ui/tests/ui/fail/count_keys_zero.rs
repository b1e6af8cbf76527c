//! Every count is at least 1; each key's message says what it counts.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(failure_rate = 50, min_calls = 0)]
fn call0() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(successes = 0)]
fn call1() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(key = "a", max_keys = 0)]
fn call2() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(replay = "memory", replay_max = 0)]
fn call3() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(replay = "memory", replay_rate = 0)]
fn call4() -> Result<(), Error> {
    Ok(())
}

#[circuit_breaker(replay = "memory", replay_attempts = 0)]
fn call5() -> Result<(), Error> {
    Ok(())
}

fn main() {}
