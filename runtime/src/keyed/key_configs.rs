//! What a keyed family's config is replaced with beside the family's own: the configs of single
//! keys (`[breakers.<family>.keys."<key>"]`) and the reload generation new keys compare
//! against (see `family_config.rs` for the protocol).

use core::fmt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::config::Config;

/// The configs of single keys, by the key as it displays.
pub(crate) type KeyTable = HashMap<String, Config>;

/// What a family's config can be replaced with, beside the config itself (`Family::config`).
#[derive(Default)]
pub(super) struct KeyConfigs {
    /// Bumped by each reload after it swaps the configs, before it walks the keys.
    pub(super) generation: AtomicU64,
    /// `[breakers.<family>.keys."<key>"]` tables; `has_keys` says whether any, so that a new
    /// key of a family without them reads no lock.
    pub(super) keys: Mutex<Arc<KeyTable>>,
    pub(super) has_keys: AtomicBool,
    /// Held by a reload while it swaps the configs: one reload at a time.
    pub(super) reloading: Mutex<()>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl KeyConfigs {
    /// Sets the single keys' configs.
    pub(super) fn set_keys(&self, keys: KeyTable) {
        let has = !keys.is_empty();
        let old = core::mem::replace(&mut *lock(&self.keys), Arc::new(keys));
        self.has_keys.store(has, Ordering::Release);
        // Dropped after the lock: a config may hold the last reference to a user's clock.
        drop(old);
    }

    /// The config of `key` if it has its own (without the family's clock).
    pub(super) fn own(&self, key: &impl fmt::Display) -> Option<Config> {
        if !self.has_keys.load(Ordering::Acquire) {
            return None;
        }
        let table = lock(&self.keys).clone();
        // The key's `Display` is user code: no lock held.
        table.get(&key.to_string()).cloned()
    }

    pub(super) fn keys(&self) -> Arc<KeyTable> {
        lock(&self.keys).clone()
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}
