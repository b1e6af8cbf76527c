//! Blocking health probes: `bool` or any `Result`, a free function or an associated
//! function named by its type, on sync and async functions and methods.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn ping() -> bool {
    true
}

fn check() -> Result<(), std::io::Error> {
    Ok(())
}

pub struct Client;

impl Client {
    fn health() -> Result<u16, String> {
        Ok(200)
    }

    #[circuit_breaker(probe = Client::health, probe_every = "2s")]
    pub fn get(&self) -> Result<u32, Error> {
        Ok(1)
    }

    #[circuit_breaker(probe = crate::ping)]
    pub async fn get_async(&self) -> Result<u32, Error> {
        Ok(1)
    }
}

#[circuit_breaker(probe = ping)]
fn a() -> Result<u32, Error> {
    Ok(1)
}

#[circuit_breaker(probe = check, probe_every = "500ms", open_for = "30s")]
async fn b() -> Result<u32, Error> {
    Ok(1)
}

fn main() {
    let _ = (a(), b(), Client.get(), Client.get_async());
}
