//! The process-wide registry: one breaker per name.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::panic::Location;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, RwLock};

use crate::breaker::Breaker;
use crate::clock::Clock;
use crate::config::Config;
pub(crate) use crate::config::layers::key_account;
use crate::config::layers::{self, Built, FileBooks, Given, Layered};
use crate::event::Event;
use crate::metrics::Metrics;
use crate::registration::{
    ConfigConflict, Conflict, Conflicts, Registration, Site, conflict, registrations, same_policy,
};

/// Named breakers shared across the process.
///
/// `#[circuit_breaker(name = "users")]` resolves its breaker here once, so every function
/// naming `users` shares one breaker.
///
/// # Annotated breakers are known from the start
///
/// Every `#[circuit_breaker]` function registers its name, config and source line at link
/// time (through a `linkme` distributed slice, which the registry reads on its first use; see
/// the crate's README for why `linkme`). So [`names`](Registry::names) lists annotated
/// breakers before their first call, and [`get`](Registry::get) and
/// [`breakers`](Registry::breakers) create them on demand, each with its attribute's config.
/// The call path does not change: each function keeps its breaker in a static of its own and
/// looks nothing up per call. On platforms `linkme` does not support (WebAssembly among them)
/// an annotated breaker is known from its first call only.
///
/// # Which config a breaker gets
///
/// A config [`configure`](Registry::configure)d before the breaker is created wins over every
/// call site's (and the attribute's): that is an override, not a conflict. `load_toml` builds
/// a config from layers, key by key: its file's keys over the code's, which are the configured
/// config's, else the attribute's, else those of the call that made the breaker (see
/// `Registry::load_toml`), and that config is the override. Else an annotated name gets its attribute's config, whoever
/// creates it first (with two attributes, the first by file and line); any other name gets the
/// config of the call that creates it.
///
/// # Conflicts are loud
///
/// A call site asking for a config that differs from the breaker's gets the existing breaker,
/// and [`try_get_or_create`](Registry::try_get_or_create) says so in its return value.
/// [`check`](Registry::check), run at startup, reports every name that attributes or calls
/// give different configs, with each site's file and line. Call
/// [`configure`](Registry::configure) before anything creates the breaker:
/// [`get`](Registry::get), [`breakers`](Registry::breakers), [`snapshot`](Registry::snapshot)
/// and metrics exporters create the annotated ones. A config file may come before or after:
/// `load_toml` applies to a breaker that exists live.
///
/// Breakers in the registry live as long as the process.
///
/// ```
/// use breakerbox_runtime::{registry, Config, State};
///
/// registry().configure("inventory", Config::builder().failures(3).build()?);
/// let a = registry().get_or_create("inventory", Config::default);
/// let b = registry().get("inventory").unwrap();
/// assert!(a.ptr_eq(&b));
/// assert_eq!(a.config().failures(), Some(3));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
pub struct Registry {
    breakers: RwLock<HashMap<Box<str>, Entry>>,
    presets: Mutex<Presets>,
    /// The `#[circuit_breaker]` functions of the program by name, each name's sorted by site.
    registered: HashMap<&'static str, Vec<&'static Registration>>,
    /// The `#[circuit_breaker(key = …)]` functions by name: keyed families, not breakers.
    keyed: HashMap<&'static str, Vec<&'static Registration>>,
    /// The sites that gave each name a config at run time: the one that created it and each
    /// one that asked for another, with the config it gave.
    sites: Mutex<HashMap<Box<str>, Sites>>,
    /// What the config files loaded gave each name: where each key came from, the tables,
    /// what each file reached.
    pub(crate) files: FileBooks,
    /// The configs each name was given by [`configure`](Registry::configure), each with its
    /// call's site, the last given last: the code's layer under a config file's tables, kept
    /// after the breaker is made so that every later file layers over it again; and for
    /// `check`, which reports two sites that give different ones.
    configured: Mutex<HashMap<Box<str>, Sites>>,
}

/// Sites with the config each gave.
type Sites = Vec<(Site, Config)>;

struct Entry {
    breaker: Breaker,
    preset: bool,
    /// Where the config came from; `None` for a preset.
    site: Option<Site>,
}

#[derive(Default)]
struct Presets {
    by_name: HashMap<String, Preset>,
    /// A config file's layers for a name made in code: put over the config of the call that
    /// creates the breaker, instead of its preset's `config` (the same layers over the
    /// defaults).
    layered: HashMap<String, Layered>,
    /// Bumped by every change, so that a creator that read a preset before building its
    /// breaker (outside the locks) sees at insertion whether it still holds.
    version: u64,
}

