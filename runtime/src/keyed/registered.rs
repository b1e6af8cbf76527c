//! Keyed families in the registry: [`Registry::family`] and [`Registry::families`].

use core::fmt;
use core::hash::Hash;
use core::time::Duration;
use std::sync::{Arc, Mutex};

use crate::breaker::{Breaker, displayed};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::registration::{Registration, Site};
use crate::registry::Registry;
use crate::state::State;

use super::breaker_map::BreakerMap;
use super::family::Evicted;
use super::key_page::{KeyError, KeyMetrics, KeyPage, KeyQuery};
use super::snapshot::FamilySnapshot;

/// A keyed family as [`Registry::families`] lists it: every key (for a family of many keys,
/// [`Registry::family_snapshots`] gives aggregates and the top open keys instead).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct FamilyMetrics {
    /// The family's name.
    pub name: String,
    /// Every key held, sorted by key.
    pub keys: Vec<KeyMetrics>,
    /// Keys whose breaker is open, half-open or forced open.
    pub open_keys: usize,
    /// What evicted keys counted.
    pub evicted: Evicted,
    /// The overflow breaker, if it has been needed.
    pub overflow: Option<Metrics>,
}

/// A registered family as the registry sees it, whatever its key type.
pub(crate) trait View: Send + Sync + super::family_config::Reload {
    fn metrics(&self) -> FamilyMetrics;
    fn snapshot(&self, top: usize) -> FamilySnapshot;
    fn each(&self, f: &mut dyn FnMut(String, &Breaker));
    /// Every key's breaker, without displaying its key (a breaker keeps its key's text).
    fn each_breaker(&self, f: &mut dyn FnMut(&Breaker));
    /// The config its keys are made with (a key's own table aside).
    fn family_config(&self) -> &Config;
    fn as_any(&self) -> &dyn std::any::Any;
    fn key_page(&self, query: &KeyQuery) -> KeyPage;
    fn key_by_text(&self, text: &str) -> Option<Breaker>;
}

impl<K> View for BreakerMap<K>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
{
    fn metrics(&self) -> FamilyMetrics {
        let mut keys = Vec::new();
        self.for_each(|k, b| keys.push(KeyMetrics::of(displayed(k), b)));
        keys.sort_by(|a, b| a.key.cmp(&b.key));
        let open_keys = keys
            .iter()
            .filter(|k| {
                matches!(
                    k.metrics.state,
                    State::Open | State::HalfOpen | State::ForcedOpen
                )
            })
            .count();
        FamilyMetrics {
            name: self.name().to_owned(),
            keys,
            open_keys,
            evicted: self.evicted(),
            overflow: self.overflow().map(|b| b.metrics()),
        }
    }

    fn snapshot(&self, top: usize) -> FamilySnapshot {
        BreakerMap::snapshot(self, top)
    }

    fn each(&self, f: &mut dyn FnMut(String, &Breaker)) {
        self.each_displayed(f)
    }

    fn each_breaker(&self, f: &mut dyn FnMut(&Breaker)) {
        self.for_each(|_, b| f(b))
    }

    fn family_config(&self) -> &Config {
        self.config()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn key_page(&self, query: &KeyQuery) -> KeyPage {
        BreakerMap::key_page(self, query)
    }

    fn key_by_text(&self, text: &str) -> Option<Breaker> {
        // A `String` key is its own text: looked up, not searched for.
        match self.as_any().downcast_ref::<BreakerMap<String>>() {
            Some(map) => map.get(text),
            None => BreakerMap::key_by_text(self, text),
        }
    }
}

/// The registry's families, by name. Apart from the named breakers: a family and a breaker
/// sharing a name both work, and [`Registry::check`] reports the name.
static FAMILIES: Mutex<Vec<Named>> = Mutex::new(Vec::new());

type Named = (Box<str>, Arc<dyn View>);

/// [`Registry::family`] found a family of that name with another key type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the keyed family '{name}' already exists with keys of another type than {wanted}")]
pub struct KeyTypeMismatch {
    name: String,
    wanted: &'static str,
}

/// Whether a keyed family named `name` exists (`load_toml` configures only those that do
/// not).
pub(crate) fn family_exists(name: &str) -> bool {
    FAMILIES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|(n, _)| **n == *name)
}

/// How the registry learns which names are families' (it sits below `keyed` and cannot look).
struct Index;

