//! The process-wide registry: one breaker per name.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use crate::breaker::Breaker;
use crate::clock::{Clock, ClockRef};
use crate::config::Config;
use crate::event::{Event, Listener};
use crate::metrics::Metrics;

/// Named breakers shared across the process.
///
/// `#[circuit_breaker(name = "users")]` resolves its breaker here once, so every function
/// naming `users` shares one breaker. The first config to create a name wins; a later call
/// site with a different config gets the existing breaker and a warning is logged once per
/// name. A config [`configure`](Registry::configure)d before first use wins over every call
/// site's.
///
/// Breakers in the registry live as long as the process.
///
/// ```
/// use breakerbox_runtime::{registry, Config, State};
///
/// registry().configure("inventory", Config::builder().failures(3).build()?);
/// let a = registry().get_or_create("inventory", Config::default);
/// let b = registry().get("inventory").unwrap();
/// assert!(a.same(&b));
/// assert_eq!(a.config().failures(), Some(3));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
pub struct Registry {
    breakers: RwLock<HashMap<Box<str>, Entry>>,
    presets: Mutex<HashMap<String, Preset>>,
    listeners: RwLock<Vec<Listener>>,
}

struct Entry {
    breaker: Breaker,
    preset: bool,
    warned: AtomicBool,
}

#[derive(Default)]
struct Preset {
    config: Option<Config>,
    clock: Option<Arc<dyn Clock>>,
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry {
    breakers: RwLock::default(),
    presets: Mutex::default(),
    listeners: RwLock::default(),
});

/// The process-wide [`Registry`].
pub fn registry() -> &'static Registry {
    &REGISTRY
}

// Poisoning carries no information here: every critical section leaves the maps consistent.
fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}
fn lock<T>(l: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

impl Registry {
    /// The breaker named `name`, created with `config()` if it does not exist yet (a config
    /// registered with [`configure`](Registry::configure) wins over `config`).
    pub fn get_or_create(&self, name: &str, config: impl FnOnce() -> Config) -> Breaker {
        if let Some(entry) = read(&self.breakers).get(name) {
            self.check_same(name, entry, config());
            return entry.breaker.clone();
        }
        let wanted = config();
        let mut map = write(&self.breakers);
        if let Some(entry) = map.get(name) {
            self.check_same(name, entry, wanted);
            return entry.breaker.clone();
        }
        let preset = lock(&self.presets).remove(name).unwrap_or_default();
        let from_preset = preset.config.is_some();
        let mut config = preset.config.unwrap_or(wanted);
        if let Some(clock) = preset.clock {
            config.clock = ClockRef::Custom(clock);
        }
        let breaker = Breaker::leaked(name.to_owned(), config);
        map.insert(
            name.into(),
            Entry {
                breaker: breaker.clone(),
                preset: from_preset,
                warned: AtomicBool::new(false),
            },
        );
        breaker
    }

    fn check_same(&self, name: &str, entry: &Entry, wanted: Config) {
        let have = entry.breaker.config();
        // The clock is not part of the policy: a preset clock must not make configs differ.
        let mut wanted = wanted;
        wanted.clock = have.clock.clone();
        let differs = *have != wanted;
        if differs && !entry.preset && !entry.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "breakerbox",
                name,
                "two call sites give circuit breaker '{name}' different configs; the first one created it and is used"
            );
        }
    }

    /// The breaker named `name`, if it exists.
    pub fn get(&self, name: &str) -> Option<Breaker> {
        read(&self.breakers).get(name).map(|e| e.breaker.clone())
    }

    /// Registers the config for `name`, to be used when it is first created, over the call
    /// site's. Returns `false` (and changes nothing) if the breaker already exists.
    pub fn configure(&self, name: &str, config: Config) -> bool {
        let map = read(&self.breakers);
        if map.contains_key(name) {
            tracing::warn!(target: "breakerbox", name, "circuit breaker '{name}' already exists; its config is not changed");
            return false;
        }
        lock(&self.presets)
            .entry(name.to_owned())
            .or_default()
            .config = Some(config);
        true
    }

    /// Makes the breaker `name` read `clock` when it is created, whatever config creates it.
    /// Returns `false` if the breaker already exists. Tests use it with a
    /// [`ManualClock`](crate::ManualClock).
    pub fn set_clock(&self, name: &str, clock: impl Clock) -> bool {
        let map = read(&self.breakers);
        if map.contains_key(name) {
            return false;
        }
        lock(&self.presets)
            .entry(name.to_owned())
            .or_default()
            .clock = Some(Arc::new(clock));
        true
    }

    /// Every breaker, in no particular order.
    pub fn breakers(&self) -> Vec<Breaker> {
        read(&self.breakers)
            .values()
            .map(|e| e.breaker.clone())
            .collect()
    }

    /// The metrics of every breaker, sorted by name.
    pub fn snapshot(&self) -> Vec<Metrics> {
        let mut all: Vec<Metrics> = self.breakers().iter().map(Breaker::metrics).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Resets every breaker.
    pub fn reset_all(&self) {
        for b in self.breakers() {
            b.reset();
        }
    }

    /// Calls `listener` on every state change of every breaker in the registry.
    pub fn on_state_change(&self, listener: impl Fn(&Event) + Send + Sync + 'static) {
        write(&self.listeners).push(Arc::new(listener));
    }

    pub(crate) fn notify(&self, event: &Event) {
        let listeners: Vec<Listener> = read(&self.listeners).clone();
        for l in &listeners {
            l(event);
        }
    }
}

impl core::fmt::Debug for Registry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Registry")
            .field("breakers", &read(&self.breakers).len())
            .finish()
    }
}
