//! The process-wide registry: one breaker per name.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::panic::Location;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, RwLock};

use crate::breaker::Breaker;
use crate::clock::{Clock, ClockRef};
use crate::config::Config;
#[cfg(feature = "serde")]
use crate::config::sources::{ConfigSource, KeySource};
use crate::event::Event;
use crate::metrics::Metrics;
#[cfg(feature = "serde")]
use crate::registration::TwoFiles;
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
    /// Where each key of a name's config came from, as the last config file applied to it
    /// built it (a single key of a family under `<family>.keys."<key>"`).
    #[cfg(feature = "serde")]
    sources: Mutex<HashMap<Box<str>, Arc<Account>>>,
    /// The table a config file last gave each name (the file, its line, the keys it set), and
    /// for each name the last keys two files' tables set (for `check`).
    #[cfg(feature = "serde")]
    tables: Mutex<Tables>,
    /// The configs each name was given by [`configure`](Registry::configure), each with its
    /// call's site, the last given last: the code's layer under a config file's tables, kept
    /// after the breaker is made so that every later file layers over it again; and for
    /// `check`, which reports two sites that give different ones.
    configured: Mutex<HashMap<Box<str>, Sites>>,
    /// For each config file (by the path or name it was loaded as), what its last load
    /// reached: the next load of it rebuilds all of them, so that a table gone from it takes
    /// the layers under it again.
    #[cfg(feature = "serde")]
    reached: Mutex<HashMap<std::path::PathBuf, Reached>>,
}

/// What a config file's last load reached.
#[cfg(feature = "serde")]
#[derive(Clone, Default)]
pub(crate) struct Reached {
    /// The breakers and families it configured.
    pub(crate) names: Vec<String>,
    /// The accounts of the single keys' tables it had (`<family>.keys."<key>"`).
    pub(crate) keys: Vec<String>,
}

/// Each name's last table, and the keys two files' tables set.
#[cfg(feature = "serde")]
type Tables = (HashMap<Box<str>, TableNote>, BTreeMap<Box<str>, TwoFiles>);

/// Where a name's table was, in the last config file that had one for it.
#[cfg(feature = "serde")]
struct TableNote {
    file: Arc<std::path::Path>,
    line: usize,
    /// The keys it set, one bit per [`KEYS`](crate::config_keys::KEYS) entry.
    keys: u32,
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
    #[cfg(feature = "serde")]
    layered: HashMap<String, Layered>,
    /// Bumped by every change, so that a creator that read a preset before building its
    /// breaker (outside the locks) sees at insertion whether it still holds.
    version: u64,
}

/// What is set for a name before its breaker (or keyed family) is created.
#[derive(Clone, Default)]
pub(crate) struct Preset {
    pub(crate) config: Option<Config>,
    pub(crate) clock: Option<Arc<dyn Clock>>,
    /// For a keyed family: the configs of single keys, by the key as it displays.
    pub(crate) keys: HashMap<String, Config>,
}

/// The file layers of the names made in code ([`Presets::layered`]); nothing without `serde`.
#[cfg(feature = "serde")]
type LayeredPresets = HashMap<String, Layered>;
#[cfg(not(feature = "serde"))]
type LayeredPresets = ();

/// A config file's layers over the config of the code that makes a breaker or keyed family,
/// or that [`configure`](Registry::configure)s it (given with that call's site): the configs,
/// with where each key came from, or why the two do not go together.
#[cfg(feature = "serde")]
pub(crate) type Layered = Arc<dyn Fn(Site, &Config) -> Result<Built, String> + Send + Sync>;

/// What a config file's layers build over a code's config.
#[cfg(feature = "serde")]
pub(crate) struct Built {
    pub(crate) config: Config,
    pub(crate) sources: Vec<KeySource>,
    /// For a keyed family, each single key's table: the key (as it displays), its config and
    /// where each of its keys came from.
    pub(crate) keys: Vec<(String, Config, Vec<KeySource>)>,
}

/// How the registry names the account of a single key of a family: `api.keys."slow-host"`.
#[cfg(feature = "serde")]
pub(crate) fn key_account(family: &str, key: &str) -> String {
    format!("{family}.keys.{key:?}")
}

