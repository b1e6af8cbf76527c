//! A family's config replaced live (`Registry::reload_toml`): the config new keys get, the
//! configs of single keys, and every live key's breaker, keeping their state.
//!
//! # The protocol
//!
//! A reload swaps the family's config and its single keys' configs, bumps `generation`, then
//! brings every key it finds to its new config ([`Family::settle`]). A key created meanwhile
//! may be made from the old config and missed by that walk, so whoever makes a key reads
//! `generation` before, and settles the key if it moved by the time the key is in the map:
//! either the walk finds the key, or its maker sees the bump (a `SeqCst` fence between the
//! insertion and the look, and between the bump and the walk, make this the store-buffering
//! pattern that such fences forbid). `settle` itself reads the config after reading
//! `generation` and repeats until `generation` holds still, so of two racing reloads the
//! later one's config is what every key ends with: a `reconfigure` takes the breaker's
//! transition lock, so one made after a reload's (of the same key) sees that reload's bump.
//!
//! No lock of ours is held while user code runs (a key's `Display`, a clock dropped with a
//! config): `keys` and `reloading` are locked only to read or swap a pointer.

#![cfg_attr(not(feature = "serde"), allow(dead_code))]

use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use crate::config::Config;

use super::family::Family;
pub(crate) use super::family::KeyTable;
use super::family::lock;

impl<K, S> Family<K, S>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    /// Whether the family can take `config` and `keys` live: `Err` names the key whose breaker
    /// (or config, for keys not held now) cannot, `None` for the family's own config.
    fn check(&self, config: &Config, keys: &KeyTable) -> Result<(), Refused> {
        let family = |error| Refused { key: None, error };
        if self.config.max_keys != config.max_keys {
            return Err(family(FamilyRefusal::Bounds("max_keys")));
        }
        if self.config.idle_for != config.idle_for {
            return Err(family(FamilyRefusal::Bounds("idle_for")));
        }
        crate::reconfigure::compatible(&self.config, config)
            .map_err(|e| family(FamilyRefusal::Shape(e)))?;
        let key = |k: &str, e| Refused {
            key: Some(k.to_owned()),
            error: FamilyRefusal::Shape(e),
        };
        // Keys with a config of their own, before or after: held or not, as they would be made.
        let old = self.live.keys();
        for k in old.keys().chain(keys.keys()) {
            let was = old.get(k).unwrap_or(&self.config);
            let will = keys.get(k).unwrap_or(config);
            crate::reconfigure::compatible(was, will).map_err(|e| key(k, e))?;
        }
        // And every breaker held now, as it is.
        let mut refused = Ok(());
        let guard = self.map.guard();
        for (k, slot) in self.map.iter(&guard) {
            // A key's `Display` (user code) runs only when the file has key tables.
            let will = if keys.is_empty() {
                config
            } else {
                keys.get(&k.to_string()).unwrap_or(config)
            };
            if let Err(e) = crate::reconfigure::compatible(slot.breaker.config(), will) {
                refused = Err(key(&k.to_string(), e));
                break;
            }
        }
        refused?;
        if let Some(b) = self.overflow.get() {
            crate::reconfigure::compatible(b.config(), config)
                .map_err(|e| family(FamilyRefusal::Shape(e)))?;
        }
        Ok(())
    }

    /// Replaces the family's config and its single keys', then brings every key to them.
    fn apply(&self, mut config: Config, keys: KeyTable) {
        config.clock = self.config.clock.clone();
        // A config from a file names no probe function: the code's stays.
        if config.probe.is_none() {
            config.probe = self.config.probe.clone();
        }
        // Interned outside the locks (the pool may drop a config, and with it a clock): a
        // family switched between configs again and again keeps each of them once.
        let config = crate::config::intern(config);
        let old = {
            let _reloading = lock(&self.live.reloading);
            let has = !keys.is_empty();
            let old_keys = core::mem::replace(&mut *lock(&self.live.keys), Arc::new(keys));
            self.live.has_keys.store(has, Ordering::Release);
            // An equal config is not swapped: each replaced one is kept for the family's
            // life, so reloading an unchanged file must not add one. (The unused one is
            // dropped after the locks, with the old keys.)
            let unused = if *self.config == *config {
                Some(config)
            } else {
                self.config.replace(config);
                None
            };
            self.live.generation.fetch_add(1, Ordering::SeqCst);
            (old_keys, unused)
        };
        // The bump, then the walk (see `Family::fresh`).
        fence(Ordering::SeqCst);
        // Dropped after the locks: a config may hold the last reference to a user's clock.
        drop(old);
        let guard = self.map.guard();
        for (k, slot) in self.map.iter(&guard) {
            // A key's `Display` is user code: if it panics, that key keeps its config, and the
            // walk goes on to the others.
            let settled = catch_unwind(AssertUnwindSafe(|| self.settle(k, &slot.breaker)));
            if settled.is_err() {
                tracing::error!(target: "breakerbox", family = %self.name, "a key's `Display` panicked during a reload: that key keeps its config");
            }
        }
        if let Some(b) = self.overflow.get() {
            self.settle_with(b, |_| None);
        }
    }
}

/// Why a family cannot take a reload.
pub(crate) enum FamilyRefusal {
    /// A config that changes a breaker's shape (see [`compatible`](crate::reconfigure::compatible)).
    Shape(crate::reconfigure::ReconfigureError),
    /// `max_keys` or `idle_for`, which are fixed when the family is made.
    Bounds(&'static str),
}

/// A family's refusal of a reload: the key whose config cannot change (as it displays), or
/// `None` for the family's.
pub(crate) struct Refused {
    pub(crate) key: Option<String>,
    pub(crate) error: FamilyRefusal,
}

/// A registered family's reload, whatever its key type.
pub(crate) trait Reload {
    /// Whether the family can take `config` and `keys` without losing any key's state.
    fn check(&self, config: &Config, keys: &KeyTable) -> Result<(), Refused>;
    /// Applies them; call [`check`](Reload::check) first.
    fn apply(&self, config: Config, keys: KeyTable);
    /// The config its new keys get now.
    fn config(&self) -> Config;
}

impl<K, S> Reload for super::breaker_map::BreakerMap<K, S>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    fn check(&self, config: &Config, keys: &KeyTable) -> Result<(), Refused> {
        self.family.check(config, keys)
    }

    fn apply(&self, config: Config, keys: KeyTable) {
        self.family.apply(config, keys)
    }

    fn config(&self) -> Config {
        super::breaker_map::BreakerMap::config(self).clone()
    }
}