impl crate::registry::FamilyIndex for Index {
    fn exists(&self, name: &str) -> bool {
        family_exists(name)
    }

    #[cfg(feature = "serde")]
    fn config(&self, name: &str) -> Option<Config> {
        let view = view(name).ok()?;
        Some(super::family_config::Reload::config(&*view))
    }
}

impl Registry {
    /// The keyed family named `name`, created with `config()` if it does not exist yet. Its
    /// keys must display (for [`families`](Registry::families)); it lives as long as the
    /// process. `config` runs at every call, outside every lock of ours, as
    /// [`get_or_create`](Registry::get_or_create)'s does: [`check`](Registry::check) compares
    /// the configs of every call site.
    ///
    /// `config()` is the code's layer of the family's config, as an attribute's is: a config
    /// file (`load_toml`, feature `serde`) loaded before or after the family is made puts its
    /// `[defaults]` and bases under the keys `config()` sets (those that are not
    /// [`Config::default`]'s), and its `[breakers.<name>]` table and the environment over
    /// them, each changing only the keys it names; a `[breakers.<name>.keys."<key>"]` table
    /// gives the key that displays as `<key>` its own keys over those (with the family's
    /// clock). A config given to `name` by [`configure`](Registry::configure) before the
    /// family is made is the code's layer instead of `config()`. A clock given by
    /// [`set_clock`](Registry::set_clock) before then replaces the config's. Fails if a family
    /// of that name holds keys of another type. A name used by a family and by a single
    /// breaker (or given different configs by `#[circuit_breaker(key = …)]` attributes or the
    /// calls to `family`) is reported by [`check`](Registry::check).
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config};
    ///
    /// let tenants = registry().family::<u64>("billing", Config::default)?;
    /// tenants.call(&42, || Ok::<_, std::io::Error>(()))?;
    /// let listed = registry().families();
    /// let billing = listed.iter().find(|f| f.name == "billing").unwrap();
    /// assert_eq!(billing.keys[0].key, "42");
    /// assert!(registry().family::<String>("billing", Config::default).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn family<K>(
        &self,
        name: &str,
        config: impl FnOnce() -> Config,
    ) -> Result<BreakerMap<K>, KeyTypeMismatch>
    where
        K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    {
        let caller = std::panic::Location::caller();
        let site = Site::Family {
            file: caller.file(),
            line: caller.line(),
            column: caller.column(),
        };
        self.family_at(name, config, Some(site))
    }

    /// The keyed family of a `#[circuit_breaker(key = …)]` function, as
    /// [`family`](Registry::family) gives it; its site is the attribute's, known from the start.
    #[doc(hidden)]
    pub fn registered_family(
        &self,
        registration: &'static Registration,
    ) -> Result<BreakerMap<String>, KeyTypeMismatch> {
        let family = self.family_at(registration.name(), || registration.config(), None);
        self.warn_unapplied_base(registration);
        family
    }

    fn family_at<K>(
        &self,
        name: &str,
        config: impl FnOnce() -> Config,
        site: Option<Site>,
    ) -> Result<BreakerMap<K>, KeyTypeMismatch>
    where
        K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    {
        let mismatch = || KeyTypeMismatch {
            name: name.to_owned(),
            wanted: std::any::type_name::<K>(),
        };
        let found = |families: &[Named]| {
            families
                .iter()
                .find(|(n, _)| **n == *name)
                .map(|(_, view)| {
                    view.as_any()
                        .downcast_ref::<BreakerMap<K>>()
                        .cloned()
                        .ok_or_else(mismatch)
                })
        };
        crate::registry::know_families(&Index);
        let families = || FAMILIES.lock().unwrap_or_else(|e| e.into_inner());
        // The config closure is user code: it runs outside the lock (and may create families).
        // A call of `family` gives its config at each call, for `check`; the attribute's is
        // known without.
        let mut config = Some(config);
        let code = match site {
            Some(_) => config.take().map(|config| config()),
            None => None,
        };
        if let Some(known) = found(&families()) {
            if let (Some(site), Some(code)) = (site, &code) {
                self.record(name, site, code);
            }
            return known;
        }
        // The config the closure gives, when no preset or code config stands: asked once.
        let mut from_closure: Option<Config> = None;
        let map = loop {
            // Read before the preset: a load that writes one meanwhile moves it, and the family
            // is made again from the new preset (below).
            let version = self.preset_version();
            let crate::registry::Preset {
                config: preset,
                clock,
                keys,
            } = self.family_preset(name);
            #[cfg_attr(not(feature = "serde"), allow(unused_mut))]
            let mut keys = keys;
            // A config file's layers over the code's config, for a family `family` makes.
            #[cfg(feature = "serde")]
            let built = match (site, &code) {
                (Some(site), Some(code)) => self.file_layers(name, site, code),
                _ => None,
            };
            #[cfg(feature = "serde")]
            let (preset, accounts) = match built {
                Some(built) => {
                    keys = built
                        .keys
                        .iter()
                        .map(|(key, config, _)| (key.clone(), config.clone()))
                        .collect();
                    (Some(built.config.clone()), Some(built))
                }
                None => (preset, None),
            };
            let mut config = match (preset, code.clone()) {
                (Some(preset), _) => preset,
                (None, Some(code)) => code,
                (None, None) => from_closure
                    .get_or_insert_with(|| {
                        config
                            .take()
                            .map_or_else(Config::default, |config| config())
                    })
                    .clone(),
            };
            if let Some(clock) = clock {
                config.clock = crate::clock::ClockRef::Custom(clock);
            }
            // Made outside the lock too: a new family reads its clock, which is user code.
            let map = BreakerMap::<K>::new(name, config);
            // Not shared yet: every key it makes will tell the registry's listeners.
            map.family
                .in_registry
                .store(true, std::sync::atomic::Ordering::Relaxed);
            // A key's own config is looked up as the key displays, when its breaker is made.
            map.family.live.set_keys(keys);
            // Published under the loads' lock, and only if no preset changed since it was read:
            // a load either ran before (and the family is made again from what it wrote), or
            // runs after and finds the family live.
            let loads = crate::registry::one_load_at_a_time();
            if self.preset_version() != version {
                drop(loads);
                drop(map);
                continue;
            }
            let mut all = families();
            if let Some(known) = found(&all) {
                drop((all, loads));
                // Another thread's family stands; ours (and the user's clock in it) is dropped
                // outside the lock.
                drop(map);
                return known;
            }
            all.push((name.into(), Arc::new(map.clone())));
            drop(all);
            // The site that created the family with the code's own config: for `check`, and
            // the layer under the next config file's. Before the loads' lock is let go, so
            // that a load finds the code's config under its file's.
            if let (Some(site), Some(code)) = (site, &code) {
                self.record(name, site, code);
            }
            #[cfg(feature = "serde")]
            if let Some(built) = accounts {
                self.set_sources(name, &built.config, built.sources);
                for (key, config, sources) in built.keys {
                    let account = crate::registry::key_account(name, &key);
                    self.set_sources(&account, &config, sources);
                }
            }
            drop(loads);
            break map;
        };
        Ok(map)
    }

    /// Every registered keyed family with its keys, their states and metrics, sorted by name.
    pub fn families(&self) -> Vec<FamilyMetrics> {
        let views: Vec<Arc<dyn View>> = views().into_iter().map(|(_, v)| v).collect();
        let mut all: Vec<FamilyMetrics> = views.iter().map(|v| v.metrics()).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}

