//! One place that picks std or loom primitives, so the atomic protocols can be model-checked.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, RwLock};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, RwLock};

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

pub(crate) fn read<T>(m: &RwLock<T>) -> impl core::ops::Deref<Target = T> + '_ {
    m.read().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn write<T>(m: &RwLock<T>) -> impl core::ops::DerefMut<Target = T> + '_ {
    m.write().unwrap_or_else(|e| e.into_inner())
}
