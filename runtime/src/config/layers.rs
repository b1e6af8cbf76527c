//! Which config a registry breaker gets, and what the registry keeps of the config files
//! that gave one.
//!
//! A breaker's config is built from layers, lowest first, each changing only the keys it
//! names (docs/configuration.md): the built-in defaults; a config file's `[defaults]` and
//! named base; the code's keys (the `#[circuit_breaker]` attribute's, a config given with
//! [`Registry::configure`](crate::Registry::configure), or that of the call that makes the
//! breaker); the file's `[breakers.<name>]` table (and a keyed family's key tables); the
//! environment's variables. The loader (`load/`, feature `serde`) checks a file and merges
//! its layers and the environment's over the code's; for a name the code has not made yet
//! it keeps them as a [`Layered`], to put over the code's config when it comes.
//! [`resolve`] is where a registry breaker being made gets its config from all of them.

use core::fmt;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::settings::Config;
use super::sources::{ConfigSource, KeySource};
use crate::clock::{Clock, ClockRef};
use crate::site::Site;

/// A config file's layers over the config of the code that makes a breaker or keyed family,
/// or that [`configure`](crate::Registry::configure)s it (given with that call's site): the
/// configs, with where each key came from, or why the two do not go together.
pub(crate) type Layered = Arc<dyn Fn(Site, &Config) -> Result<Built, String> + Send + Sync>;

/// What a config file's layers build over a code's config.
pub(crate) struct Built {
    pub(crate) config: Config,
    pub(crate) sources: Vec<KeySource>,
    /// For a keyed family, each single key's table: the key (as it displays), its config and
    /// where each of its keys came from.
    pub(crate) keys: Vec<(String, Config, Vec<KeySource>)>,
}

