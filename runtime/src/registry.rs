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
    presets: Mutex<Presets>,
    listeners: RwLock<Vec<Listener>>,
}

struct Entry {
    breaker: Breaker,
    preset: bool,
    warned: AtomicBool,
}

#[derive(Default)]
struct Presets {
    by_name: HashMap<String, Preset>,
    /// Bumped by every change, so that a creator that read a preset before building its
    /// breaker (outside the locks) sees at insertion whether it still holds.
    version: u64,
}

#[derive(Clone, Default)]
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

// No user code runs under the registry's locks: not the config closure, not a new breaker's
// first clock read, not the drop of a config (which may drop the user's clock), not a
// `tracing` subscriber. User code may call the registry again, or wait for a thread that does.

impl Registry {
    /// The breaker named `name`, created with `config()` if it does not exist yet (a config
    /// registered with [`configure`](Registry::configure) wins over `config`).
    ///
    /// `config` runs under no lock of the registry's: it may use the registry itself. If two
    /// threads create one name at once, each may run its closure; the first breaker inserted
    /// wins, and the other thread's config is discarded (a difference is logged as for two
    /// call sites).
    pub fn get_or_create(&self, name: &str, config: impl FnOnce() -> Config) -> Breaker {
        if let Some(breaker) = self.get(name) {
            self.check_same(name, &breaker, config());
            return breaker;
        }
        let wanted = config();
        loop {
            // The preset that applies, read now and checked again at insertion.
            let (preset, version) = {
                let presets = lock(&self.presets);
                let preset = presets.by_name.get(name).cloned().unwrap_or_default();
                (preset, presets.version)
            };
            let from_preset = preset.config.is_some();
            let mut config = preset.config.unwrap_or_else(|| wanted.clone());
            if let Some(clock) = preset.clock {
                config.clock = ClockRef::Custom(clock);
            }
            // Built outside the locks: a new breaker reads its clock.
            let candidate = Breaker::unpublished(name.to_owned(), config);
            let mut map = write(&self.breakers);
            if let Some(entry) = map.get(name) {
                // Another thread created it meanwhile: its breaker stands.
                let existing = entry.breaker.clone();
                drop(map);
                drop(candidate);
                self.check_same(name, &existing, wanted);
                return existing;
            }
            let mut presets = lock(&self.presets);
            if presets.version != version {
                // Configured meanwhile: build again with what applies now.
                drop(presets);
                drop(map);
                drop(candidate);
                continue;
            }
            let used = presets.by_name.remove(name);
            drop(presets);
            let breaker = candidate.publish();
            map.insert(
                name.into(),
                Entry {
                    breaker: breaker.clone(),
                    preset: from_preset,
                    warned: AtomicBool::new(false),
                },
            );
            drop(map);
            drop(used);
            return breaker;
        }
    }

    fn check_same(&self, name: &str, breaker: &Breaker, wanted: Config) {
        let have = breaker.config();
        // The clock is not part of the policy: a preset clock must not make configs differ.
        let mut wanted = wanted;
        wanted.clock = have.clock.clone();
        if *have == wanted {
            return;
        }
        let warn = read(&self.breakers)
            .get(name)
            .is_some_and(|e| !e.preset && !e.warned.swap(true, Ordering::Relaxed));
        if warn {
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
        if self.preset(name, |p| p.config.replace(config)).is_some() {
            return true;
        }
        tracing::warn!(target: "breakerbox", name, "circuit breaker '{name}' already exists; its config is not changed");
        false
    }

    /// Makes the breaker `name` read `clock` when it is created, whatever config creates it.
    /// Returns `false` if the breaker already exists. Tests use it with a
    /// [`ManualClock`](crate::ManualClock).
    pub fn set_clock(&self, name: &str, clock: impl Clock) -> bool {
        self.preset(name, |p| p.clock.replace(Arc::new(clock)))
            .is_some()
    }

    /// Changes the preset of `name` with `f`, unless the breaker exists (`None`). What `f`
    /// returns (the value it replaced) is dropped by the caller, outside the locks.
    fn preset<T>(&self, name: &str, f: impl FnOnce(&mut Preset) -> T) -> Option<T> {
        // The map's lock is held while the preset changes, so that no breaker is created
        // between the check and the change; creation then sees the new version.
        let map = read(&self.breakers);
        if map.contains_key(name) {
            return None;
        }
        let mut presets = lock(&self.presets);
        presets.version += 1;
        Some(f(presets.by_name.entry(name.to_owned()).or_default()))
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

    /// Calls `listener` on every state change of every breaker in the registry, in the order
    /// of each breaker's changes, after that breaker's own listeners
    /// ([`Breaker::on_state_change`], which says on which thread they run).
    ///
    /// A listener's panic is caught and logged at `error` (target `breakerbox`, with the
    /// breaker's name and the panic's message); it never reaches the caller, and later
    /// listeners and events are told as usual. A listener may use the registry and the
    /// breaker, and wait for threads that do.
    pub fn on_state_change(&self, listener: impl Fn(&Event) + Send + Sync + 'static) {
        write(&self.listeners).push(Arc::new(listener));
    }

    pub(crate) fn notify(&self, event: &Event) {
        let listeners: Vec<Listener> = read(&self.listeners).clone();
        crate::event::tell(&listeners, event, "registry listener");
    }
}

impl core::fmt::Debug for Registry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Registry")
            .field("breakers", &read(&self.breakers).len())
            .finish()
    }
}