/// Held by a config load from its first read of what the registry has to its last change, and
/// by a keyed family's creation while it checks its preset and publishes the family: loads run
/// one at a time, and a family is made either before a load (which then finds it live) or
/// after (from the preset the load wrote). User code runs under it only as a load runs it: a
/// key's `Display` matched against key tables, a tracing subscriber, the `Drop` of a replaced
/// config's clock or probe. Such code on the load's own thread may load or make a family (see
/// [`one_load_at_a_time`]); code that waits for another thread doing so waits for the load.
static LOADS: Mutex<()> = Mutex::new(());

thread_local! {
    /// Whether this thread holds [`LOADS`]: user code run by a load (a key's `Display`, a
    /// tracing subscriber) that loads a file or makes a family on the same thread goes on
    /// without it, rather than wait for itself.
    static HOLDS_LOADS: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// [`LOADS`], held until dropped; nothing if this thread holds it already.
pub(crate) struct OneLoad(Option<std::sync::MutexGuard<'static, ()>>);

/// Waits for [`LOADS`], unless this thread holds it.
pub(crate) fn one_load_at_a_time() -> OneLoad {
    if HOLDS_LOADS.with(core::cell::Cell::get) {
        return OneLoad(None);
    }
    let guard = LOADS.lock().unwrap_or_else(|e| e.into_inner());
    HOLDS_LOADS.with(|holds| holds.set(true));
    OneLoad(Some(guard))
}

impl Drop for OneLoad {
    fn drop(&mut self) {
        if self.0.is_some() {
            HOLDS_LOADS.with(|holds| holds.set(false));
        }
    }
}

/// What is set for a name before its breaker (or keyed family) is created.
#[derive(Clone, Default)]
pub(crate) struct Preset {
    pub(crate) config: Option<Config>,
    pub(crate) clock: Option<Arc<dyn Clock>>,
    /// For a keyed family: the configs of single keys, by the key as it displays.
    pub(crate) keys: HashMap<String, Config>,
}

/// What the registry asks of the keyed families (`keyed`, which imports the registry):
/// whether a name is a family's, and the config its keys are made with. `keyed` hands the
/// registry its answer before it makes its first family ([`know_families`]); until then no
/// family exists to ask about.
pub(crate) trait FamilyIndex: Sync {
    /// Whether a keyed family named `name` exists.
    fn exists(&self, name: &str) -> bool;
    /// The config the keys of the family `name` are made with, if it exists.
    #[cfg(feature = "serde")]
    fn config(&self, name: &str) -> Option<Config>;
}

static FAMILY_INDEX: OnceLock<&'static dyn FamilyIndex> = OnceLock::new();

/// Gives the registry the families' index; the first call's is kept.
pub(crate) fn know_families(index: &'static dyn FamilyIndex) {
    let _ = FAMILY_INDEX.set(index);
}

/// Whether a keyed family named `name` exists.
fn is_family(name: &str) -> bool {
    FAMILY_INDEX.get().is_some_and(|index| index.exists(name))
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| Registry {
    breakers: RwLock::default(),
    presets: Mutex::default(),
    registered: registered(false),
    keyed: registered(true),
    sites: Mutex::default(),
    files: FileBooks::default(),
    configured: Mutex::default(),
});

/// The registrations the linker gathered, keyed or not, by name.
fn registered(keyed: bool) -> HashMap<&'static str, Vec<&'static Registration>> {
    let mut by_name: HashMap<&'static str, Vec<&'static Registration>> = HashMap::new();
    for registration in registrations().iter().filter(|r| r.is_keyed() == keyed) {
        by_name
            .entry(registration.name())
            .or_default()
            .push(registration);
    }
    for list in by_name.values_mut() {
        list.sort_by_key(|r| r.site());
    }
    by_name
}

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
    /// registered with [`configure`](Registry::configure) wins over `config`, and an annotated
    /// name gets its attribute's config).
    ///
    /// `config` runs under no lock of the registry's: it may use the registry itself. If two
    /// threads create one name at once, each may run its closure; the first breaker inserted
    /// wins, and the other thread's is dropped.
    ///
    /// If the breaker has (or, annotated, will have) another config, this returns it all the
    /// same and logs a warning; [`try_get_or_create`](Registry::try_get_or_create) returns the
    /// difference instead, and [`check`](Registry::check) reports it with this call's file
    /// and line.
    #[track_caller]
    pub fn get_or_create(&self, name: &str, config: impl FnOnce() -> Config) -> Breaker {
        self.obtain(name, config, Site::caller(Location::caller()))
            .unwrap_or_else(ConfigConflict::into_breaker)
    }

    /// The breaker named `name`, created with `config()` if it does not exist yet, or a
    /// [`ConfigConflict`] if the breaker has another config than `config()`. An annotated
    /// name not created yet has its attribute's config; the conflict names that attribute's
    /// file and line, and this call's, and the keys that differ. It holds the existing breaker,
    /// for a caller that goes on with it.
    ///
    /// A config set with [`configure`](Registry::configure) or `load_toml` is an override, not
    /// a conflict: a breaker created from one returns `Ok` whatever `config()` says.
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config};
    ///
    /// let three = || Config::builder().failures(3).build().unwrap();
    /// let a = registry().try_get_or_create("doc-try", three).unwrap();
    /// let conflict = registry().try_get_or_create("doc-try", Config::default).unwrap_err();
    /// assert_eq!(conflict.differences(), ["failures"]);
    /// assert!(conflict.breaker().ptr_eq(&a));
    /// assert!(conflict.to_string().contains("failures = 3"), "{conflict}");
    /// ```
    #[track_caller]
    pub fn try_get_or_create(
        &self,
        name: &str,
        config: impl FnOnce() -> Config,
    ) -> Result<Breaker, ConfigConflict> {
        self.obtain(name, config, Site::caller(Location::caller()))
    }

    /// The breaker of a `#[circuit_breaker]` function, at its first call. Not public API.
    #[doc(hidden)]
    pub fn registered_breaker(&self, registration: &'static Registration) -> Breaker {
        let breaker = self
            .obtain(
                registration.name(),
                || registration.config(),
                registration.site(),
            )
            .unwrap_or_else(ConfigConflict::into_breaker);
        self.warn_unapplied_base(registration);
        breaker
    }

    /// Logs, at the breaker's making, that its attribute's `config = "<name>"` is not applied
    /// because no config file has reached it yet: it runs with the attribute's keys over the
    /// built-in defaults until a file with that `[configs.<name>]` table is loaded.
    pub(crate) fn warn_unapplied_base(&self, registration: &'static Registration) {
        let Some(base) = registration.base_name() else {
            return;
        };
        if self.files.has_account(registration.name()) {
            return;
        }
        tracing::warn!(
            target: "breakerbox",
            name = registration.name(),
            "circuit breaker '{}' ({}) takes `config = \"{base}\"`, but no config file has \
             been loaded with a [configs.{base}] table: it runs with its attribute's keys over \
             the built-in defaults until `registry().load_toml` loads one",
            registration.name(),
            registration.site(),
        );
    }

    /// The breaker `name`, created if it does not exist; `Err` if `site` asks for a config that
    /// differs from the breaker's. `config` runs outside every lock of ours.
    fn obtain(
        &self,
        name: &str,
        config: impl FnOnce() -> Config,
        site: Site,
    ) -> Result<Breaker, ConfigConflict> {
        let existing = read(&self.breakers).get(name).map(Entry::view);
        let wanted = config();
        let (breaker, preset, from) = match existing {
            Some(view) => view,
            None => self.create(name, &wanted, site),
        };
        if preset || same_policy(breaker.config(), &wanted) {
            return Ok(breaker);
        }
        let conflict = ConfigConflict::new(breaker, from, wanted, site);
        if self.record(name, site, conflict.wanted()) {
            tracing::warn!(target: "breakerbox", name, "{conflict}; the existing config is used");
        }
        Err(conflict)
    }

    /// Creates the breaker `name` unless another thread just did; returns it, whether its
    /// config is a preset, and where its config came from.
    ///
    /// The breaker is built outside the locks (a new breaker reads its clock, which may be the
    /// user's), then inserted unless another thread's got in first, or a preset changed
    /// meanwhile (then it is built again with what applies now).
    fn create(&self, name: &str, wanted: &Config, site: Site) -> (Breaker, bool, Option<Site>) {
        // An annotated name gets its attribute's config, whoever creates it.
        let registered = self
            .registered
            .get(name)
            .and_then(|list| list.first())
            .map(|first| (first.config(), first.site()));
        loop {
            // The preset that applies, read now and checked again at insertion.
            let (preset, version) = {
                let presets = lock(&self.presets);
                let preset = presets.by_name.get(name).cloned().unwrap_or_default();
                (preset, presets.version)
            };
            let from_preset = preset.config.is_some();
            let file = lock(&self.presets).layered.get(name).cloned();
            let configured = lock(&self.configured).contains_key(name);
            let resolved = layers::resolve(Given {
                name,
                site,
                wanted,
                preset: preset.config,
                clock: preset.clock,
                attribute: registered.clone(),
                file,
                configured,
            });
            let (config, from) = (resolved.config, resolved.from);
            let candidate = Breaker::unpublished(name.to_owned(), config);
            let mut map = write(&self.breakers);
            if let Some(entry) = map.get(name) {
                // Another thread created it meanwhile: its breaker stands.
                let view = entry.view();
                drop(map);
                drop(candidate);
                return view;
            }
            let mut presets = lock(&self.presets);
            if presets.version != version {
                // Configured meanwhile: build again with what applies now.
                drop(presets);
                drop(map);
                drop(candidate);
                continue;
            }
            let used = (presets.by_name.remove(name), presets.layered.remove(name));
            drop(presets);
            let breaker = candidate.publish();
            map.insert(
                name.into(),
                Entry {
                    breaker: breaker.clone(),
                    preset: from_preset,
                    site: from,
                },
            );
            drop(map);
            drop(used);
            if let Some(sources) = resolved.sources {
                self.files.set_account(name, breaker.config(), sources);
                // The code's own config, under the file's layers: what the next file layers
                // over (`code_config`).
                self.record(name, site, wanted);
                return (breaker, from_preset, from);
            }
            if let Some(from) = from {
                self.record(name, from, breaker.config());
            }
            return (breaker, from_preset, from);
        }
    }

    /// Notes that `site` gave `name` the config `config`; `false` if it already had.
    pub(crate) fn record(&self, name: &str, site: Site, config: &Config) -> bool {
        let mut sites = lock(&self.sites);
        let list = sites.entry(name.into()).or_default();
        if list.iter().any(|(s, _)| *s == site) {
            return false;
        }
        list.push((site, config.clone()));
        true
    }

    /// The breaker named `name`, if it exists or is the name of a `#[circuit_breaker]`
    /// function (then it is created now, with its attribute's config or the one
    /// [`configure`](Registry::configure)d for it, as at the function's first call).
    pub fn get(&self, name: &str) -> Option<Breaker> {
        if let Some(entry) = read(&self.breakers).get(name) {
            return Some(entry.breaker.clone());
        }
        let first = *self.registered.get(name)?.first()?;
        Some(self.registered_breaker(first))
    }

    /// The breaker `name` if it has been created; unlike [`get`](Registry::get), creates no
    /// annotated one (the fleet shares breakers as they are created, and must not create them
    /// before `load_toml` configures them; `reload_toml` reconfigures only those).
    pub(crate) fn existing(&self, name: &str) -> Option<Breaker> {
        read(&self.breakers).get(name).map(|e| e.breaker.clone())
    }

    /// What a fleet's `share` patterns can name: every single breaker created, annotated or
    /// configured (a preset, a config file's table), and every keyed family annotated or
    /// created — those made by code, `created`, come from `keyed`, a floor above. A name that
    /// is a keyed family is in the second list only.
    pub(crate) fn shareable_names(&self, created: Vec<String>) -> (Vec<String>, Vec<String>) {
        let mut families: BTreeSet<String> =
            self.keyed.keys().map(|name| (*name).to_owned()).collect();
        families.extend(created);
        let mut breakers: BTreeSet<String> = self.names().into_iter().collect();
        {
            let presets = lock(&self.presets);
            breakers.extend(presets.by_name.keys().cloned());
            breakers.extend(presets.layered.keys().cloned());
        }
        breakers.retain(|name| !families.contains(name));
        (
            breakers.into_iter().collect(),
            families.into_iter().collect(),
        )
    }

    /// The name of every breaker, created or annotated (a `#[circuit_breaker]` function not
    /// called yet), sorted. Creates nothing, so configs can still be set for all of them.
    pub fn names(&self) -> Vec<String> {
        let mut names: BTreeSet<&str> = self.registered.keys().copied().collect();
        let map = read(&self.breakers);
        names.extend(map.keys().map(|name| &**name));
        names.into_iter().map(str::to_owned).collect()
    }

    /// Reports every name that two or more sites give different configs: `#[circuit_breaker]`
    /// attributes, keyed (`key = …`) or not (all known from the start), and the calls to
    /// [`get_or_create`](Registry::get_or_create) and [`family`](Registry::family) made so
    /// far, each with its file and line and the values of the keys that differ; and every
    /// name that some of them make a keyed family and others a single breaker (see
    /// [`Conflict::keyed_and_unkeyed`]); every name that two calls to
    /// [`configure`](Registry::configure) give different configs (the last one given is the
    /// one used); and every key that the tables of two config files set
    /// ([`Conflicts::two_files`]). A config set with `configure` or `load_toml` overrides call
    /// sites' and is not compared with them.
    ///
    /// Run it at startup, after the code that creates breakers by hand:
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// breakerbox_runtime::registry().check()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn check(&self) -> Result<(), Conflicts> {
        let mut by_name: BTreeMap<&str, Sites> = BTreeMap::new();
        for (name, list) in self.registered.iter().chain(&self.keyed) {
            let sites = by_name.entry(name).or_default();
            sites.extend(list.iter().map(|r| (r.site(), r.config())));
        }
        let recorded = lock(&self.sites);
        for (name, list) in recorded.iter() {
            by_name
                .entry(name)
                .or_default()
                .extend(list.iter().cloned());
        }
        let mut conflicts: Vec<Conflict> = by_name
            .into_iter()
            .filter_map(|(name, sites)| conflict(name, sites))
            .collect();
        drop(recorded);
        // Two `configure` calls that give one name different configs: the last one won.
        let configured: Vec<(Box<str>, Sites)> = lock(&self.configured)
            .iter()
            .filter(|(_, sites)| sites.len() > 1)
            .map(|(name, sites)| (name.clone(), sites.clone()))
            .collect();
        conflicts.extend(
            configured
                .into_iter()
                .filter_map(|(name, sites)| conflict(&name, sites)),
        );
        conflicts.sort_by(|a, b| a.name().cmp(b.name()));
        let two_files = self.files.two_files();
        if conflicts.is_empty() && two_files.is_empty() {
            Ok(())
        } else {
            Err(Conflicts(conflicts, two_files))
        }
    }

    /// Registers the config for `name`, to be used when it is first created, over the call
    /// site's (and over a `#[circuit_breaker]` attribute's); likewise for a keyed family
    /// `name` created after this call, whose every key then has this config (see
    /// [`family`](Registry::family)). Returns `false` (and changes nothing) if the breaker, or
    /// a keyed family of that name, already exists.
    ///
    /// With a config file (`load_toml`, feature `serde`), this config is the code's layer,
    /// as an attribute's is: the file's `[defaults]` and bases lie under the keys it sets
    /// (those that are not [`Config::default`]'s), its tables and the environment over them,
    /// each changing only the keys it names, whether the file is loaded before this call or
    /// after, and at every reload. Should this config not go with a file loaded before, the
    /// file's config stays, an `error` is logged (target `breakerbox`), and the next load
    /// reports it.
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config};
    /// use std::time::Duration;
    ///
    /// registry().configure("doc-configure", Config::builder().failure_rate(50).build()?);
    /// # #[cfg(feature = "serde")]
    /// registry().load_toml_str("app.toml", "[breakers.doc-configure]\nopen_for = \"5s\"\n")?;
    /// let b = registry().get_or_create("doc-configure", Config::default);
    /// assert_eq!(b.config().failure_rate(), Some(50));
    /// # #[cfg(feature = "serde")]
    /// assert_eq!(b.config().open_for(), Duration::from_secs(5));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn configure(&self, name: &str, config: Config) -> bool {
        let site = Site::configure(Location::caller());
        self.configure_at(name, config, site)
    }

    /// Notes that `site` configured `name` with `config`, last.
    fn note_configured(&self, name: &str, site: Site, config: Config) {
        let mut all = lock(&self.configured);
        let sites = all.entry(name.into()).or_default();
        let old = sites
            .iter()
            .position(|(s, _)| *s == site)
            .map(|i| sites.remove(i));
        sites.push((site, config));
        drop(all);
        // A config may hold the last reference to a user's clock: dropped outside the lock.
        drop(old);
    }

    /// [`configure`](Registry::configure) from `site`, under the layers of the config file
    /// that reached `name` last, if one did.
    fn configure_at(&self, name: &str, config: Config, site: Site) -> bool {
        let exists = || {
            tracing::warn!(target: "breakerbox", name, "circuit breaker '{name}' already exists; its config is not changed");
            false
        };
        if is_family(name) || self.existing(name).is_some() {
            return exists();
        }
        // The file's layers over this config, built outside the locks.
        let from_file = lock(&self.presets).layered.contains_key(name);
        let built = self.layers_over(name, site, &config, "it keeps the file's config");
        let applied = self.preset(name, |p, _| match &built {
            Some(built) => {
                let keys = built
                    .keys
                    .iter()
                    .map(|(key, config, _)| (key.clone(), config.clone()))
                    .collect();
                (
                    p.config.replace(built.config.clone()),
                    Some(core::mem::replace(&mut p.keys, keys)),
                )
            }
            // A file loaded before keeps its config if this one does not go with it.
            None if from_file => (None, None),
            None => (p.config.replace(config.clone()), None),
        });
        let Some(old) = applied else {
            return exists();
        };
        drop(old);
        self.note_configured(name, site, config);
        match built {
            Some(built) => {
                self.files.set_account(name, &built.config, built.sources);
                for (key, config, sources) in built.keys {
                    let account = key_account(name, &key);
                    self.files.set_account(&account, &config, sources);
                }
            }
            // No file's account holds for a config set whole.
            None if !from_file => self.files.forget(name),
            None => {}
        }
        true
    }

    /// The layers of the config file that reached `name` last over `code`; `None` without
    /// such a file, or should the two not go together: then an `error` names both and says
    /// what the breaker runs with (`instead`).
    fn layers_over(&self, name: &str, site: Site, code: &Config, instead: &str) -> Option<Built> {
        let layered = lock(&self.presets).layered.get(name).cloned()?;
        layers::over_code(&layered, name, site, code, instead)
    }

    /// Makes the breaker `name` read `clock` when it is created, whatever config creates it;
    /// likewise every breaker of a keyed family `name` created after this call (see
    /// [`family`](Registry::family)). Returns `false` if the breaker already exists. Tests use it with a
    /// [`ManualClock`](crate::ManualClock).
    pub fn set_clock(&self, name: &str, clock: impl Clock) -> bool {
        self.preset(name, |p, _| p.clock.replace(crate::clock::shared(clock)))
            .is_some()
    }

    /// The presets' version: it moves with every change of any name's preset.
    pub(crate) fn preset_version(&self) -> u64 {
        lock(&self.presets).version
    }

    /// The config ([`configure`](Registry::configure), `load_toml`) and clock
    /// ([`set_clock`](Registry::set_clock)) given to `name`, for a keyed family of that name
    /// created after them (the preset stays: a family is not a breaker of the registry).
    pub(crate) fn family_preset(&self, name: &str) -> Preset {
        lock(&self.presets)
            .by_name
            .get(name)
            .cloned()
            .unwrap_or_default()
    }

    /// Changes the preset of `name` with `f`, unless the breaker exists (`None`). What `f`
    /// returns (the value it replaced) is dropped by the caller, outside the locks.
    fn preset<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Preset, &mut HashMap<String, Layered>) -> T,
    ) -> Option<T> {
        // The map's lock is held while the preset changes, so that no breaker is created
        // between the check and the change; creation then sees the new version.
        let map = read(&self.breakers);
        if map.contains_key(name) {
            return None;
        }
        let mut presets = lock(&self.presets);
        presets.version += 1;
        let presets = &mut *presets;
        Some(f(
            presets.by_name.entry(name.to_owned()).or_default(),
            &mut presets.layered,
        ))
    }

    /// Every breaker, in no particular order, including every annotated one (created now if its
    /// function has not been called yet; see [`get`](Registry::get)).
    pub fn breakers(&self) -> Vec<Breaker> {
        for name in self.registered.keys() {
            let _ = self.get(name);
        }
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
        crate::event::registry_wide().add(Arc::new(listener));
    }
}

