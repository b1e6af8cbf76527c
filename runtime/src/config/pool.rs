//! The equal-config pool: one shared `Arc<Config>` per distinct config.

use std::sync::Arc;

use super::settings::Config;
use crate::clock::ClockRef;

/// One shared `Arc` per distinct config, so that per-key breakers made by the thousand from
/// one config pay for it once. Runs only when a breaker is created, in O(1) amortized however
/// many breakers are alive: configs are found by hash (a config with a clock of its own hashes
/// by the clock's address, so a config is shared only by its clones, as equality says), and
/// entries of configs no breaker uses any more are swept when the pool has doubled since the
/// last sweep. Until then a dead entry keeps its config's allocation (not the clock), so the
/// pool holds at most about twice the configs that were alive at once.
pub(crate) fn intern(config: Config) -> Arc<Config> {
    static POOL: std::sync::LazyLock<std::sync::Mutex<Pool>> =
        std::sync::LazyLock::new(Default::default);
    let hash = config_hash(&config);
    // Dropped after the lock: a config's last reference may be one of these, and dropping it
    // drops the user's clock, whose `Drop` is user code.
    let mut spare = Vec::new();
    let (shared, unused) = POOL
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .intern(config, hash, &mut spare);
    drop((spare, unused));
    shared
}

/// The weak references behind `intern`, by the config's hash.
#[derive(Default)]
struct Pool {
    by_hash: std::collections::HashMap<u64, Vec<std::sync::Weak<Config>>>,
    /// Entries in `by_hash`, dead or alive.
    entries: usize,
    /// Sweep the dead entries when `entries` reaches this.
    sweep_at: usize,
}

impl Pool {
    /// The pooled config equal to `config` (and `config`, unused), or `config` pooled. What
    /// the caller drops after the lock is returned or put in `spare`.
    fn intern(
        &mut self,
        config: Config,
        hash: u64,
        spare: &mut Vec<Arc<Config>>,
    ) -> (Arc<Config>, Option<Config>) {
        let bucket = self.by_hash.entry(hash).or_default();
        let before = bucket.len();
        bucket.retain(|w| w.strong_count() > 0);
        self.entries -= before - bucket.len();
        for weak in bucket.iter() {
            work(1);
            if let Some(same) = weak.upgrade() {
                if *same == config {
                    return (same, Some(config));
                }
                spare.push(same);
            }
        }
        let config = Arc::new(config);
        bucket.push(Arc::downgrade(&config));
        self.entries += 1;
        if self.entries >= self.sweep_at {
            self.sweep();
        }
        (config, None)
    }

    fn sweep(&mut self) {
        work(self.entries as u64);
        self.by_hash.retain(|_, bucket| {
            bucket.retain(|w| w.strong_count() > 0);
            !bucket.is_empty()
        });
        self.entries = self.by_hash.values().map(Vec::len).sum();
        self.sweep_at = (2 * self.entries).max(64);
    }
}

// Counts the pool's work (comparisons and entries swept) on this thread, for the test that
// holds creation to O(1) amortized.
#[cfg(all(test, not(loom)))]
thread_local!(pub(crate) static POOL_WORK: core::cell::Cell<u64> = const { core::cell::Cell::new(0) });

#[inline]
fn work(_n: u64) {
    #[cfg(all(test, not(loom)))]
    POOL_WORK.with(|w| w.set(w.get() + _n));
}

/// A hash that agrees with `Config`'s `==`: equal configs hash alike.
fn config_hash(config: &Config) -> u64 {
    use std::hash::{Hash, Hasher};
    // Every field, by name: a new field fails to compile here until it is hashed (or left
    // out on purpose, which only makes more configs share a hash).
    let Config {
        failures,
        failures_within,
        failure_rate,
        window,
        min_calls,
        slow,
        slow_rate,
        open_for,
        max_open_for,
        backoff,
        jitter,
        half_open_calls,
        successes,
        probe_timeout,
        max_concurrent,
        probe,
        probe_every,
        max_keys,
        idle_for,
        latency,
        health,
        critical,
        timeout,
        clock,
    } = config;
    let mut h = std::hash::DefaultHasher::new();
    (failures, failures_within, failure_rate, window, min_calls).hash(&mut h);
    (slow, slow_rate, open_for, max_open_for).hash(&mut h);
    (half_open_calls, successes, probe_timeout, max_concurrent).hash(&mut h);
    (max_keys, idle_for, probe_every).hash(&mut h);
    (latency, health, critical, timeout).hash(&mut h);
    if let Some(probe) = probe {
        probe.hash_into(&mut h);
    }
    // `+ 0.0` makes -0.0 (equal to 0.0) hash as 0.0.
    ((backoff + 0.0).to_bits(), (jitter + 0.0).to_bits()).hash(&mut h);
    match clock {
        ClockRef::System => 0usize.hash(&mut h),
        // The address alone, as `Arc::ptr_eq` compares it.
        ClockRef::Custom(c) => (Arc::as_ptr(c) as *const () as usize).hash(&mut h),
    }
    h.finish()
}
