//! `fallback_on` with each fallback form, on sync and async functions and methods.
use breakerbox::{FallbackReason, Outcome, Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

fn cached(id: u32) -> Result<u32, Error> {
    Ok(id)
}

fn told(id: u32, _reason: FallbackReason) -> Result<u32, Error> {
    Ok(id)
}

fn by_value(r: &Result<u32, Error>) -> Outcome {
    Outcome::of_result(r)
}

#[circuit_breaker(fallback = cached, fallback_on = "error")]
fn plain(id: u32) -> Result<u32, Error> {
    Ok(id)
}

#[circuit_breaker(fallback_with_reason = told, fallback_on = "error", classify = by_value)]
fn with_reason(id: u32) -> Result<u32, Error> {
    Ok(id)
}

#[circuit_breaker(fallback = cached, fallback_on = "rejected")]
fn moves(id: u32) -> Result<u32, Error> {
    let owned = id;
    Ok(owned)
}

pub struct Client(String);

impl Client {
    #[circuit_breaker(fallback = Self::stale, fallback_on = "error")]
    pub fn name(&self) -> Result<&str, Error> {
        Ok(&self.0)
    }

    fn stale(&self) -> Result<&str, Error> {
        Ok("stale")
    }

    #[circuit_breaker(fallback = Self::stale_async, fallback_on = "error")]
    pub async fn name_async(&self) -> Result<String, Error> {
        Ok(self.0.clone())
    }

    async fn stale_async(&self) -> Result<String, Error> {
        Ok("stale".into())
    }
}

fn main() {
    let _ = (plain(1), with_reason(2), moves(3), Client("x".into()).name().map(str::len));
    let _ = Client("y".into()).name_async();
}