/// What the TOML loader (`load/`) reads and writes of the registry.
#[cfg(feature = "serde")]
impl Registry {
    /// What a config file gives `name` before its breaker exists: `config` (its layers over
    /// the defaults, for a keyed family or a breaker made without code config), and for a
    /// breaker made in code, `layered`, its layers over the code's config. `false` if the
    /// breaker exists.
    pub(crate) fn preset_from_file(
        &self,
        name: &str,
        config: Config,
        layered: Option<Layered>,
    ) -> bool {
        let old = self.preset(name, |p, all| {
            let replaced = match layered {
                Some(layered) => all.insert(name.to_owned(), layered),
                None => all.remove(name),
            };
            (p.config.replace(config), replaced)
        });
        let set = old.is_some();
        // What it replaced is dropped outside the locks.
        drop(old);
        set
    }

    /// Registers the config of the single key `key` of the keyed family `name`, for a family
    /// created after this call (`[breakers.<name>.keys."<key>"]` in `load_toml`). Returns
    /// `false` (and changes nothing) if a breaker `name` already exists. The caller checks
    /// for a family `name` first: the keyed layer sits above the registry.
    pub(crate) fn configure_key(&self, name: &str, key: &str, config: Config) -> bool {
        self.preset(name, |p, _| p.keys.insert(key.to_owned(), config))
            .is_some()
    }

