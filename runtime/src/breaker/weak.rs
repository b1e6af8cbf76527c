//! [`WeakBreaker`]: a handle that does not keep its breaker alive; the weak count it holds
//! frees a breaker's memory (in `teardown.rs`).

use core::fmt;
use core::ptr::NonNull;

use super::Breaker;
use super::inner::Inner;
use super::teardown::release_weak;
use crate::sync::{AtomicU32, Ordering};

/// A handle that does not keep its breaker alive, from [`Breaker::downgrade`]: what a listener
/// that acts on its own breaker should hold, since a [`Breaker`] captured by the breaker's own
/// listener keeps it alive for ever.
///
/// [`upgrade`](WeakBreaker::upgrade) gives a [`Breaker`] while any handle to it (or an
/// [`OwnedPermit`](crate::OwnedPermit)) remains. A registry breaker lives for the process, so its
/// weak handles always upgrade.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, State};
///
/// let breaker = Breaker::new("search", Config::builder().failures(1).build()?);
/// let weak = breaker.downgrade();
/// // Close again at once whenever it opens: the listener acts on its own breaker.
/// breaker.on_state_change(move |e| {
///     if let (State::Open, Some(b)) = (e.to, weak.upgrade()) {
///         b.reset();
///     }
/// });
/// breaker.call(|| Err::<(), _>("timeout")).unwrap_err();
/// assert_eq!(breaker.state(), State::Closed);
/// let weak = breaker.downgrade();
/// drop(breaker); // the last handle: the breaker and its listener are freed
/// assert!(weak.upgrade().is_none());
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
pub struct WeakBreaker(NonNull<Inner>);

// SAFETY: a weak handle only reads `refs`, `weak` and `registered` (atomics and a constant) and
// upgrades to a `Breaker`, which is `Send + Sync`.
unsafe impl Send for WeakBreaker {}
// SAFETY: as above.
unsafe impl Sync for WeakBreaker {}

impl Breaker {
    /// A [`WeakBreaker`]: a handle that does not keep the breaker alive.
    ///
    /// Costs a reference-count increment for a [`Breaker::new`] breaker, nothing for a registry
    /// one. Aborts the process if more than 2^31 weak handles to one breaker are alive (only
    /// a leak of them gets there: wrapping would free a live breaker).
    pub fn downgrade(&self) -> WeakBreaker {
        let inner = self.inner();
        if !inner.registered {
            add_weak(&inner.weak);
        }
        WeakBreaker(self.0)
    }
}

impl Inner {
    /// A weak handle made from the breaker itself, while a handle keeps it alive: what an
    /// armed timer holds.
    pub(super) fn weak_handle(&self) -> WeakBreaker {
        if !self.registered {
            add_weak(&self.weak);
        }
        WeakBreaker(NonNull::from(self))
    }
}

fn add_weak(weak: &AtomicU32) {
    // Relaxed, as for `refs` in `Breaker::clone`: made from a live handle or weak handle.
    if weak.fetch_add(1, Ordering::Relaxed) > i32::MAX as u32 {
        // Only a leak of 2^31 weak handles gets here; wrapping would free a live breaker.
        std::process::abort();
    }
}

impl WeakBreaker {
    /// A [`Breaker`] handle, if the breaker is still alive: `None` once its last handle (and
    /// last [`OwnedPermit`](crate::OwnedPermit)) was dropped.
    pub fn upgrade(&self) -> Option<Breaker> {
        let ptr = self.0.as_ptr();
        // SAFETY: this weak handle keeps the memory allocated; `registered` is a plain `bool`
        // set at creation and `refs` an atomic, neither dropped with the contents, read
        // through references to the fields alone.
        let (registered, refs) = unsafe {
            (
                *core::ptr::addr_of!((*ptr).registered),
                &*core::ptr::addr_of!((*ptr).refs),
            )
        };
        if registered {
            return Some(Breaker(self.0));
        }
        let mut n = refs.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                // The last handle is gone (or going): it stays gone.
                return None;
            }
            if n > isize::MAX as usize {
                std::process::abort(); // as in `Breaker::clone`
            }
            // Acquire: the new handle sees what the handles before it did. Never from 0, so
            // a breaker whose contents are dropped is never revived.
            match refs.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Some(Breaker(self.0)),
                Err(actual) => n = actual,
            }
        }
    }

    fn registered(&self) -> bool {
        // SAFETY: this weak handle keeps the memory allocated, and `registered` is a plain
        // `bool` set at creation and never dropped with the contents: it is read through a
        // pointer to the field alone, never a reference to the whole `Inner`.
        unsafe { *core::ptr::addr_of!((*self.0.as_ptr()).registered) }
    }
}

impl Clone for WeakBreaker {
    /// Another weak handle to the same breaker.
    fn clone(&self) -> WeakBreaker {
        if !self.registered() {
            // SAFETY: this weak handle keeps the memory allocated, and `weak` is an atomic that
            // is never dropped with the contents, so a reference to the field alone is valid.
            add_weak(unsafe { &*core::ptr::addr_of!((*self.0.as_ptr()).weak) });
        }
        WeakBreaker(self.0)
    }
}

impl Drop for WeakBreaker {
    fn drop(&mut self) {
        if !self.registered() {
            // SAFETY: `release_weak`'s contract: not registered, so a `Breaker::new` breaker,
            // and this handle owns one share of `weak`, given up here, once (in `drop`).
            unsafe { release_weak(self.0) };
        }
    }
}

impl fmt::Debug for WeakBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(WeakBreaker)")
    }
}
