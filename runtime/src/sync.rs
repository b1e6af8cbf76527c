//! One place that picks std or loom primitives, so the atomic protocols can be model-checked.

#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};

#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering, fence};

/// Lets another thread run while this one waits for it (loom must know, or it reports a
/// livelock).
#[cfg(loom)]
pub(crate) use loom::thread::yield_now;
#[cfg(not(loom))]
pub(crate) use std::thread::yield_now;

/// Locks a mutex, recovering the data if a panicking thread poisoned it: every critical section
/// in this crate leaves its data consistent at each step, so poison carries no information.
pub(crate) fn lock<T>(m: &Mutex<T>) -> impl core::ops::DerefMut<Target = T> + '_ {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A box allocated on first use, in one word (`once_cell`'s `OnceBox`). Under loom it is
/// allocated up front: loom cannot see `once_cell`'s atomics, and the lazy allocation is not
/// a protocol the models are about.
#[cfg(not(loom))]
pub(crate) struct LazyBox<T>(once_cell::race::OnceBox<T>);

#[cfg(not(loom))]
impl<T: Default> LazyBox<T> {
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.get()
    }

    #[inline]
    pub(crate) fn get_or_default(&self) -> &T {
        match self.0.get() {
            Some(t) => t,
            None => self.init(),
        }
    }

    #[cold]
    fn init(&self) -> &T {
        self.0.get_or_init(Box::default)
    }
}

#[cfg(not(loom))]
impl<T> Default for LazyBox<T> {
    fn default() -> Self {
        LazyBox(once_cell::race::OnceBox::new())
    }
}

#[cfg(loom)]
pub(crate) struct LazyBox<T>(Box<T>);

#[cfg(loom)]
impl<T: Default> LazyBox<T> {
    pub(crate) fn get(&self) -> Option<&T> {
        Some(&self.0)
    }

    pub(crate) fn get_or_default(&self) -> &T {
        &self.0
    }
}

#[cfg(loom)]
impl<T: Default> Default for LazyBox<T> {
    fn default() -> Self {
        LazyBox(Box::default())
    }
}

/// A word of packed fields (see the layouts in `state.rs`), kept in an [`Atomic`].
pub(crate) trait Packed: Copy {
    /// The word whose bits these are.
    fn from_bits(bits: u64) -> Self;
    /// The word's bits.
    fn bits(self) -> u64;
}

/// An `AtomicU64` that holds a packed word `W`: the atomic's operations, in `W`s. As cheap as
/// the `AtomicU64` (`#[repr(transparent)]`, every method `#[inline(always)]`).
#[repr(transparent)]
pub(crate) struct Atomic<W>(AtomicU64, core::marker::PhantomData<W>);

impl<W: Packed + Default> Default for Atomic<W> {
    fn default() -> Atomic<W> {
        Atomic::new(W::default())
    }
}

impl<W: Packed> Atomic<W> {
    pub(crate) fn new(word: W) -> Atomic<W> {
        Atomic(AtomicU64::new(word.bits()), core::marker::PhantomData)
    }

    #[inline(always)]
    pub(crate) fn load(&self, order: Ordering) -> W {
        W::from_bits(self.0.load(order))
    }

    #[inline(always)]
    pub(crate) fn store(&self, word: W, order: Ordering) {
        self.0.store(word.bits(), order);
    }

    #[inline(always)]
    pub(crate) fn compare_exchange(
        &self,
        current: W,
        new: W,
        success: Ordering,
        failure: Ordering,
    ) -> Result<W, W> {
        self.0
            .compare_exchange(current.bits(), new.bits(), success, failure)
            .map(W::from_bits)
            .map_err(W::from_bits)
    }

    #[inline(always)]
    pub(crate) fn compare_exchange_weak(
        &self,
        current: W,
        new: W,
        success: Ordering,
        failure: Ordering,
    ) -> Result<W, W> {
        self.0
            .compare_exchange_weak(current.bits(), new.bits(), success, failure)
            .map(W::from_bits)
            .map_err(W::from_bits)
    }

    /// Subtracts `n` from the word's bits (a count in its low bits, which must be at least
    /// `n`), returning the word before.
    #[inline(always)]
    pub(crate) fn fetch_sub(&self, n: u64, order: Ordering) -> W {
        W::from_bits(self.0.fetch_sub(n, order))
    }
}