/// The names of the registry's families (the admin router's "did you mean").
pub(crate) fn family_names() -> Vec<String> {
    views().into_iter().map(|(n, _)| n.into()).collect()
}

/// The registry family `name`.
pub(super) fn view(name: &str) -> Result<Arc<dyn View>, KeyError> {
    FAMILIES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(n, _)| **n == *name)
        .map(|(_, v)| v.clone())
        .ok_or_else(|| KeyError::NoFamily {
            family: name.to_owned(),
        })
}

/// The registered families, read outside the lock (their keys' `Display` is user code).
pub(crate) fn views() -> Vec<(Box<str>, Arc<dyn View>)> {
    FAMILIES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

impl Registry {
    /// Every registered keyed family as a [`FamilySnapshot`], sorted by name: aggregates, the
    /// number of open keys and the `top` open keys with the most failures, without a line per
    /// key. What the `metrics` export sends by default, and what an admin page can show.
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config};
    ///
    /// let shards = registry().family::<u32>("doc.snapshots", || Config::builder().failures(1).build().unwrap())?;
    /// let _ = shards.call(&3, || Err::<(), _>("down"));
    /// let all = registry().family_snapshots(5);
    /// let s = all.iter().find(|s| s.name == "doc.snapshots").unwrap();
    /// assert_eq!((s.keys, s.open_keys, s.top_open[0].key.as_str()), (1, 1, "3"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn family_snapshots(&self, top: usize) -> Vec<FamilySnapshot> {
        let mut all: Vec<FamilySnapshot> = views().iter().map(|(_, v)| v.snapshot(top)).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Calls `f` with the name of every registered family, each key as it displays, and its
    /// breaker: the per-key export, which the `metrics` export does only when asked.
    pub(crate) fn each_family_key(&self, mut f: impl FnMut(&str, String, &Breaker)) {
        for (name, view) in views() {
            view.each(&mut |key, b| f(&name, key, b));
        }
    }
}

