//! Async health probes (feature `tokio`): an `async fn` returning `bool` or a `Result`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

async fn ping() -> bool {
    true
}

pub struct Client;

impl Client {
    async fn health() -> Result<(), std::io::Error> {
        Ok(())
    }

    #[circuit_breaker(probe = Client::health)]
    pub async fn get(&self) -> Result<u32, Error> {
        Ok(1)
    }
}

#[circuit_breaker(probe = ping, probe_every = "1s")]
fn a() -> Result<u32, Error> {
    Ok(1)
}

fn main() {
    let _ = (a(), Client.get());
}
