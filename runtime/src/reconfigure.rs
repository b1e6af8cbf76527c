//! Hot reload that keeps state: a live breaker's config replaced without losing its state,
//! counts, window or open time.

use crate::sync::{AtomicPtr, Ordering};
use std::sync::Arc;

use crate::config::Config;

/// A breaker's config, replaceable while calls read it: a pointer to a shared config, read
/// with one load (as the `Arc` it replaces was). A config replaced by
/// [`swap`](LiveConfig::swap) must outlive every reference handed out before: the breaker
/// keeps each old one until it is dropped.
pub(crate) struct LiveConfig(AtomicPtr<Config>);

impl LiveConfig {
    pub(crate) fn new(config: Arc<Config>) -> LiveConfig {
        LiveConfig(AtomicPtr::new(Arc::into_raw(config).cast_mut()))
    }

    /// Puts `config` in place and returns the one it replaces.
    ///
    /// # Safety
    ///
    /// The caller keeps the returned config alive as long as this `LiveConfig`: references
    /// read from it before the swap may still be in use.
    pub(crate) unsafe fn swap(&self, config: Arc<Config>) -> Arc<Config> {
        let old = self
            .0
            .swap(Arc::into_raw(config).cast_mut(), Ordering::AcqRel);
        // SAFETY: every pointer stored here came from `Arc::into_raw`, and this one is taken
        // out of the slot by the swap, so its count is handed back once.
        unsafe { Arc::from_raw(old) }
    }
}

impl core::ops::Deref for LiveConfig {
    type Target = Config;

    #[inline]
    fn deref(&self) -> &Config {
        // SAFETY: the pointer is a live `Arc`'s (held by the slot), and a replaced one is kept
        // alive by the breaker for as long as this `LiveConfig` (see `swap`).
        unsafe { &*self.0.load(Ordering::Acquire) }
    }
}

impl Drop for LiveConfig {
    fn drop(&mut self) {
        // A swap, not `get_mut`, which loom's atomics lack; `&mut self` already orders it.
        let own = self.0.swap(core::ptr::null_mut(), Ordering::Acquire);
        // SAFETY: the slot's own reference, given back once.
        unsafe { drop(Arc::from_raw(own)) };
    }
}

/// A [`LiveConfig`] that keeps every config it replaces for as long as it lives, so that a
/// reference read from it stays valid without the caller keeping anything: a keyed family's
/// config, which [`BreakerMap::config`](crate::BreakerMap::config) lends out.
pub(crate) struct KeptConfig {
    live: LiveConfig,
    retired: std::sync::Mutex<Vec<Arc<Config>>>,
}

impl KeptConfig {
    pub(crate) fn new(config: Arc<Config>) -> KeptConfig {
        KeptConfig {
            live: LiveConfig::new(config),
            retired: std::sync::Mutex::default(),
        }
    }

    /// Puts `config` in place; the one it replaces is kept.
    pub(crate) fn replace(&self, config: Arc<Config>) {
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the replaced config goes to `retired`, which lives as long as `live`.
        retire(&mut retired, unsafe { self.live.swap(config) });
    }
}

/// Keeps `old`, a config just replaced, in `retired`, once: configs are interned, so a
/// breaker switched between a few configs again and again keeps each of them once, not once
/// a switch. An `old` already there is dropped, its allocation kept by the entry.
pub(crate) fn retire(retired: &mut Vec<Arc<Config>>, old: Arc<Config>) {
    if !retired.iter().any(|kept| Arc::ptr_eq(kept, &old)) {
        retired.push(old);
    }
}

impl core::ops::Deref for KeptConfig {
    type Target = Config;

    #[inline]
    fn deref(&self) -> &Config {
        &self.live
    }
}

/// Why [`Breaker::reconfigure`](crate::Breaker::reconfigure) (or
/// `Registry::reload_toml`) refused a config for a live breaker: it changes a key that
/// shapes the breaker's window or call path, which only a new breaker can take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{field}` cannot change on a live breaker: {why}; it applies to breakers created after the \
     change (restart to apply it to this one)"
)]
pub struct ReconfigureError {
    /// The key that cannot change.
    pub field: &'static str,
    /// Why.
    pub why: &'static str,
}

/// The keys a live breaker cannot take a new value of, or only within a kind: `Err` names the
/// first that differs.
pub(crate) fn compatible(old: &Config, new: &Config) -> Result<(), ReconfigureError> {
    let refuse = |field, why| Err(ReconfigureError { field, why });
    if old.failure_rate.is_some() != new.failure_rate.is_some() {
        return refuse(
            "failure_rate",
            "switching between consecutive failures and a failure rate changes the policy",
        );
    }
    if old.slow_rate.is_some() != new.slow_rate.is_some() {
        return refuse(
            "slow_rate",
            "adding or removing a slow-call rate adds or removes the window",
        );
    }
    if old.uses_window() && old.window != new.window {
        return refuse(
            "window",
            "the window's kind and size are fixed when it is made",
        );
    }
    if old.slow.is_some() != new.slow.is_some() {
        return refuse(
            "slow",
            "adding or removing `slow` changes whether calls are timed",
        );
    }
    if old.timed() != new.timed() {
        return refuse(
            "latency",
            "turning `latency` on or off without `slow` changes whether calls are timed",
        );
    }
    if old.max_concurrent.is_some() != new.max_concurrent.is_some() {
        return refuse(
            "max_concurrent",
            "adding or removing the bulkhead changes the call path",
        );
    }
    if old.failures_within.is_some() != new.failures_within.is_some() {
        return refuse(
            "failures_within",
            "adding or removing it changes how the streak is counted",
        );
    }
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A config read while another thread replaces it again and again is one whole config,
    /// the old or the new; one read before the replacements stays readable after them; and
    /// each replaced config is kept once, however often it comes back. (Under Miri,
    /// `scripts/test` checks these reads against the swaps for data races and use after
    /// free.)
    #[test]
    fn a_config_read_while_another_thread_replaces_it_is_one_whole_config() {
        let rounds = if cfg!(miri) { 20 } else { 2_000 };
        let two = Arc::new(Config::builder().failures(2).build().unwrap());
        let three = Arc::new(Config::builder().failures(3).build().unwrap());
        let kept = KeptConfig::new(two.clone());
        let first: &Config = &kept;
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..rounds {
                    kept.replace(if i % 2 == 0 {
                        three.clone()
                    } else {
                        two.clone()
                    });
                }
            });
            for _ in 0..rounds {
                let read: &Config = &kept;
                assert!(matches!(read.failures, 2 | 3), "{}", read.failures);
            }
        });
        assert_eq!(first.failures, 2, "a replaced config stays readable");
        assert_eq!(kept.failures, 2, "the last replacement is in place");
        let retired = kept.retired.lock().unwrap();
        assert_eq!(retired.len(), 2, "each config kept once");
    }
}