/// The registered families by name, to reload.
#[cfg(feature = "serde")]
pub(crate) fn reloadable()
-> std::collections::HashMap<String, Arc<dyn super::family_config::Reload>> {
    views()
        .into_iter()
        .map(
            |(name, v)| -> (String, Arc<dyn super::family_config::Reload>) {
                (name.into_string(), v)
            },
        )
        .collect()
}

impl Registry {
    /// A page of the registry family `family`'s keys, sorted and searched as `query` asks
    /// (see [`BreakerMap::key_page`]).
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config, KeyOrder, KeyQuery};
    ///
    /// let shards = registry().family::<u32>("doc.key_pages", || Config::builder().failures(1).build().unwrap())?;
    /// for shard in 0..3 {
    ///     shards.call(&shard, || Ok::<_, std::io::Error>(()))?;
    /// }
    /// shards.call(&1, || Ok::<_, std::io::Error>(()))?;
    /// let page = registry().family_keys("doc.key_pages", &KeyQuery::by(KeyOrder::Volume).limit(2))?;
    /// assert_eq!(page.total, 3);
    /// assert_eq!(page.keys.iter().map(|k| k.key.as_str()).collect::<Vec<_>>(), ["1", "0"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn family_keys(&self, family: &str, query: &KeyQuery) -> Result<KeyPage, KeyError> {
        Ok(view(family)?.key_page(query))
    }

    /// The breaker of the key that displays as `key` in the registry family `family`, as
    /// [`Registry::family_keys`] lists it.
    pub fn key_breaker(&self, family: &str, key: &str) -> Result<Breaker, KeyError> {
        view(family)?
            .key_by_text(key)
            .ok_or_else(|| KeyError::NoKey {
                family: family.to_owned(),
                key: key.to_owned(),
            })
    }

    /// Forces `family`'s key `key` open (see [`Breaker::force_open`]); the key is then never
    /// evicted until reset.
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config, State};
    ///
    /// let hosts = registry().family::<String>("doc.key_controls", Config::default)?;
    /// hosts.call("a.example", || Ok::<_, std::io::Error>(()))?;
    /// registry().force_open_key("doc.key_controls", "a.example")?;
    /// assert_eq!(hosts.get("a.example").unwrap().state(), State::ForcedOpen);
    /// registry().reset_key("doc.key_controls", "a.example")?;
    /// assert_eq!(hosts.get("a.example").unwrap().state(), State::Closed);
    /// assert!(registry().reset_key("doc.key_controls", "b.example").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn force_open_key(&self, family: &str, key: &str) -> Result<Breaker, KeyError> {
        let b = self.key_breaker(family, key)?;
        b.force_open();
        Ok(b)
    }

    /// Disables `family`'s key `key` (see [`Breaker::disable`]).
    pub fn disable_key(&self, family: &str, key: &str) -> Result<Breaker, KeyError> {
        let b = self.key_breaker(family, key)?;
        b.disable();
        Ok(b)
    }

    /// Resets `family`'s key `key` (see [`Breaker::reset`]).
    pub fn reset_key(&self, family: &str, key: &str) -> Result<Breaker, KeyError> {
        let b = self.key_breaker(family, key)?;
        b.reset();
        Ok(b)
    }

    /// Opens `family`'s key `key` for `duration` (see [`Breaker::trip_for`]).
    pub fn trip_key_for(
        &self,
        family: &str,
        key: &str,
        duration: Duration,
    ) -> Result<Breaker, KeyError> {
        let b = self.key_breaker(family, key)?;
        b.trip_for(duration);
        Ok(b)
    }
}
