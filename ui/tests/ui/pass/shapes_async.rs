//! Every async function shape users write compiles unchanged under the attribute.
use std::fmt::Display;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub enum Error {
    Missing,
    Rejected(Rejected),
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Error::Rejected(rejected)
    }
}

/// Runs a future that never waits.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the future waited"),
    }
}

#[circuit_breaker]
pub async fn free(id: u32) -> Result<u32, Error> {
    Ok(id)
}

async fn cached<T: Default>(_id: u32) -> Result<T, Error> {
    Ok(T::default())
}

#[circuit_breaker(fallback = cached)]
async fn generic<T>(id: u32) -> Result<T, Error>
where
    T: From<u32> + Default,
{
    Ok(T::from(id))
}

#[circuit_breaker]
async fn first<'a>(items: &'a [String]) -> Result<&'a str, Error> {
    items.first().map(String::as_str).ok_or(Error::Missing)
}

#[circuit_breaker]
async fn first_elided(items: &[String]) -> Result<&str, Error> {
    let first = items.first().ok_or(Error::Missing)?;
    Ok(first)
}

#[circuit_breaker]
async fn consume(items: Vec<String>) -> Result<usize, Error> {
    let moved = items;
    Ok(moved.len())
}

#[circuit_breaker]
async fn patterns((a, b): (u32, u32), mut extra: Vec<u32>, _: bool) -> Result<u32, Error> {
    extra.push(a + b);
    Ok(extra.iter().sum())
}

#[circuit_breaker]
async fn evens(limit: impl Into<u32>) -> Result<impl Iterator<Item = u32>, Error> {
    let limit = limit.into();
    Ok((0..limit).filter(|n| n % 2 == 0))
}

async fn show_fallback(value: impl Display) -> Result<String, Error> {
    Ok(format!("cached {value}"))
}

#[circuit_breaker(fallback = show_fallback)]
async fn show(value: impl Display) -> Result<String, Error> {
    Ok(value.to_string())
}

#[circuit_breaker]
async unsafe fn read(pointer: *const u32) -> Result<u32, Error> {
    // SAFETY: the caller passes a valid pointer.
    Ok(unsafe { *pointer })
}

#[circuit_breaker]
async fn early(flag: bool) -> Result<u32, Error> {
    if flag {
        return Ok(0);
    }
    let n = free(3).await?;
    Ok(n)
}

pub struct Client {
    hits: u32,
}

impl Client {
    async fn cached(&self, _id: u32) -> Result<u32, Error> {
        Ok(0)
    }

    #[circuit_breaker(fallback = Self::cached)]
    async fn get(&self, id: u32) -> Result<u32, Error> {
        Ok(id + self.hits)
    }

    #[circuit_breaker]
    async fn hits_mut(&mut self) -> Result<&mut u32, Error> {
        self.hits += 1;
        Ok(&mut self.hits)
    }

    #[circuit_breaker]
    async fn into_hits(self) -> Result<u32, Error> {
        Ok(self.hits)
    }

    #[circuit_breaker]
    async fn shared(self: Arc<Self>) -> Result<u32, Error> {
        Ok(self.hits)
    }
}

/// Native `async fn` in traits, in the impl and as a default body.
pub trait Users {
    async fn name(&self, id: u32) -> Result<String, Error>;

    #[circuit_breaker]
    async fn id(&self) -> Result<u32, Error> {
        Ok(1)
    }
}

impl Users for Client {
    #[circuit_breaker]
    async fn name(&self, id: u32) -> Result<String, Error> {
        Ok(format!("{id}:{}", self.hits))
    }
}

/// A trait whose futures must be `Send`, implemented with `async fn` for a generic type.
pub trait SendUsers: Send + Sync {
    fn count(&self) -> impl Future<Output = Result<usize, Error>> + Send;
}

pub struct Remote<T>(Vec<T>);

impl<T: Send + Sync> SendUsers for Remote<T> {
    #[circuit_breaker(name = "shapes-send")]
    async fn count(&self) -> Result<usize, Error> {
        Ok(self.0.len())
    }
}

async fn dyn_fallback(value: &(dyn Display + Sync)) -> Result<String, Error> {
    Ok(format!("cached {value}"))
}

#[circuit_breaker(fallback = dyn_fallback)]
async fn show_dyn(value: &(dyn Display + Sync)) -> Result<String, Error> {
    Ok(value.to_string())
}

fn main() {
    block_on(async {
        free(1).await.unwrap();
        let _: u64 = generic(3).await.unwrap();
        let items = vec!["a".to_owned()];
        assert_eq!(first(&items).await.unwrap(), "a");
        assert_eq!(first_elided(&items).await.unwrap(), "a");
        assert_eq!(consume(items).await.unwrap(), 1);
        assert_eq!(evens(6u8).await.unwrap().count(), 3);
        assert_eq!(patterns((1, 2), vec![3], true).await.unwrap(), 6);
        assert_eq!(show(5).await.unwrap(), "5");
        let value = 9;
        // SAFETY: a valid pointer.
        assert_eq!(unsafe { read(&value) }.await.unwrap(), 9);
        assert_eq!(early(false).await.unwrap(), 3);
        let mut client = Client { hits: 0 };
        *client.hits_mut().await.unwrap() += 1;
        assert_eq!(client.get(1).await.unwrap(), 3);
        assert_eq!(client.name(1).await.unwrap(), "1:2");
        assert_eq!(client.id().await.unwrap(), 1);
        let client = Arc::new(client);
        assert_eq!(client.clone().shared().await.unwrap(), 2);
        let client = Arc::try_unwrap(client).ok().unwrap();
        assert_eq!(client.into_hits().await.unwrap(), 2);
        assert_eq!(Remote(vec![1, 2]).count().await.unwrap(), 2);
        assert_eq!(show_dyn(&5).await.unwrap(), "5");
    });
}
