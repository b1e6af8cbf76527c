//! `key = …` over arguments of every shape: borrowed, owned and moved by the body, `self`,
//! generic, and in an `async fn`; with `max_keys` and `idle_for`.
use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

#[circuit_breaker(name = "hosts", key = url.split('/').next().unwrap_or(""), max_keys = 100, idle_for = "5m")]
fn borrowed(url: &str) -> Result<usize, Error> {
    Ok(url.len())
}

#[circuit_breaker(name = "tenants", key = tenant)]
fn moved(tenant: String) -> Result<String, Error> {
    Ok(tenant)
}

#[circuit_breaker(name = "generic", key = key)]
fn generic<K: AsRef<str>>(key: K) -> Result<K, Error> {
    Ok(key)
}

pub struct Client {
    region: String,
}

impl Client {
    #[circuit_breaker(name = "regions", key = &self.region, fallback = Self::cached)]
    fn region(&self, id: u32) -> Result<u32, Error> {
        Ok(id)
    }

    fn cached(&self, id: u32) -> Result<u32, Error> {
        let _ = &self.region;
        Ok(id)
    }

    #[circuit_breaker(name = "shards", key = format!("{}-{shard}", self.region))]
    async fn shard(&self, shard: u16) -> Result<u16, Error> {
        Ok(shard)
    }
}

fn main() {
    let _ = borrowed("a/b");
    let _ = moved("t".to_owned());
    let _ = generic("k");
    let client = Client { region: "eu".to_owned() };
    let _ = client.region(1);
    let _ = client.shard(2);
}
