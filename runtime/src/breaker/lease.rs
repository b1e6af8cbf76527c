//! [`Lease`]: an owned permit that holds its breaker's state rather than a handle, for the
//! tower layer's response future.
//!
//! An [`OwnedPermit`](crate::OwnedPermit) holds a handle. A lease holds what it records into:
//! for a registry breaker, which lives for the process, a `'static` reference (no reference
//! count, on every request); for any other, the breaker's `Arc<Inner>`, which keeps the
//! breaker alive until the lease ends without being a handle (its weak handles no longer
//! upgrade once only leases are left).

use core::fmt;
use std::sync::Arc;

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
    /// `None` once ended (recorded), so that its drop records nothing.
    inner: Option<Held>,
    ticket: Ticket,
}

/// The breaker a lease records into.
enum Held {
    /// A registry breaker's, which lives for the process.
    Forever(&'static Inner),
    /// Any other's.
    Shared(Arc<Inner>),
}

impl Held {
    #[inline(always)]
    fn get(&self) -> &Inner {
        match self {
            Held::Forever(inner) => inner,
            Held::Shared(inner) => inner,
        }
    }
}

impl Breaker {
    /// Asks to make one call, as [`try_acquire_owned`](Breaker::try_acquire_owned) does, with
    /// a [`Lease`] in place of the owned permit.
    #[inline]
    pub(crate) fn try_lease(&self) -> Result<Lease, Rejected> {
        // The lease takes over the verdict; the borrowed permit must not record on drop.
        let permit = core::mem::ManuallyDrop::new(self.try_acquire()?);
        let inner = match self.forever() {
            Some(inner) => Held::Forever(inner),
            None => Held::Shared(self.shared().clone()),
        };
        Ok(Lease {
            inner: Some(inner),
            ticket: permit.ticket,
        })
    }
}

impl Lease {
    /// The breaker this lease holds and its ticket; the lease, left empty, then drops as
    /// nothing.
    #[inline(always)]
    fn take(mut self) -> (Held, Ticket) {
        let held = self.inner.take().expect("a lease is ended once");
        (held, self.ticket)
    }

    /// Records the call's outcome with the failure's message; see
    /// [`Permit::record_with`](crate::Permit::record_with).
    ///
    /// PERF(`closed_ok/bb_tower_static`): inlined into the response future's `poll`. Called
    /// out of line, it read the lease back from the future's memory, where the future's moves
    /// had just stored it in other widths: a store-forwarding stall, +5 ns a request.
    #[inline(always)]
    pub fn record_with(self, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        let (held, ticket) = self.take();
        held.permit(ticket).record_with(outcome, cause);
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
        let (held, ticket) = self.take();
        held.permit(ticket).cancel();
    }
}

impl Held {
    /// The permit of the lease, borrowed from the breaker it keeps alive.
    #[inline(always)]
    fn permit(&self, ticket: Ticket) -> Permit<'_> {
        Permit {
            inner: self.get(),
            ticket,
        }
    }
}

impl Drop for Lease {
    /// Records as a dropped [`Permit`] does: `Ignored` for a cancelled call, `Failure` while
    /// panicking.
    fn drop(&mut self) {
        if let Some(held) = self.inner.take() {
            drop(held.permit(self.ticket));
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("breaker", &self.inner.as_ref().map(|h| h.get().name()))
            .finish()
    }
}
