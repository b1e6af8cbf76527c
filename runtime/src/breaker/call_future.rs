//! [`CallFuture`]: what [`Breaker::call_async`] returns. It asks
//! for its permit when first polled and then polls the caller's future where it lies, beside
//! the permit.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::guarded::Armed;
use super::handle::Breaker;
use super::permit::Permit;
use super::rejected::Error;

pin_project_lite::pin_project! {
    /// `future`, run through `breaker`. Until its first poll it holds the breaker; then the
    /// permit, which it records as [`Guarded`](super::Guarded) does: a panic out of
    /// `future`'s `poll` is a failure, a drop before the end a cancelled call.
    ///
    /// PERF(`async/bb_call_async`): the caller's future is polled in place. An `async fn`
    /// around [`Guarded`](super::Guarded) moves it twice (into its own state, then into the
    /// guard), and those copies cost more than the rest of the call.
    pub(super) struct CallFuture<'a, F> {
        breaker: Option<&'a Breaker>,
        permit: Option<Permit<'a>>,
        #[pin]
        future: F,
    }

    impl<'a, F> PinnedDrop for CallFuture<'a, F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(permit) = this.project().permit.take() {
                permit.cancel();
            }
        }
    }
}

impl<'a, F> CallFuture<'a, F> {
    /// `future`, to be run through `breaker` when first polled.
    #[inline]
    pub(super) fn new(breaker: &'a Breaker, future: F) -> Self {
        CallFuture {
            breaker: Some(breaker),
            permit: None,
            future,
        }
    }
}

impl<T, E: fmt::Display, F: Future<Output = Result<T, E>>> Future for CallFuture<'_, F> {
    type Output = Result<T, Error<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(breaker) = this.breaker.take() {
            match breaker.try_acquire() {
                Ok(permit) => *this.permit = Some(permit),
                Err(rejected) => return Poll::Ready(Err(Error::Rejected(rejected))),
            }
        } else if this.permit.is_none() {
            panic!("`Breaker::call_async`'s future polled after it completed");
        }
        let mut guard = Armed {
            permit: this.permit,
            armed: true,
        };
        let poll = this.future.poll(cx);
        guard.armed = false;
        let Poll::Ready(result) = poll else {
            return Poll::Pending;
        };
        // Present: checked above, and only a panic out of `poll` takes it.
        if let Some(permit) = guard.permit.take() {
            match &result {
                Ok(_) => permit.success(),
                Err(e) => permit.failure_with(e),
            }
        }
        Poll::Ready(result.map_err(Error::Inner))
    }
}

impl Breaker {
    /// Awaits `fut` through the breaker, counting as [`call`](Breaker::call) does. If the
    /// returned future is dropped before it finishes, the call counts as
    /// [`Ignored`](crate::Outcome::Ignored), also when it is dropped because another future of its
    /// task panicked; a panic out of `fut` counts as a failure, also when a catcher around
    /// this future stops it. Needs no particular async runtime.
    #[inline]
    pub fn call_async<T, E: fmt::Display>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
    ) -> impl Future<Output = Result<T, Error<E>>> {
        CallFuture::new(self, fut)
    }
}
