//! [`Breaker`], the handle: its pointer to the shared [`Inner`], the reference count its
//! clones and drops keep, and how a breaker is made (on its own, keyed, or for the registry).

use core::ptr::NonNull;

use super::inner::{self, Inner};
use super::orphans;
use super::teardown::destroy;
use crate::config::Config;
use crate::identity::Identity;
use crate::sync::{Ordering, fence};

/// A circuit breaker. Cheap to clone: clones are handles to one breaker.
///
/// Most users meet breakers through `#[circuit_breaker]` and the [`registry`](crate::registry);
/// this is the API underneath, for code that wants to drive one by hand.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, Error, ManualClock, State};
///
/// let clock = ManualClock::new(); // time stands still unless the test moves it
/// let breaker = Breaker::new("payments", Config::builder().failures(2).clock(clock).build()?);
/// for _ in 0..2 {
///     let r: Result<(), _> = breaker.call(|| Err("connection refused"));
///     assert!(matches!(r, Err(Error::Inner(_))));
/// }
/// assert_eq!(breaker.state(), State::Open);
/// let r: Result<(), Error<&str>> = breaker.call(|| Ok(()));
/// let rejected = r.unwrap_err();
/// assert!(rejected.to_string().starts_with("circuit breaker 'payments' is open; retry in 60.0s"));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
pub struct Breaker(pub(super) NonNull<Inner>);

// SAFETY: a `Breaker` is a shared reference to an `Inner` (which is `Send + Sync`, checked
// below) plus, for a `Breaker::new` breaker, a share of its reference count, which is atomic.
unsafe impl Send for Breaker {}
// SAFETY: as above; `&Breaker` only ever hands out `&Inner`.
unsafe impl Sync for Breaker {}

const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Inner>();
};

impl Clone for Breaker {
    /// Another handle to the same breaker: a reference-count increment for a
    /// [`Breaker::new`] breaker, nothing at all for a registry one.
    #[inline]
    fn clone(&self) -> Breaker {
        let inner = self.inner();
        if !inner.registered {
            // Relaxed, as `Arc` does: a new handle is made from an existing one, which keeps
            // the breaker alive meanwhile; no data is published by the increment.
            let old = inner.refs.fetch_add(1, Ordering::Relaxed);
            if old > isize::MAX as usize {
                // Only a leak of 2^63 handles gets here; wrapping would free a live breaker.
                std::process::abort();
            }
        }
        Breaker(self.0)
    }
}

impl Drop for Breaker {
    /// PERF(`open_1t/bb_call_static`): a test and a decrement inline; freeing the breaker is a
    /// call. With the freeing inlined, dropping a `Rejected` was itself a call, on every
    /// rejection.
    #[inline(always)]
    fn drop(&mut self) {
        let inner = self.inner();
        // Release: this handle's uses happen before the last handle frees the breaker,
        // which acquires them all with the fence below.
        if inner.registered || inner.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // SAFETY: this was the last handle, just given up.
        unsafe { free(self.0) };
    }
}

/// Frees a `Breaker::new` breaker whose last handle has just dropped its reference.
///
/// # Safety
/// `ptr` is that breaker, `refs` reached 0 by that handle's decrement, and nothing uses it
/// through a handle any more.
#[cold]
#[inline(never)]
unsafe fn free(ptr: NonNull<Inner>) {
    fence(Ordering::Acquire);
    // SAFETY: the last handle, after its Acquire fence.
    if unsafe { orphans::adopt(ptr) } {
        return; // the last of its rejections frees it
    }
    // SAFETY: no rejection of it is left, and the last handle is gone.
    unsafe { destroy(ptr) };
}

/// A registry breaker no handle points to yet: see [`Breaker::unpublished`].
pub(crate) struct Unpublished(Box<Inner>);

impl Unpublished {
    /// Leaks it for the process and hands out the first handle, which counts no references.
    pub(crate) fn publish(self) -> Breaker {
        Breaker(NonNull::from(Box::leak(self.0)))
    }
}

impl Breaker {
    /// A breaker of its own, outside the registry.
    ///
    /// Its name and last-failure message are its own and are freed with it: dropping the last
    /// handle (a [`Rejected`] from it is one) returns all its memory, whatever its name.
    ///
    /// [`Rejected`]: crate::Rejected
    pub fn new(name: impl Into<String>, config: Config) -> Breaker {
        Breaker::named(Identity::new(name.into()), config)
    }

    /// A `Breaker::new` breaker that shares its name's allocation with others (a keyed family's).
    pub(crate) fn named(identity: Identity, config: Config) -> Breaker {
        // Its rejections' drops use the light barrier (`orphans.rs`).
        crate::barrier::init();
        Breaker(NonNull::from(Box::leak(Box::new(Inner::new(
            identity, config, false,
        )))))
    }

    /// A keyed family's breaker (`identity` names the family and the key). One of a registry
    /// family tells the registry-wide listeners its changes, as a registry breaker does.
    /// Its key's text (`key`, cut at [`MAX_KEY`](inner::MAX_KEY) bytes) is kept right after
    /// the breaker, in its allocation: a key costs its text's bytes and no more.
    pub(crate) fn keyed(
        identity: Identity,
        config: Config,
        tells_registry: bool,
        key: &str,
    ) -> Breaker {
        let mut end = key.len().min(inner::MAX_KEY);
        while !key.is_char_boundary(end) {
            end -= 1;
        }
        let key = &key[..end];
        crate::barrier::init();
        let mut value = Inner::new(identity, config, false);
        value.tells_registry = tells_registry;
        value.key_len = key.len() as u16;
        let layout = Inner::layout(value.key_len);
        // SAFETY: `layout` is `Inner`'s size and alignment plus the key's bytes: not zero-sized.
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<Inner>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        // SAFETY: the allocation holds an `Inner` at its start, aligned, and `key.len()` bytes
        // after it; `release_weak` frees it with the same layout (read from `key_len`).
        unsafe {
            ptr.as_ptr().write(value);
            core::ptr::copy_nonoverlapping(
                key.as_ptr(),
                ptr.as_ptr().add(1).cast::<u8>(),
                key.len(),
            );
        }
        Breaker(ptr)
    }

    /// A registry breaker, not yet published: the registry builds it outside its locks, then
    /// publishes it, or drops it if another thread's breaker of that name got in first.
    pub(crate) fn unpublished(name: String, config: Config) -> Unpublished {
        Unpublished(Box::new(Inner::new(Identity::new(name), config, true)))
    }

    #[inline]
    pub(super) fn inner(&self) -> &Inner {
        // SAFETY: the breaker lives while any handle does (see `Drop`), and is only ever
        // shared, never mutated through the pointer.
        unsafe { self.0.as_ref() }
    }
}
