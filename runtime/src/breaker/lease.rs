//! [`Lease`]: an owned permit that keeps its breaker alive as a rejection does, for the tower
//! layer's response future.
//!
//! An [`OwnedPermit`](crate::OwnedPermit) holds a handle: a reference-count increment when made
//! and a decrement when it ends, two locked instructions on the handles' shared line (about
//! 11 ns a request on the AMD machines of BENCHMARKS.md). A lease holds the breaker's address
//! and counts itself where a rejection does (`orphans.rs`): made, one taken from its thread's
//! released word (`Counts::hold`); ended, one given back on the ending thread's word
//! (`Counts::release`), then the light barrier and the orphans' `pending` check. So the
//! breaker outlives its last handle while a lease is alive, and the last of the two frees it.
//! A lease hands out no handle (an `OwnedPermit` lends one, which may be cloned after the last
//! other handle is gone): that is what lets it keep the breaker alive without being one.

use core::fmt;
use core::ptr::NonNull;

use super::inner::Inner;
use super::permit::Permit;
use super::ticket::Ticket;
use super::{Breaker, Rejected};
use crate::outcome::Outcome;

/// Permission to make one call, owning no handle to its breaker: see the module doc. Records
/// like an [`OwnedPermit`](crate::OwnedPermit), including on drop (`Ignored` for a cancelled
/// call, `Failure` while panicking).
#[must_use = "a lease records a cancelled call when dropped; record the outcome instead"]
pub struct Lease {
    inner: NonNull<Inner>,
    ticket: Ticket,
}

// SAFETY: a lease only reaches its breaker (an `Inner`, `Send + Sync`) through shared
// references, and gives its count back through the breaker's counters from whichever thread
// ends it (`Counts::release` handles any thread).
unsafe impl Send for Lease {}
// SAFETY: as above; `&Lease` reads nothing of the breaker.
unsafe impl Sync for Lease {}

impl Breaker {
    /// Asks to make one call, as [`try_acquire_owned`](Breaker::try_acquire_owned) does, with
    /// a [`Lease`] in place of the owned permit.
    #[inline]
    pub(crate) fn try_lease(&self) -> Result<Lease, Rejected> {
        // The lease takes over the verdict; the borrowed permit must not record on drop.
        let permit = core::mem::ManuallyDrop::new(self.try_acquire()?);
        let inner = self.inner();
        if !inner.registered {
            inner.counts.hold(&inner.owner, &inner.spill);
        }
        Ok(Lease {
            inner: self.0,
            ticket: permit.ticket,
        })
    }
}

impl Lease {
    /// The permit this lease stands for, and the guard that ends the lease when dropped (also
    /// when recording panics): the lease itself is forgotten.
    #[inline]
    fn into_parts(self) -> (Ending, Ticket) {
        let this = core::mem::ManuallyDrop::new(self);
        (Ending(this.inner), this.ticket)
    }

    /// Records the call's outcome with the failure's message; see
    /// [`Permit::record_with`](crate::Permit::record_with).
    ///
    /// PERF(`closed_ok/bb_tower_static`): inlined into the response future's `poll`. Called
    /// out of line, it read the lease back from the future's memory, where the future's moves
    /// had just stored it in other widths: a store-forwarding stall, +5 ns a request.
    #[inline(always)]
    pub fn record_with(self, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        let (ending, ticket) = self.into_parts();
        ending.permit(ticket).record_with(outcome, cause);
    }

    /// Records the call's outcome.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        self.record_with(outcome, None);
    }

    /// Records a cancelled call (`Ignored`) whether or not the thread is unwinding, a panic
    /// while recording caught and logged: the response future dropped unfinished.
    #[cold]
    pub fn cancel(self) {
        let (ending, ticket) = self.into_parts();
        ending.permit(ticket).cancel();
    }
}

impl Drop for Lease {
    /// Records as a dropped [`Permit`] does: `Ignored` for a cancelled call, `Failure` while
    /// panicking; then ends the lease.
    fn drop(&mut self) {
        let ending = Ending(self.inner);
        drop(ending.permit(self.ticket));
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // SAFETY: the lease keeps its breaker alive (see the module doc).
        let inner = unsafe { self.inner.as_ref() };
        f.debug_struct("Lease")
            .field("breaker", &inner.identity.name())
            .finish()
    }
}

/// Ends a lease when dropped: after its permit recorded, or while recording unwinds.
struct Ending(NonNull<Inner>);

impl Ending {
    /// The permit of the lease, borrowed from the breaker it keeps alive.
    #[inline]
    fn permit(&self, ticket: Ticket) -> Permit<'_> {
        Permit {
            // SAFETY: the lease is not ended before this guard drops, and the permit borrows
            // the guard.
            inner: unsafe { self.0.as_ref() },
            ticket,
        }
    }
}

impl Drop for Ending {
    /// Nothing for a registry breaker; the release, out of line, for any other.
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: the lease is alive until `end`.
        if !unsafe { self.0.as_ref() }.registered {
            // SAFETY: as above; nothing touches the breaker after.
            unsafe { end(self.0) };
        }
    }
}

/// Gives a lease of `ptr` back (`orphans::give_back`), out of line.
///
/// # Safety
/// `ptr` is a `Breaker::new` breaker the lease kept alive; nothing of it is touched after.
#[inline(never)]
unsafe fn end(ptr: NonNull<Inner>) {
    // SAFETY: as the caller's.
    unsafe { super::orphans::give_back(ptr) };
}
