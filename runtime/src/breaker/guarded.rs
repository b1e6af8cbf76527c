//! [`Guarded`]: an async call's future with its permit, so that what the permit records says
//! what happened to this call and not to its task.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::Permit;

pin_project_lite::pin_project! {
    /// `future`, run with `permit` held. Its output comes with the permit, for the caller to
    /// record the outcome. Until then:
    /// - a panic out of `future`'s own `poll` records a failure, even when a catcher around
    ///   this future (`catch_unwind`, tower-http's `CatchPanicLayer`) stops the unwind before
    ///   it is dropped;
    /// - dropped unfinished records a cancelled call (`Ignored`), also while the thread
    ///   unwinds from another panic: a sibling's panic in the same task (`join!`, `select!`)
    ///   drops this future on the way out, and says nothing about the service.
    ///
    /// Without it, a permit held across an `.await` recorded `Failure` whenever it was
    /// dropped during an unwind, another future's included: one panic in a task counted as a
    /// failure of every call the task had in flight.
    #[doc(hidden)]
    pub struct Guarded<'a, F> {
        #[pin]
        future: F,
        permit: Option<Permit<'a>>,
    }

    impl<'a, F> PinnedDrop for Guarded<'a, F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(permit) = this.project().permit.take() {
                permit.cancel();
            }
        }
    }
}

impl<'a, F> Guarded<'a, F> {
    /// `future`, to be awaited with `permit` held.
    #[inline]
    pub fn new(permit: Permit<'a>, future: F) -> Self {
        Guarded {
            future,
            permit: Some(permit),
        }
    }
}

impl<'a, F: Future> Future for Guarded<'a, F> {
    type Output = (F::Output, Permit<'a>);

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut guard = Armed {
            permit: this.permit,
            armed: true,
        };
        let poll = this.future.poll(cx);
        guard.armed = false;
        match poll {
            Poll::Ready(output) => Poll::Ready((
                output,
                guard
                    .permit
                    .take()
                    .expect("`Guarded` polled after it completed"),
            )),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Records the failure of the call if dropped while armed, which only happens when the inner
/// future's `poll` unwinds: disarmed as soon as it returns, so a future polled from a `Drop`
/// while another panic unwinds is not blamed for it.
pub(super) struct Armed<'p, 'a> {
    pub(super) permit: &'p mut Option<Permit<'a>>,
    pub(super) armed: bool,
}

impl Drop for Armed<'_, '_> {
    #[inline]
    fn drop(&mut self) {
        if self.armed
            && let Some(permit) = self.permit.take()
        {
            permit.fail_unwinding();
        }
    }
}
