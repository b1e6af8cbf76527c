//! One place that picks std or loom primitives, so the atomic protocols can be model-checked.

#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

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