    /// Marks the config of the breaker `name` as set by a file, like a preset: call sites
    /// asking for another config meet an override, not a conflict (`reload_toml`). The site
    /// that created it stays known: its config is a layer under the file's next time.
    pub(crate) fn mark_preset(&self, name: &str) {
        if let Some(entry) = write(&self.breakers).get_mut(name) {
            entry.preset = true;
        }
    }

    /// The `#[circuit_breaker]` attribute that gives `name` its config (the first by site),
    /// keyed or not.
    pub(crate) fn attribute(&self, name: &str) -> Option<&'static Registration> {
        self.registered
            .get(name)
            .or_else(|| self.keyed.get(name))
            .and_then(|list| list.first().copied())
    }

    /// The names of the `#[circuit_breaker(key = …)]` functions: keyed families known from
    /// the start.
    pub(crate) fn keyed_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.keyed.keys().copied()
    }

    /// The names given a config before their breaker exists ([`configure`](Registry::configure),
    /// an earlier file).
    pub(crate) fn preset_names(&self) -> Vec<String> {
        lock(&self.presets).by_name.keys().cloned().collect()
    }

    /// The layers of the config file that reached `name` last over `code`, the config `site`
    /// gives it, unless a [`configure`](Registry::configure)d config is the code's layer (then
    /// the preset holds the file's layers over it already); `None` without such a file, or
    /// should the two not go together (an `error` says so).
    pub(crate) fn file_layers(&self, name: &str, site: Site, code: &Config) -> Option<Built> {
        if lock(&self.configured).contains_key(name) {
            return None;
        }
        self.layers_over(
            name,
            site,
            code,
            "it runs with the file's keys over the defaults instead",
        )
    }

    /// The config the code gave `name`, with that call's site: the last
    /// [`configure`](Registry::configure)d, else that of the [`family`](Registry::family) call
    /// that made the keyed family `name`, else that of the call that created the breaker.
    /// `None` for a name none of these gave a config (an attribute's, one not created).
    pub(crate) fn code_config(&self, name: &str) -> Option<(Site, Config)> {
        if let Some(last) = lock(&self.configured).get(name).and_then(|all| all.last()) {
            return Some(last.clone());
        }
        if is_family(name) {
            let sites = lock(&self.sites);
            return sites
                .get(name)?
                .iter()
                .find(|(s, _)| matches!(s, Site::Family { .. }))
                .cloned();
        }
        let site = read(&self.breakers).get(name)?.site?;
        if !matches!(site, Site::Call { .. }) {
            return None;
        }
        let sites = lock(&self.sites);
        let (_, config) = sites.get(name)?.iter().find(|(s, _)| *s == site)?;
        Some((site, config.clone()))
    }

    /// The config the keys of the keyed family `name` are made with, if it exists.
    pub(crate) fn family_config(&self, name: &str) -> Option<Config> {
        FAMILY_INDEX.get().and_then(|index| index.config(name))
    }
}

impl Entry {
    fn view(&self) -> (Breaker, bool, Option<Site>) {
        (self.breaker.clone(), self.preset, self.site)
    }
}

impl core::fmt::Debug for Registry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Registry")
            .field("breakers", &read(&self.breakers).len())
            .field("registered", &self.registered.len())
            .finish()
    }
}
