//! `latency`, `health` and `critical` reach the breaker's config.
use breakerbox::{Rejected, circuit_breaker, registry};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(name = "ui-latency", latency = true, health = false, critical = true)]
fn timed() -> Result<(), Error> {
    Ok(())
}

fn main() {
    timed().unwrap();
    let b = registry().get("ui-latency").unwrap();
    assert!(b.config().latency() && !b.config().health() && b.config().critical());
    assert_eq!(b.latency().unwrap().calls, 1);
}