/// What the registry asks of the keyed families, which sit a floor above it (`keyed`):
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
    #[cfg(feature = "serde")]
    sources: Mutex::default(),
    #[cfg(feature = "serde")]
    tables: Mutex::default(),
    configured: Mutex::default(),
    #[cfg(feature = "serde")]
    reached: Mutex::default(),
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
        #[cfg(feature = "serde")]
        if lock(&self.sources).contains_key(registration.name()) {
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
            #[cfg(feature = "serde")]
            let preset_layered = lock(&self.presets).layered.get(name).cloned();
            let from_preset = preset.config.is_some();
            // A file's layers over the code's config, for a name the code makes.
            // A config `configure`d is the code's layer instead of the call's: the preset
            // holds the file's layers over it already.
            #[cfg(feature = "serde")]
            let configured = lock(&self.configured).contains_key(name);
            #[cfg(feature = "serde")]
            let layered = match (&preset_layered, &registered, site) {
                (Some(layered), None, Site::Call { .. }) if !configured => {
                    Some(layered(site, wanted).map(|b| (b.config, b.sources)))
                }
                _ => None,
            };
            #[cfg_attr(not(feature = "serde"), allow(unused_mut))]
            let (mut config, mut from) = match (preset.config, registered.clone()) {
                (Some(mut config), registered) => {
                    // A config from a file or `configure` names no probe function: the
                    // attribute's probe stays.
                    if config.probe.is_none() {
                        config.probe = registered.and_then(|(c, _)| c.probe);
                    }
                    (config, None)
                }
                (None, Some((config, first))) => (config, Some(first)),
                (None, None) => (wanted.clone(), Some(site)),
            };
            #[cfg(feature = "serde")]
            let mut sources = None;
            #[cfg(feature = "serde")]
            match layered {
                Some(Ok((mut merged, account))) => {
                    // The code's probe and clock: a file names neither.
                    merged.probe = wanted.probe.clone();
                    merged.clock = wanted.clock.clone();
                    config = merged;
                    sources = Some(account);
                    // The call's config is a layer: known as the code's for the next file.
                    from = Some(site);
                }
                Some(Err(error)) => tracing::error!(
                    target: "breakerbox",
                    name,
                    "circuit breaker '{name}': the config file's keys do not go with the config \
                     of {site} ({error}); it runs with the file's keys over the defaults instead"
                ),
                None => {}
            }
            if let Some(clock) = preset.clock {
                config.clock = ClockRef::Custom(clock);
            }
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
            let used = presets.by_name.remove(name);
            #[cfg(feature = "serde")]
            let used = (used, presets.layered.remove(name));
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
            #[cfg(feature = "serde")]
            if let Some(sources) = sources {
                self.set_sources(name, breaker.config(), sources);
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
            #[cfg(feature = "serde")]
            breakers.extend(presets.layered.keys().cloned());
        }
        breakers.retain(|name| !families.contains(name));
        (
            breakers.into_iter().collect(),
            families.into_iter().collect(),
        )
    }

    /// Marks the config of the breaker `name` as set by a file, like a preset: call sites
    /// asking for another config meet an override, not a conflict (`reload_toml`). The site
    /// that created it stays known: its config is a layer under the file's next time.
    #[cfg(feature = "serde")]
    pub(crate) fn mark_preset(&self, name: &str) {
        if let Some(entry) = write(&self.breakers).get_mut(name) {
            entry.preset = true;
        }
    }

    /// The `#[circuit_breaker]` attribute that gives `name` its config (the first by site),
    /// keyed or not.
    #[cfg(feature = "serde")]
    pub(crate) fn attribute(&self, name: &str) -> Option<&'static Registration> {
        self.registered
            .get(name)
            .or_else(|| self.keyed.get(name))
            .and_then(|list| list.first().copied())
    }

    /// The names of the `#[circuit_breaker(key = …)]` functions: keyed families known from
    /// the start.
    #[cfg(feature = "serde")]
    pub(crate) fn keyed_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.keyed.keys().copied()
    }

    /// The names given a config before their breaker exists ([`configure`](Registry::configure),
    /// an earlier file).
    #[cfg(feature = "serde")]
    pub(crate) fn preset_names(&self) -> Vec<String> {
        lock(&self.presets).by_name.keys().cloned().collect()
    }

    /// The layers of the config file that reached `name` last over `code`, the config `site`
    /// gives it, unless a [`configure`](Registry::configure)d config is the code's layer (then
    /// the preset holds the file's layers over it already); `None` without such a file, or
    /// should the two not go together (an `error` says so).
    #[cfg(feature = "serde")]
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

    /// The layers of the config file that reached `name` last over `code`; `None` without
    /// such a file, or should the two not go together: then an `error` names both and says
    /// what the breaker runs with (`instead`).
    #[cfg(feature = "serde")]
    fn layers_over(&self, name: &str, site: Site, code: &Config, instead: &str) -> Option<Built> {
        let layered = lock(&self.presets).layered.get(name).cloned()?;
        match layered(site, code) {
            Ok(mut built) => {
                // The code's probe and clock: a file names neither.
                built.config.probe = code.probe.clone();
                built.config.clock = code.clock.clone();
                Some(built)
            }
            Err(error) => {
                tracing::error!(
                    target: "breakerbox",
                    name,
                    "circuit breaker '{name}': the config file's keys do not go with the config \
                     of {site} ({error}); {instead}"
                );
                None
            }
        }
    }

    /// The config the code gave `name`, with that call's site: the last
    /// [`configure`](Registry::configure)d, else that of the [`family`](Registry::family) call
    /// that made the keyed family `name`, else that of the call that created the breaker.
    /// `None` for a name none of these gave a config (an attribute's, one not created).
    #[cfg(feature = "serde")]
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

    /// Records where each key of `name`'s config came from, as a config file built it
    /// (`name` is `<family>.keys."<key>"` for a single key of a family).
    #[cfg(feature = "serde")]
    pub(crate) fn set_sources(&self, name: &str, config: &Config, sources: Vec<KeySource>) {
        let account = Arc::new(Account::new(config, sources));
        let old = lock(&self.sources).insert(name.into(), account);
        drop(old);
    }

    /// What the last load of the config file `file` reached.
    #[cfg(feature = "serde")]
    pub(crate) fn reached_by(&self, file: &std::path::Path) -> Option<Reached> {
        lock(&self.reached).get(file).cloned()
    }

    /// Records what a load of the config file `file` reached; the accounts of the single
    /// keys' tables its last load had and this one has not are forgotten.
    #[cfg(feature = "serde")]
    pub(crate) fn set_reached(&self, file: &std::path::Path, reached: Reached) {
        let old = lock(&self.reached).insert(file.to_owned(), reached.clone());
        let Some(old) = old else {
            return;
        };
        let mut gone = Vec::new();
        {
            let mut sources = lock(&self.sources);
            for key in old.keys.iter().filter(|k| !reached.keys.contains(k)) {
                gone.extend(sources.remove(key.as_str()));
            }
        }
        // Dropped outside the lock.
        drop(gone);
    }

    /// Notes that the config file `file` has a table for `name` at `line` that sets `keys`;
    /// if the last table another file gave `name` set some of them too, `check` will say so.
    /// `name` is a breaker's or family's, a single key's (`api.keys."slow-host"`), or with
    /// `shared` a `[defaults]` or `[configs.<name>]` table's (`defaults`, `configs.fast`).
    #[cfg(feature = "serde")]
    pub(crate) fn note_table(
        &self,
        name: &str,
        file: &Arc<std::path::Path>,
        line: usize,
        keys: u32,
        shared: bool,
    ) {
        // Apart from the breakers' tables: a breaker may be named `defaults`.
        let name = if shared {
            format!("[{name}]")
        } else {
            name.to_owned()
        };
        let name = name.as_str();
        let mut tables = lock(&self.tables);
        let (notes, two) = &mut *tables;
        let note = TableNote {
            file: file.clone(),
            line,
            keys,
        };
        let Some(old) = notes.insert(name.into(), note) else {
            return;
        };
        let both = old.keys & keys;
        if old.file == *file || both == 0 {
            return;
        }
        let found = TwoFiles {
            name: name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            shared,
            keys: crate::config_keys::KEYS
                .iter()
                .enumerate()
                .filter(|(i, _)| both & (1 << i) != 0)
                .map(|(_, k)| *k)
                .collect(),
            first: (old.file.to_path_buf(), old.line),
            then: (file.to_path_buf(), line),
        };
        // The latest pair of files for each name: a map, so that two files of many shared
        // tables loaded in turn cost one entry per name, not a list searched at each.
        two.insert(name.into(), found);
    }

    /// Every key of the config of the breaker or keyed family `name`, with its effective value
    /// and where that value came from: the built-in default, a config file's `[defaults]`,
    /// base, or table (with the file and line), an environment variable, the
    /// `#[circuit_breaker]` attribute or the `get_or_create` call that gave it (with its file
    /// and line), or a whole config set in code. In the order of the keys' list
    /// ([`config_keys::KEYS`](crate::config_keys::KEYS)). `None` if the registry knows no such
    /// name. Creates nothing.
    ///
    /// A key whose value changed since the last file was applied (by
    /// [`Breaker::reconfigure`](crate::Breaker::reconfigure)) is said to come from
    /// [`ConfigSource::Code`].
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config, ConfigSource};
    ///
    /// registry().load_toml_str("app.toml", "[breakers.doc-sources]\ndynamic = true\nopen_for = \"5s\"\n")?;
    /// let _ = registry().get_or_create("doc-sources", Config::default);
    /// let sources = registry().config_sources("doc-sources").unwrap();
    /// let open_for = sources.iter().find(|k| k.key == "open_for").unwrap();
    /// assert_eq!(open_for.value, "5s");
    /// assert_eq!(open_for.to_string(), "open_for = 5s ([breakers.doc-sources] at app.toml:3)");
    /// let failures = sources.iter().find(|k| k.key == "failures").unwrap();
    /// assert_eq!(failures.source, ConfigSource::Default);
    /// # Ok::<(), breakerbox_runtime::LoadError>(())
    /// ```
    #[cfg(feature = "serde")]
    pub fn config_sources(&self, name: &str) -> Option<Vec<KeySource>> {
        let current = match self.existing(name) {
            Some(b) => b.config().clone(),
            None => match FAMILY_INDEX.get().and_then(|index| index.config(name)) {
                Some(config) => config,
                None => {
                    let preset = self.family_preset(name).config;
                    match preset {
                        Some(config) => config,
                        None => self.attribute(name)?.config(),
                    }
                }
            },
        };
        let recorded = lock(&self.sources).get(name).cloned();
        let values = crate::registration::keys(&current);
        let value_of = |key: &str| {
            values
                .iter()
                .find(|(k, _)| *k == key)
                .map_or_else(String::new, |(_, v)| v.clone())
        };
        // Without a file's account: the keys of a `configure`d config, else the attribute's,
        // else those of the code's config.
        let code = self.code_config(name);
        let own: Option<(crate::config::ConfigBuilder, Site)> = match (code, self.attribute(name)) {
            (Some((site @ Site::Configure { .. }, config)), _) | (Some((site, config)), None) => {
                Some((
                    crate::config::sources::code_keys(Config::builder(), &config),
                    site,
                ))
            }
            (None, Some(r)) | (Some(_), Some(r)) => {
                Some((r.configure_onto(Config::builder()), r.site()))
            }
            (None, None) => None,
        };
        let then = recorded
            .as_ref()
            .map(|a| crate::registration::keys(&a.config));
        let sources = crate::config_keys::KEYS
            .iter()
            .map(|key| {
                let value = value_of(key);
                let source = match (&recorded, &then) {
                    (Some(recorded), Some(then)) => {
                        let was = then.iter().find(|(k, _)| k == key).map(|(_, v)| v);
                        if was != Some(&value) {
                            ConfigSource::Code
                        } else {
                            recorded.source(key)
                        }
                    }
                    _ => match &own {
                        Some((given, site)) if given.given().any(|k| k == *key) => {
                            ConfigSource::Site(*site)
                        }
                        _ if value != value_of_default(key) => ConfigSource::Code,
                        _ => ConfigSource::Default,
                    },
                };
                KeySource { key, value, source }
            })
            .collect();
        Some(sources)
    }

    /// Where each key of the config a config file gave the single key `key` of the keyed
    /// family `family` came from (its `[breakers.<family>.keys."<key>"]` table over the
    /// family's layers), as that file built it; `None` if no file gave the key a table.
    #[cfg(feature = "serde")]
    pub fn key_config_sources(&self, family: &str, key: &str) -> Option<Vec<KeySource>> {
        let name = format!("{family}.keys.{key:?}");
        let account = lock(&self.sources).get(name.as_str()).cloned()?;
        Some(
            crate::registration::keys(&account.config)
                .into_iter()
                .filter(|(key, _)| crate::config_keys::KEYS.contains(key))
                .map(|(key, value)| KeySource {
                    key,
                    value,
                    source: account.source(key),
                })
                .collect(),
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
        #[cfg(feature = "serde")]
        let two_files: Vec<TwoFiles> = lock(&self.tables).1.values().cloned().collect();
        #[cfg(not(feature = "serde"))]
        let two_files = Vec::new();
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
        #[cfg(feature = "serde")]
        return self.configure_at(name, config, site);
        #[cfg(not(feature = "serde"))]
        {
            if is_family(name) {
                tracing::warn!(target: "breakerbox", name, "circuit breaker '{name}' already exists; its config is not changed");
                return false;
            }
            if let Some(old) = self.preset(name, |p, _| p.config.replace(config.clone())) {
                drop(old);
                self.note_configured(name, site, config);
                return true;
            }
            tracing::warn!(target: "breakerbox", name, "circuit breaker '{name}' already exists; its config is not changed");
            false
        }
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
    #[cfg(feature = "serde")]
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
                self.set_sources(name, &built.config, built.sources);
                for (key, config, sources) in built.keys {
                    self.set_sources(&key_account(name, &key), &config, sources);
                }
            }
            // No file's account holds for a config set whole.
            None if !from_file => drop(lock(&self.sources).remove(name)),
            None => {}
        }
        true
    }

    /// What a config file gives `name` before its breaker exists: `config` (its layers over
    /// the defaults, for a keyed family or a breaker made without code config), and for a
    /// breaker made in code, `layered`, its layers over the code's config. `false` if the
    /// breaker exists.
    #[cfg(feature = "serde")]
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

    /// Makes the breaker `name` read `clock` when it is created, whatever config creates it;
    /// likewise every breaker of a keyed family `name` created after this call (see
    /// [`family`](Registry::family)). Returns `false` if the breaker already exists. Tests use it with a
    /// [`ManualClock`](crate::ManualClock).
    pub fn set_clock(&self, name: &str, clock: impl Clock) -> bool {
        self.preset(name, |p, _| p.clock.replace(crate::clock::shared(clock)))
            .is_some()
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

    /// Registers the config of the single key `key` of the keyed family `name`, for a family
    /// created after this call (`[breakers.<name>.keys."<key>"]` in `load_toml`). Returns
    /// `false` (and changes nothing) if a breaker `name` already exists. The caller checks
    /// for a family `name` first: the keyed layer sits above the registry.
    #[cfg(feature = "serde")]
    pub(crate) fn configure_key(&self, name: &str, key: &str, config: Config) -> bool {
        self.preset(name, |p, _| p.keys.insert(key.to_owned(), config))
            .is_some()
    }

    /// Changes the preset of `name` with `f`, unless the breaker exists (`None`). What `f`
    /// returns (the value it replaced) is dropped by the caller, outside the locks.
    fn preset<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut Preset, &mut LayeredPresets) -> T,
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
        #[cfg(feature = "serde")]
        let layered = &mut presets.layered;
        #[cfg(not(feature = "serde"))]
        let layered = &mut ();
        Some(f(
            presets.by_name.entry(name.to_owned()).or_default(),
            layered,
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

/// What a config file made of a name's config: the config it built (without its clock and
/// probe, which are the code's and may hold user code) and the keys a layer named, with where
/// (a key no layer named is a default). Kept small: one per name a file reaches.
#[cfg(feature = "serde")]
pub(crate) struct Account {
    config: Config,
    named: Box<[KeySource]>,
}

#[cfg(feature = "serde")]
impl Account {
    fn new(config: &Config, sources: Vec<KeySource>) -> Account {
        let mut config = config.clone();
        config.clock = crate::clock::ClockRef::System;
        config.probe = None;
        let named = sources
            .into_iter()
            .filter(|k| k.source != ConfigSource::Default)
            .collect();
        Account { config, named }
    }

    /// Where the file's config took `key` from.
    fn source(&self, key: &str) -> ConfigSource {
        self.named
            .iter()
            .find(|k| k.key == key)
            .map_or(ConfigSource::Default, |k| k.source.clone())
    }
}

/// The built-in default value of `key`, as [`crate::registration::keys`] writes it.
#[cfg(feature = "serde")]
fn value_of_default(key: &str) -> String {
    crate::registration::keys(&Config::default())
        .into_iter()
        .find(|(k, _)| *k == key)
        .map_or_else(String::new, |(_, v)| v)
}
