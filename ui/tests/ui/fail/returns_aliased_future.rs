//! A plain `fn` returning a future behind an alias or a named type is rejected, as `impl
//! Future` is: the outcome would be recorded when the future is created.
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use breakerbox::{Rejected, circuit_breaker};

#[derive(Debug)]
pub struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

/// What `futures::future::BoxFuture` is.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

fn cached(_id: u32) -> BoxFuture<'static, Result<u32, Error>> {
    Box::pin(async { Ok(0) })
}

#[circuit_breaker(fallback = cached)]
fn boxed(id: u32) -> BoxFuture<'static, Result<u32, Error>> {
    Box::pin(async move { Ok(id) })
}

pub struct Call;

impl Future for Call {
    type Output = Result<u32, Error>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(1))
    }
}

fn ready() -> Call {
    Call
}

#[circuit_breaker(fallback = ready)]
fn named() -> Call {
    Call
}

fn main() {
    let _ = boxed(1);
    let _ = named();
}