/// `layered` over `code`, the config `site` gives `name`, with the code's probe and clock (a
/// file names neither); `None` should the two not go together: then an `error` names both
/// and says what the breaker runs with (`instead`).
pub(crate) fn over_code(
    layered: &Layered,
    name: &str,
    site: Site,
    code: &Config,
    instead: &str,
) -> Option<Built> {
    match layered(site, code) {
        Ok(mut built) => {
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

/// What the registry has for a name when it makes its breaker.
pub(crate) struct Given<'a> {
    pub(crate) name: &'a str,
    /// The call that makes it, and the config that call gives.
    pub(crate) site: Site,
    pub(crate) wanted: &'a Config,
    /// The config set for the name before it was made: a [`configure`]d one, or a config
    /// file's (its layers over the defaults, or over the configured config). It overrides
    /// the call's and the attribute's.
    ///
    /// [`configure`]: crate::Registry::configure
    pub(crate) preset: Option<Config>,
    /// The clock set for the name ([`set_clock`](crate::Registry::set_clock)).
    pub(crate) clock: Option<Arc<dyn Clock>>,
    /// The first `#[circuit_breaker]` attribute that names it (by site): its config and site.
    pub(crate) attribute: Option<(Config, Site)>,
    /// The layers of the config file that reached the name last, if one did.
    pub(crate) file: Option<Layered>,
    /// Whether a config was [`configure`](crate::Registry::configure)d for the name: then it
    /// is the code's layer, and the preset holds the file's layers over it already.
    pub(crate) configured: bool,
}

/// A registry breaker's config, and where it came from.
pub(crate) struct Resolved {
    pub(crate) config: Config,
    /// The site whose config it is: the attribute's or the call's; `None` for a preset.
    pub(crate) from: Option<Site>,
    /// Where each key came from, if a config file's layers built it over the call's config.
    pub(crate) sources: Option<Vec<KeySource>>,
}

/// The config a registry breaker is made with. A preset ([`configure`], or a config file)
/// wins over every call site's and over the attribute's; else an annotated name gets its
/// attribute's config, whoever makes it; else the config of the call that makes it, with the
/// layers of a config file that reached the name before over it. A preset or an attribute
/// already holds the file's layers: a file's load puts them over the attribute's and the
/// configured config's keys as it builds the preset. The clock set for the name replaces the
/// config's; the attribute's probe stays under a preset (a file names no probe function).
///
/// [`configure`]: crate::Registry::configure
pub(crate) fn resolve(given: Given<'_>) -> Resolved {
    let Given {
        name,
        site,
        wanted,
        preset,
        clock,
        attribute,
        file,
        configured,
    } = given;
    // A file's layers over the code's config, for a name the code makes.
    let layered = match (&file, &attribute, site) {
        (Some(layered), None, Site::Call { .. }) if !configured => over_code(
            layered,
            name,
            site,
            wanted,
            "it runs with the file's keys over the defaults instead",
        ),
        _ => None,
    };
    let (mut config, mut from) = match (preset, attribute) {
        (Some(mut config), attribute) => {
            if config.probe.is_none() {
                config.probe = attribute.and_then(|(c, _)| c.probe);
            }
            (config, None)
        }
        (None, Some((config, first))) => (config, Some(first)),
        (None, None) => (wanted.clone(), Some(site)),
    };
    let mut sources = None;
    if let Some(built) = layered {
        config = built.config;
        sources = Some(built.sources);
        // The call's config is a layer: known as the code's for the next file.
        from = Some(site);
    }
    if let Some(clock) = clock {
        config.clock = ClockRef::Custom(clock);
    }
    Resolved {
        config,
        from,
        sources,
    }
}

/// How the registry names the account of a single key of a family: `api.keys."slow-host"`.
pub(crate) fn key_account(family: &str, key: &str) -> String {
    format!("{family}.keys.{key:?}")
}

/// What the registry keeps of the config files it loaded: where each key of a name's config
/// came from, each name's last table (to report two files that set one key), and what each
/// file's last load reached. Filled by the loader (feature `serde`).
#[derive(Default)]
pub(crate) struct FileBooks {
    /// Where each key of a name's config came from, as the last config file applied to it
    /// built it (a single key of a family under `<family>.keys."<key>"`).
    accounts: Mutex<HashMap<Box<str>, Arc<Account>>>,
    /// The table a config file last gave each name (the file, its line, the keys it set), and
    /// for each name the last keys two files' tables set (for `check`).
    tables: Mutex<Tables>,
    /// For each config file (by the path or name it was loaded as), what its last load
    /// reached: the next load of it rebuilds all of them, so that a table gone from it takes
    /// the layers under it again.
    reached: Mutex<HashMap<PathBuf, Reached>>,
}

/// What a config file's last load reached.
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
#[derive(Clone, Default)]
pub(crate) struct Reached {
    /// The breakers and families it configured.
    pub(crate) names: Vec<String>,
    /// The accounts of the single keys' tables it had (`<family>.keys."<key>"`).
    pub(crate) keys: Vec<String>,
}

/// Each name's last table, and the keys two files' tables set.
type Tables = (HashMap<Box<str>, TableNote>, BTreeMap<Box<str>, TwoFiles>);

/// Where a name's table was, in the last config file that had one for it.
struct TableNote {
    file: Arc<Path>,
    line: usize,
    /// The keys it set, one bit per [`KEYS`](crate::config_keys::KEYS) entry.
    keys: u32,
}

// Poisoning carries no information here: every critical section leaves the maps consistent.
fn lock<T>(l: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

// What only the loader (feature `serde`) reads and writes is dead code without it.
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl FileBooks {
    /// Records where each key of `name`'s config came from, as a config file built it
    /// (`name` is `<family>.keys."<key>"` for a single key of a family).
    pub(crate) fn set_account(&self, name: &str, config: &Config, sources: Vec<KeySource>) {
        let account = Arc::new(Account::new(config, sources));
        let old = lock(&self.accounts).insert(name.into(), account);
        // Dropped outside the lock.
        drop(old);
    }

    /// What the last config file applied to `name` made of its config.
    pub(crate) fn account(&self, name: &str) -> Option<Arc<Account>> {
        lock(&self.accounts).get(name).cloned()
    }

    /// Whether a config file's account holds for `name`.
    pub(crate) fn has_account(&self, name: &str) -> bool {
        lock(&self.accounts).contains_key(name)
    }

    /// Forgets the account of `name`: no file's holds for a config set whole.
    pub(crate) fn forget(&self, name: &str) {
        let old = lock(&self.accounts).remove(name);
        drop(old);
    }

    /// What the last load of the config file `file` reached.
    pub(crate) fn reached_by(&self, file: &Path) -> Option<Reached> {
        lock(&self.reached).get(file).cloned()
    }

    /// Records what a load of the config file `file` reached; the accounts of the single
    /// keys' tables its last load had and this one has not are forgotten.
    pub(crate) fn set_reached(&self, file: &Path, reached: Reached) {
        let old = lock(&self.reached).insert(file.to_owned(), reached.clone());
        let Some(old) = old else {
            return;
        };
        // A set of the keys reached now: looking each old key up in the list would cost
        // their product.
        let kept: HashSet<&str> = reached.keys.iter().map(String::as_str).collect();
        let mut gone = Vec::new();
        {
            let mut accounts = lock(&self.accounts);
            for key in old.keys.iter().filter(|k| !kept.contains(k.as_str())) {
                gone.extend(accounts.remove(key.as_str()));
            }
        }
        // Dropped outside the lock.
        drop(gone);
    }

    /// Notes that the config file `file` has a table for `name` at `line` that sets `keys`;
    /// if the last table another file gave `name` set some of them too, `check` will say so.
    /// `name` is a breaker's or family's, a single key's (`api.keys."slow-host"`), or with
    /// `shared` a `[defaults]` or `[configs.<name>]` table's (`defaults`, `configs.fast`).
    pub(crate) fn note_table(
        &self,
        name: &str,
        file: &Arc<Path>,
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

    /// Every key that the tables of two config files set, for `check`.
    pub(crate) fn two_files(&self) -> Vec<TwoFiles> {
        lock(&self.tables).1.values().cloned().collect()
    }
}

/// What a config file made of a name's config: the config it built (without its clock and
/// probe, which are the code's and may hold user code) and the keys a layer named, with where
/// (a key no layer named is a default). Kept small: one per name a file reaches.
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
pub(crate) struct Account {
    pub(crate) config: Config,
    named: Box<[KeySource]>,
}

#[cfg_attr(not(feature = "serde"), allow(dead_code))]
impl Account {
    fn new(config: &Config, sources: Vec<KeySource>) -> Account {
        let mut config = config.clone();
        config.clock = ClockRef::System;
        config.probe = None;
        let named = sources
            .into_iter()
            .filter(|k| k.source != ConfigSource::Default)
            .collect();
        Account { config, named }
    }

    /// Where the file's config took `key` from.
    pub(crate) fn source(&self, key: &str) -> ConfigSource {
        self.named
            .iter()
            .find(|k| k.key == key)
            .map_or(ConfigSource::Default, |k| k.source.clone())
    }
}

/// Keys set by one table in two config files (or origins of `load_toml_str`): a breaker's
/// `[breakers.<name>]`, a single key's `[breakers.<family>.keys."<key>"]`, or a shared
/// `[defaults]` or `[configs.<name>]`. The same layer, so the file loaded last gave the
/// config, and the keys only the other set are not in it.
/// [`Registry::check`](crate::Registry::check) reports it:
///
/// ```text
/// circuit breaker 'users': `open_for` is set by [breakers.users] in two config files, at
/// base.toml:3 and then at local.toml:7; each load replaces the table of the one before
/// `open_for` is set by [defaults] in two config files, at base.toml:1 and then at
/// local.toml:1; each load replaces the table of the one before
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TwoFiles {
    pub(crate) name: String,
    /// A `[defaults]` or `[configs.<name>]` table rather than a breaker's.
    pub(crate) shared: bool,
    pub(crate) keys: Vec<&'static str>,
    pub(crate) first: (std::path::PathBuf, usize),
    pub(crate) then: (std::path::PathBuf, usize),
}

impl TwoFiles {
    /// The breaker's (or keyed family's) name, as its table names it after `breakers.`
    /// (`users`, or for a single key of a family `api.keys."slow-host"`); for a shared table,
    /// `defaults` or `configs.<name>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the table is a shared one, `[defaults]` or `[configs.<name>]`, whose keys reach
    /// every breaker that takes it.
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// The keys both tables set, in the keys' order.
    pub fn keys(&self) -> &[&'static str] {
        &self.keys
    }

    /// The file and line of the table loaded first.
    pub fn first(&self) -> (&std::path::Path, usize) {
        (&self.first.0, self.first.1)
    }

    /// The file and line of the table loaded after it.
    pub fn then(&self) -> (&std::path::Path, usize) {
        (&self.then.0, self.then.1)
    }
}

impl fmt::Display for TwoFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| format!("`{k}`")).collect();
        let (what, table) = if self.shared {
            (String::new(), self.name.clone())
        } else {
            (
                format!("circuit breaker '{}': ", self.name),
                format!("breakers.{}", self.name),
            )
        };
        write!(
            f,
            "{what}{} {} set by [{table}] in two config files, at {}:{} and then at {}:{}; each \
             load replaces the table of the one before",
            keys.join(", "),
            if self.keys.len() == 1 { "is" } else { "are" },
            self.first.0.display(),
            self.first.1,
            self.then.0.display(),
            self.then.1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failures(n: u32) -> Config {
        Config::builder().failures(n).build().unwrap()
    }

    /// A site of `kind` in `src/main.rs` at `line`.
    fn site(kind: fn(&'static str, u32) -> Site, line: u32) -> Site {
        kind("src/main.rs", line)
    }

    fn call(file: &'static str, line: u32) -> Site {
        Site::Call {
            file,
            line,
            column: 1,
        }
    }

    fn attribute(file: &'static str, line: u32) -> Site {
        Site::Attribute {
            file,
            line,
            column: 1,
        }
    }

    /// A config file whose layers set `failures = 9` over whatever the code gives.
    fn file() -> Layered {
        Arc::new(|_, _| {
            Ok(Built {
                config: failures(9),
                sources: Vec::new(),
                keys: Vec::new(),
            })
        })
    }

    fn given<'a>(wanted: &'a Config) -> Given<'a> {
        Given {
            name: "resolve-test",
            site: site(call, 10),
            wanted,
            preset: None,
            clock: None,
            attribute: None,
            file: None,
            configured: false,
        }
    }

    #[test]
    fn a_preset_wins_over_the_attribute_which_wins_over_the_call() {
        let wanted = failures(2);
        let r = resolve(given(&wanted));
        assert_eq!(
            (r.config.failures(), r.from),
            (Some(2), Some(site(call, 10)))
        );

        let with_attribute = Given {
            attribute: Some((failures(3), site(attribute, 5))),
            ..given(&wanted)
        };
        let r = resolve(with_attribute);
        assert_eq!(
            (r.config.failures(), r.from),
            (Some(3), Some(site(attribute, 5)))
        );

        let with_preset = Given {
            preset: Some(failures(4)),
            attribute: Some((failures(3), site(attribute, 5))),
            ..given(&wanted)
        };
        let r = resolve(with_preset);
        assert_eq!((r.config.failures(), r.from), (Some(4), None));
    }

    #[test]
    fn a_files_layers_go_over_the_calls_config_only_for_a_name_the_code_makes() {
        let wanted = failures(2);
        let r = resolve(Given {
            file: Some(file()),
            ..given(&wanted)
        });
        assert_eq!(
            (r.config.failures(), r.from),
            (Some(9), Some(site(call, 10)))
        );
        assert!(r.sources.is_some(), "the file's account is kept");

        // An annotated name's attribute, and a configured name's preset, hold the file's
        // layers already: they are not put on again.
        let r = resolve(Given {
            file: Some(file()),
            attribute: Some((failures(3), site(attribute, 5))),
            ..given(&wanted)
        });
        assert_eq!((r.config.failures(), r.sources.is_none()), (Some(3), true));
        let r = resolve(Given {
            file: Some(file()),
            preset: Some(failures(4)),
            configured: true,
            ..given(&wanted)
        });
        assert_eq!((r.config.failures(), r.sources.is_none()), (Some(4), true));
    }

    #[test]
    fn a_file_that_does_not_go_with_the_code_leaves_the_calls_config() {
        let wanted = failures(2);
        let refusing: Layered = Arc::new(|_, _| Err("`open_for` above `max_open_for`".into()));
        let r = resolve(Given {
            file: Some(refusing),
            ..given(&wanted)
        });
        assert_eq!((r.config.failures(), r.sources.is_none()), (Some(2), true));
    }
}
