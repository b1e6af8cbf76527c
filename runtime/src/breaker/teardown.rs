//! The end of a `Breaker::new` breaker: its contents dropped with its last handle (or its last
//! rejection), its memory freed with its last weak handle.

use core::ptr::NonNull;

use super::inner::Inner;
use crate::sync::{Ordering, fence};

/// Drops a `Breaker::new` breaker's contents and gives back its handles' weak share.
///
/// # Safety
/// No handle to `ptr` is left, nor any rejection of it, and what they did happens before.
pub(super) unsafe fn destroy(ptr: NonNull<Inner>) {
    // SAFETY: the last handle to a `Breaker::new` breaker is gone, and so is every rejection
    // of it; no other handle or borrow of it remains (permits borrow a handle, owned permits
    // hold one), and a weak
    // handle can no longer make one (`refs` is 0 for good). `Inner` has no `Drop` of its
    // own, so this drops its fields one by one through `ptr` and never makes a reference
    // to the whole: a weak handle may read `refs` (never dropped, an atomic) meanwhile.
    // Its listeners, and what they hold, go now, whatever weak handles remain.
    unsafe { core::ptr::drop_in_place(ptr.as_ptr()) };
    // SAFETY: the handles' share of the weak count, given back once, by this last handle.
    unsafe { release_weak(ptr) };
}

// `Breaker::drop` relies on `Inner` having no `Drop` impl of its own (which would make a
// `&mut Inner` while weak handles read `refs`): adding one fails to compile here.
const _: () = {
    #[allow(dead_code)]
    trait NoDropImpl {}
    #[allow(drop_bounds)]
    impl<T: Drop> NoDropImpl for T {}
    impl NoDropImpl for Inner {}
};

/// Gives back one share of `weak`; the last one frees the breaker's memory, whose contents
/// were dropped with its last handle.
///
/// # Safety
///
/// `ptr` is a `Breaker::new` breaker and the caller owns one share of its weak count, which
/// it gives up.
pub(super) unsafe fn release_weak(ptr: NonNull<Inner>) {
    // SAFETY: the caller's share keeps the memory allocated; `weak` is an atomic, never
    // dropped with the contents, so it may be read through a reference to the field alone.
    let weak = unsafe { &*core::ptr::addr_of!((*ptr.as_ptr()).weak) };
    // Release and the fence: as for `refs` in `Breaker::drop`.
    if weak.fetch_sub(1, Ordering::Release) != 1 {
        return;
    }
    fence(Ordering::Acquire);
    // SAFETY: `key_len` is a plain `u16` set at creation, not dropped with the contents.
    let key_len = unsafe { *core::ptr::addr_of!((*ptr.as_ptr()).key_len) };
    // SAFETY: no handle and no weak handle remains; `Breaker::new` allocated this with
    // `Box::new`, that is with `Layout::new::<Inner>()` (`key_len` is `NO_KEY`), and
    // `Breaker::keyed` with `Inner::layout(key_len)`; its contents were dropped.
    unsafe { std::alloc::dealloc(ptr.as_ptr().cast(), Inner::layout(key_len)) };
}
