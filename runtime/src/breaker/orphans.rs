//! Breakers whose last handle is gone while rejections of theirs are still alive.
//!
//! A [`Rejected`](crate::Rejected) names its breaker and reads its last failure and clock when
//! shown, so it keeps a `Breaker::new` (or keyed) breaker's memory and contents alive; but it
//! holds no share of the handles' reference count, whose cache line would then be written by
//! every rejection on every thread. Instead each breaker counts its rejections where it counts
//! calls (each thread on its own line, `Count::Rejected`) and their drops the same way
//! (`Counts::release`), and the two sides meet here:
//!
//! - The last handle's drop (`Breaker::drop`, then [`adopt`]) reads how many rejections are
//!   alive. None: the breaker is freed as before. Some: it is put in the orphan list, its
//!   bucket's `pending` count is raised, a heavy barrier, and the count is read again (the
//!   last rejection may have been dropped meanwhile: then it is taken out and freed here).
//! - A rejection's drop counts itself released on its thread's line, then a light barrier,
//!   then reads `pending` for its breaker's bucket ([`released`]): zero, and it is done,
//!   touching nothing of the breaker after its count. Otherwise it looks its breaker up in the
//!   list (by address, under the list's lock) and frees it if no rejection is left.
//!
//! The two barriers (`barrier.rs`: together they order as two `SeqCst` fences, the light one
//! costing a rejection nothing on Linux) make the last of the two sides see the other (the
//! store-buffer pattern): either the handle's drop sees the rejection's count, or the
//! rejection sees `pending`. A breaker in the list is freed only by whoever takes it out of
//! the list, under the lock, so once. The tower layer's lease (`lease.rs`) is counted and
//! given back the same way ([`give_back`]). `tests/loom/rejected.rs` models both.

use core::ptr::NonNull;

use super::inner::Inner;
use crate::sync::{AtomicUsize, Mutex, Ordering, lock};

/// How many `pending` counts the list is split over: a rejection alive long after its breaker
/// (kept in an error chain) sends only the drops of rejections in its bucket to the list.
const BUCKETS: usize = 64;

struct Orphans {
    /// The orphaned breakers' addresses.
    list: Mutex<Vec<usize>>,
    /// How many breakers of each bucket are in `list`.
    pending: [AtomicUsize; BUCKETS],
}

#[cfg(not(loom))]
static ORPHANS: Orphans = Orphans {
    list: Mutex::new(Vec::new()),
    pending: [const { AtomicUsize::new(0) }; BUCKETS],
};

#[cfg(loom)]
loom::lazy_static! {
    static ref ORPHANS: Orphans = Orphans {
        list: Mutex::new(Vec::new()),
        pending: core::array::from_fn(|_| AtomicUsize::new(0)),
    };
}

fn orphans() -> &'static Orphans {
    &ORPHANS
}

fn bucket(ptr: NonNull<Inner>) -> usize {
    // Breakers are 64-byte aligned: the bits above those, mixed.
    ((ptr.as_ptr() as usize >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as usize) >> 8) % BUCKETS
}

/// Whether `ptr`'s rejections keep it alive: then it is in the list, and the last of them frees
/// it. `false`: nothing is left of it but the caller's to free.
///
/// # Safety
/// `ptr` is a `Breaker::new` breaker whose last handle has just dropped its reference, after an
/// Acquire fence.
pub(super) unsafe fn adopt(ptr: NonNull<Inner>) -> bool {
    // SAFETY: the caller's breaker is not freed yet; only this function or the list frees it.
    let inner = unsafe { ptr.as_ref() };
    if inner.counts.outstanding(&inner.spill) == 0 {
        return false;
    }
    let o = orphans();
    let b = bucket(ptr);
    let mut list = lock(&o.list);
    list.push(ptr.as_ptr() as usize);
    o.pending[b].fetch_add(1, Ordering::Relaxed);
    // Pairs with the barrier in `released`: see the module doc.
    crate::barrier::heavy();
    if inner.counts.outstanding(&inner.spill) != 0 {
        return true;
    }
    list.pop();
    o.pending[b].fetch_sub(1, Ordering::Relaxed);
    false
}

/// Gives back what a rejection or a lease of `ptr` kept alive: counts its end on this thread's
/// line, then frees the breaker if it is orphaned and that was the last of them.
///
/// # Safety
/// `ptr` is a `Breaker::new` breaker kept alive by the caller's rejection or lease, which
/// touches it no more.
#[inline(always)]
pub(super) unsafe fn give_back(ptr: NonNull<Inner>) {
    // SAFETY: alive until the count below.
    let inner = unsafe { ptr.as_ref() };
    inner.counts.release(&inner.owner, &inner.spill);
    // SAFETY: as the caller's; nothing of the breaker is touched after its count.
    unsafe { released(ptr) };
}

/// After a rejection or lease of `ptr` counted its end: frees the breaker if it is orphaned
/// and that was the last of them.
///
/// # Safety
/// `ptr` is a `Breaker::new` breaker, whose memory the caller touches no more.
#[inline]
unsafe fn released(ptr: NonNull<Inner>) {
    // Pairs with the barrier in `adopt`: see the module doc.
    crate::barrier::light();
    if orphans().pending[bucket(ptr)].load(Ordering::Relaxed) != 0 {
        // SAFETY: as the caller's.
        unsafe { released_slow(ptr) };
    }
}

/// # Safety
/// As for [`released`].
#[cold]
#[inline(never)]
unsafe fn released_slow(ptr: NonNull<Inner>) {
    let o = orphans();
    let mut list = lock(&o.list);
    let Some(at) = list.iter().position(|&p| p == ptr.as_ptr() as usize) else {
        // Not orphaned, or freed by another: either way not ours to touch. (The address may
        // also be another breaker's by now; then that one is checked, which is as good.)
        return;
    };
    // SAFETY: a breaker in the list is freed only by whoever takes it out, under the lock.
    let inner = unsafe { ptr.as_ref() };
    if inner.counts.outstanding(&inner.spill) != 0 {
        return;
    }
    list.swap_remove(at);
    o.pending[bucket(ptr)].fetch_sub(1, Ordering::Relaxed);
    drop(list);
    // What the dropped handles and rejections did happens before: the list's lock orders this
    // after the last handle's drop (its Acquire fence), and `outstanding` read every
    // rejection's drop with Acquire.
    // SAFETY: taken out of the list, so no handle, rejection or other thread frees it.
    unsafe { super::teardown::destroy(ptr) };
}
