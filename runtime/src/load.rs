//! Breaker configs from a TOML file, overridden by environment variables.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::sources::KeySource;
use crate::config::{Config, ConfigBuilder};
use crate::duration::excerpt;
use crate::keys::KEYS;
use crate::registration::Site;
use crate::registry::{Built, Layered, Registry};
use crate::serde_impls::{Dialect, Raw, apply};
use crate::suggest::closest;

mod env;
mod merge;
mod parse;
mod reload;
#[cfg(test)]
mod tests;
#[cfg(feature = "watch")]
mod watch;

#[cfg(feature = "watch")]
pub use watch::TomlWatcher;

use env::{match_env, read_env};
use merge::{Merge, Own, Source};
use parse::parse;

/// The prefix of environment overrides: `BREAKERBOX__<NAME>__<KEY>=value`.
const ENV_PREFIX: &str = "BREAKERBOX__";

/// The key of a `[breakers.<name>]` table that says the breaker is created at run time, so the
/// loader does not look for it among the known breakers.
const DYNAMIC: &str = "dynamic";

/// The top-level table whose keys apply to every breaker the file reaches.
const DEFAULTS: &str = "defaults";

/// The top-level table of named configs, `[configs.<name>]`.
const CONFIGS: &str = "configs";

/// The key of a `[breakers.<name>]` table that names its base, a `[configs.<name>]` table.
const BASE: &str = "base";

/// A key or value in a message, cut short if it is long.
struct Cut<'a>(&'a str);

impl fmt::Display for Cut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&excerpt(self.0))
    }
}

/// The longest name (of a breaker or a variable) a message shows whole: far above any real
/// name, so that the user can always tell which one is meant.
const NAME_BYTES: usize = 256;

/// A breaker's or a variable's name in a message: whole up to [`NAME_BYTES`] bytes, else its
/// first 256 bytes (to a character's end), `…` and its length.
struct Name<'a>(&'a str);

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s.len() <= NAME_BYTES {
            return f.write_str(s);
        }
        let mut end = NAME_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        write!(f, "{}… ({} bytes)", &s[..end], s.len())
    }
}

/// Why [`Registry::load_toml`] configured nothing. The message names the file, the line and the
/// key (or the environment variable), and says what is wrong. The names of breakers, tables,
/// bases and variables our messages quote are shown whole up to 256 bytes, the keys and values
/// cut to their first 32 characters (each with `…` and its length when cut); the fields keep
/// them whole. A TOML syntax error's message is the parser's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read circuit breaker config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or `breakers` is not a table of tables.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The column, from 1.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A key of a `[breakers.<name>]` table is unknown, or its value is wrong, or the table's
    /// keys do not go together.
    #[error("{}:{line}: [breakers.{}] `{}` {message}", path.display(), Name(breaker), Cut(key))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line of the key, from 1.
        line: usize,
        /// The breaker's name.
        breaker: String,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A key of the `[defaults]` table or of a `[configs.<name>]` table is unknown, or its
    /// value is wrong.
    #[error("{}:{line}: [{}] `{}` {message}", path.display(), Name(table), Cut(key))]
    InvalidShared {
        /// The file.
        path: PathBuf,
        /// The line of the key, from 1.
        line: usize,
        /// The table: `defaults` or `configs.<name>`.
        table: String,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A `[breakers.<name>]` table names no breaker the registry knows, and does not say
    /// `dynamic = true`.
    #[error(
        "{}:{line}: no breaker named `{}`{} No `#[circuit_breaker]` function, keyed family or breaker has that name; if the program makes it at run time (with `registry().get_or_create`, `registry().family` or `Breaker::new`), say `dynamic = true` in its table.",
        path.display(),
        Name(breaker),
        suggestion.as_deref().map_or_else(|| ".".to_owned(), |s| format!("; did you mean `{}`?", Name(s)))
    )]
    UnknownBreaker {
        /// The file.
        path: PathBuf,
        /// The line of its table, from 1.
        line: usize,
        /// The name in the file.
        breaker: String,
        /// The known breaker it most likely means, if one is close.
        suggestion: Option<String>,
    },
    /// A `#[circuit_breaker(config = "<name>")]` attribute names a base the file does not
    /// have: every load must define the `[configs.<name>]` tables the attributes take.
    #[error(
        "{}: no [configs.{}] table for breaker `{}`, whose {site} takes `config = \"{}\"`{hint}",
        path.display(), Name(config), Name(breaker), Name(config)
    )]
    UnknownConfig {
        /// The file.
        path: PathBuf,
        /// The breaker's (or keyed family's) name.
        breaker: String,
        /// The base the attribute names.
        config: String,
        /// The attribute (boxed: it is larger than the other errors).
        site: Box<Site>,
        /// "; did you mean `fast`?", or the file's bases, or how to write one.
        hint: String,
    },
    /// `Registry::watch_toml` (feature `watch`) cannot watch the file (it names no file, its
    /// directory cannot be watched, or the thread cannot start), or the watch reported an
    /// error.
    #[error("cannot watch circuit breaker config {}: {source}", path.display())]
    Watch {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An environment override is malformed or its value is wrong.
    #[error("environment variable {}: {message}", Name(var))]
    Env {
        /// The variable's name.
        var: String,
        /// What is wrong.
        message: String,
    },
    /// [`Registry::reload_toml`]: a breaker in the file exists and cannot take the change live
    /// (see [`ReconfigureError`](crate::ReconfigureError)); or a keyed family that exists cannot (its bounds, or a
    /// change a key's breaker cannot take: `breaker` is then `<family>.keys."<key>"`); or a
    /// `keys` table names a single breaker's keys.
    #[error("{}:{line}: [breakers.{}] {message}", path.display(), Name(breaker))]
    NotReloadable {
        /// The file.
        path: PathBuf,
        /// The line of its table, from 1.
        line: usize,
        /// The breaker's name.
        breaker: String,
        /// The key that cannot change, if one.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A keyed family named in the file was created by another thread while the file was
    /// applied, so its single keys' tables could not be given to it. (A breaker or family
    /// that exists when the load starts takes the file live.)
    #[error(
        "{}:{line}: keyed family '{}' was created while the file was applied, so its single keys' tables did not reach it; load the file again", path.display(), Name(breaker)
    )]
    AlreadyCreated {
        /// The file.
        path: PathBuf,
        /// The line of its table, from 1.
        line: usize,
        /// The breaker's name.
        breaker: String,
    },
}

impl LoadError {
    /// The line the error is about, if it is about a line of the file.
    pub fn line(&self) -> Option<usize> {
        match self {
            LoadError::Syntax { line, .. }
            | LoadError::Invalid { line, .. }
            | LoadError::InvalidShared { line, .. }
            | LoadError::UnknownBreaker { line, .. }
            | LoadError::AlreadyCreated { line, .. }
            | LoadError::NotReloadable { line, .. } => Some(*line),
            LoadError::Read { .. }
            | LoadError::Env { .. }
            | LoadError::Watch { .. }
            | LoadError::UnknownConfig { .. } => None,
        }
    }

    /// The config key the error is about, if one.
    pub fn key(&self) -> Option<&str> {
        match self {
            LoadError::Invalid { key, .. } | LoadError::InvalidShared { key, .. } => Some(key),
            LoadError::NotReloadable { key, .. } => key.as_deref(),
            LoadError::UnknownConfig { .. } => Some("config"),
            _ => None,
        }
    }
}

/// Where a key's value came from, for the error.
#[derive(Clone)]
enum Origin {
    File { line: usize },
    Env { var: String },
}

/// Config keys in order, each with its value as written and where it was written.
type Keys = Vec<(String, Raw, Origin)>;

/// One table of config keys (`[breakers.<name>]`, `[defaults]`, `[configs.<name>]`), with its
/// keys in order.
struct Table {
    line: usize,
    dynamic: bool,
    /// `base = "<name>"`, with its line.
    base: Option<(String, usize)>,
    keys: Keys,
    /// `[breakers.<name>.keys."<key>"]`: single keys of a keyed family, each a table whose
    /// keys apply over this one's.
    per_key: Vec<(String, Table)>,
}

/// The key of a `[breakers.<name>]` table that holds the tables of single keys of a family.
const KEYS_TABLE: &str = "keys";

/// How a single key's table is named in messages: `api.keys."slow-host.example"`.
fn key_table_name(name: &str, key: &str) -> String {
    format!("{name}.{KEYS_TABLE}.{key:?}")
}

impl Registry {
    /// Configures breakers from a TOML file and the `BREAKERBOX__<NAME>__<KEY>=value`
    /// environment variables; returns the names configured, sorted. See docs/configuration.md
    /// for the whole picture.
    ///
    /// Keys are the attribute's (`failures`, `failure_rate`, `window` as a count or `"10s"`,
    /// `min_calls`, `slow`, `slow_rate`, `open_for`, `max_open_for`, `backoff`, `jitter`,
    /// `half_open_calls`, `successes`, `probe_timeout`, `max_concurrent`, `probe_every` (the
    /// probe function stays the code's), `timeout` (for a function whose attribute names one;
    /// see docs/configuration.md), and for a keyed family `max_keys` and `idle_for`),
    /// and durations read as in the attribute, with the same messages. Other top-level tables
    /// than `breakers`, `defaults` and `configs` are ignored, so the file can be the
    /// application's own config; but one spelt one edit away from `breakers` (`[breaker.x]`,
    /// `[Breakers.x]`) is an error, as a typo that would configure nothing.
    ///
    /// **Layers, key by key.** A breaker's config is built from these layers, lowest first;
    /// each sets only the keys it names, and the keys no layer names keep the built-in
    /// defaults ([`Config::default`]):
    ///
    /// 1. the built-in defaults;
    /// 2. `[defaults]`, for every breaker the file reaches (every `#[circuit_breaker]`
    ///    function's breaker or keyed family, and every `[breakers.<name>]` table);
    /// 3. the named base a table picks with `base = "<name>"`, a `[configs.<name>]` table;
    /// 4. the `#[circuit_breaker]` attribute's keys; for a breaker made in code
    ///    (`get_or_create`), before or after the load, the keys of its code's config that are
    ///    not the defaults (should they not go with the file's, it gets the file's keys over
    ///    the defaults, and an `error` is logged); a keyed family made in code
    ///    ([`family`](Registry::family)) has no such layer: the code's config is replaced, as
    ///    [`configure`](Registry::configure) does;
    /// 5. `[breakers.<name>]`, and for one key of a keyed family
    ///    `[breakers.<name>.keys."<key>"]` over it;
    /// 6. the environment variables.
    ///
    /// ```toml
    /// [defaults]
    /// open_for = "30s"
    ///
    /// [configs.rate]
    /// failure_rate = 50
    /// window = "10s"
    /// min_calls = 20
    ///
    /// [breakers.payments]        # over its #[circuit_breaker] attribute's keys
    /// base = "rate"
    /// open_for = "5s"
    ///
    /// # Created at run time with `registry().get_or_create("tenant-a", …)`.
    /// [breakers.tenant-a]
    /// dynamic = true
    /// failures = 3
    /// ```
    ///
    /// The merged config is checked once. An error names the key, its value, and the layer
    /// each key involved came from, and is reported at the highest layer among them that the
    /// file or the environment holds:
    ///
    /// ```text
    /// breakers.toml:2: [breakers.users] `min_calls` requires `failure_rate` or `slow_rate`
    /// (min_calls = 20 from [defaults] at breakers.toml:2; `failure_rate` is not set;
    /// `slow_rate` is not set)
    /// ```
    ///
    /// `failures` (with `failures_within`) and `failure_rate` exclude each other: a layer that
    /// names one drops the other from the layers under it (a rate dropped takes its `window`
    /// and `min_calls` along, unless `slow_rate` uses them), so a table can switch an
    /// attribute's breaker from one way of tripping to the other.
    ///
    /// **Names are checked.** A table must name a breaker the registry knows: annotated
    /// (keyed or not), created, or configured before. A misspelt `[breakers.inventroy]` fails
    /// with "no breaker named `inventroy`; did you mean `inventory`?" rather than leaving
    /// `inventory` to its call site. A breaker that only exists once the program makes it
    /// (`get_or_create`, [`family`](Registry::family), [`Breaker::new`](crate::Breaker::new))
    /// opts out with `dynamic = true` in its table. A `base` must name a `[configs.<name>]`
    /// table of the file.
    ///
    /// **Keyed families.** A `[breakers.<name>]` table also configures the keyed family
    /// `name` ([`family`](Registry::family), or `#[circuit_breaker(key = …)]`): every key's
    /// breaker gets its config, and `max_keys` and `idle_for` bound the family. A
    /// `[breakers.<name>.keys."<key>"]` table gives one key (as it displays) its own keys over
    /// the family's layers. A keyed attribute's family is known from the start, like a plain
    /// attribute's breaker.
    ///
    /// ```toml
    /// [breakers.api]
    /// failures = 5
    /// max_keys = 1000
    ///
    /// [breakers.api.keys."slow-host.example"]
    /// open_for = "5m"
    /// ```
    ///
    /// **Environment.** `BREAKERBOX__PAYMENTS__OPEN_FOR=5s` sets one key of `payments`,
    /// over every layer of the file, whether the file has a table for it or not.
    /// `<NAME>` is the breaker's name with every ASCII letter in capitals and every character
    /// other than an ASCII letter or digit written `_`: `users-api` → `USERS_API`, the
    /// attribute's default name `my_app::client::fetch_user` → `MY_APP__CLIENT__FETCH_USER`
    /// (so `BREAKERBOX__MY_APP__CLIENT__FETCH_USER__FAILURES=3`). The key is what follows the
    /// last `__` (no key contains `__`), in any case, and so is the prefix
    /// (`breakerbox__users__open_for`); a variable written with single underscores that ends in
    /// a key (`BREAKERBOX_USERS_OPEN_FOR`, as Spring's relaxed binding writes its own) is an
    /// error that shows it written right. A value reads as a number if it is one,
    /// else as a string. Every variable must apply: one whose `<NAME>` is no breaker the
    /// registry knows nor a table of this file, one that is malformed or has an unknown key,
    /// and one whose name or value is not UTF-8 is an error, with "did you mean" for a name
    /// or key close to a real one. Two breakers with the same `<NAME>` are an error only when
    /// a variable addresses them.
    ///
    /// **Order does not matter.** A breaker that exists already (an annotated one is created
    /// by [`get`](Registry::get), [`breakers`](Registry::breakers) and metrics exporters)
    /// takes the file live, as [`reload_toml`](Registry::reload_toml) gives it,
    /// keeping its state; a change it cannot take live is a [`LoadError::NotReloadable`].
    ///
    /// Errors come in order: the file's syntax, its keys and values, its breaker and base
    /// names, then the environment, then the combinations of keys; so a variable never hides
    /// a mistake in the file. All or nothing: on any error, no breaker is configured and the
    /// error names the file, line and key (or the variable). The one exception is a race: a
    /// single key's table of a family another thread creates while the file loads is
    /// reported as [`LoadError::AlreadyCreated`], with the tables before it applied.
    pub fn load_toml(&self, path: impl AsRef<Path>) -> Result<Vec<String>, LoadError> {
        let path = path.as_ref();
        self.load_toml_str(path, &read(path)?)
    }

    /// [`load_toml`](Registry::load_toml) from a string, such as a config service's answer;
    /// `origin` names it in errors. Environment overrides apply too.
    pub fn load_toml_str(
        &self,
        origin: impl AsRef<Path>,
        text: &str,
    ) -> Result<Vec<String>, LoadError> {
        self.load_with_env(origin.as_ref(), text, std::env::vars_os())
    }

    pub(crate) fn load_with_env(
        &self,
        path: &Path,
        text: &str,
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Vec<String>, LoadError> {
        // A breaker that exists takes the file live, as a reload gives it.
        self.reload_with_env(path, text, env)
    }

    /// Reads and checks a file and the environment, and builds, layer by layer, the config of
    /// every breaker they reach (and of every single key's table), and of every breaker the last
    /// load of `scope` (the file, see [`reload_toml`](Registry::reload_toml)) reached.
    fn prepare(
        &self,
        path: &Path,
        scope: &Path,
        text: &str,
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<PreparedFile, LoadError> {
        let parsed = parse(path, text)?;
        if let Some(defaults) = &parsed.defaults {
            check_shared_keys(path, DEFAULTS, defaults)?;
        }
        for (name, table) in &parsed.configs {
            check_shared_keys(path, &format!("{CONFIGS}.{name}"), table)?;
        }
        for (name, table) in &parsed.breakers {
            check_file_keys(path, name, table)?;
            check_base(path, name, table, &parsed.configs)?;
        }
        let known = self.known_names();
        self.check_names(path, &parsed.breakers, &known)?;
        let vars = read_env(env)?;
        let mut env = match_env(
            path,
            vars,
            known
                .iter()
                .map(String::as_str)
                .chain(parsed.breakers.keys().map(String::as_str)),
        )?;
        // Every breaker the file or the environment reaches: its tables, the variables', and
        // with `[defaults]` every annotated breaker and keyed family.
        let mut targets: BTreeSet<String> = parsed.breakers.keys().cloned().collect();
        targets.extend(env.keys().cloned());
        let attributes = self.attribute_names();
        if parsed.defaults.is_some() {
            targets.extend(attributes.iter().cloned());
        }
        // An attribute's `config = "<name>"` must name a base of the file, which reaches it.
        for name in &attributes {
            let Some(r) = self.attribute(name) else {
                continue;
            };
            let Some(base) = r.base_name() else {
                continue;
            };
            if !parsed.configs.contains_key(base) {
                return Err(LoadError::UnknownConfig {
                    path: path.to_owned(),
                    breaker: name.clone(),
                    config: base.to_owned(),
                    site: Box::new(r.site()),
                    hint: base_hint(base, &parsed.configs),
                });
            }
            targets.insert(name.clone());
        }
        // What the last load of this file reached, though the file or the environment no
        // longer names it: rebuilt from the layers left, it takes them again.
        if let Some(previous) = self.reached_by(scope) {
            targets.extend(previous.names.into_iter().filter(|n| known.contains(n)));
        }
        let path: Arc<Path> = path.into();
        let defaults = parsed.defaults.as_ref().map(|d| Arc::new(d.keys.clone()));
        let bases: HashMap<&str, Arc<Keys>> = parsed
            .configs
            .iter()
            .map(|(name, table)| (name.as_str(), Arc::new(table.keys.clone())))
            .collect();
        let mut configs = Vec::with_capacity(targets.len());
        let mut key_configs = Vec::new();
        let live: HashSet<String> = crate::keyed::families::reloadable().into_keys().collect();
        for name in targets {
            let table = parsed.breakers.get(&name);
            let vars = env.remove(&name).unwrap_or_default();
            let place = match (table, vars.first(), &parsed.defaults) {
                (Some(table), _, _) => Place::Line(table.line),
                (None, Some((_, _, Origin::Env { var })), _) => Place::Env(var.clone()),
                (None, _, Some(defaults)) => Place::Line(defaults.line),
                _ => Place::Line(1),
            };
            let code = self.code_config(&name);
            let attribute = self.attribute(&name);
            let configured = matches!(code, Some((Site::Configure { .. }, _)));
            // A table's `base` is above the attribute, and replaces the attribute's `config`.
            let base = table
                .and_then(|t| t.base.as_ref().map(|(base, _)| base.clone()))
                .or_else(|| attribute.and_then(|r| r.base_name()).map(str::to_owned));
            // A `configure`d config is the code's layer, over an attribute's.
            let own = match (attribute, &code) {
                (_, Some((site, config))) if configured => Own::Code(*site, config),
                (Some(r), _) => Own::Attribute(r),
                (None, Some((site, config))) => Own::Code(*site, config),
                (None, None) => Own::None,
            };
            let layers = Layers {
                path: path.clone(),
                line: match &place {
                    Place::Line(line) => *line,
                    Place::Env(_) => 1,
                },
                defaults: defaults.clone(),
                base: base.map(|base| {
                    let keys = bases[base.as_str()].clone();
                    (base, keys)
                }),
                table: table.map(|t| t.keys.clone()),
                per_key: table.map_or_else(Vec::new, |t| {
                    t.per_key
                        .iter()
                        .map(|(key, own)| (key.clone(), own.line, own.keys.clone()))
                        .collect()
                }),
                env: vars,
                name,
            };
            let (config, sources, keys) = layers.build(own)?;
            key_configs.extend(keys);
            let name = layers.name.clone();
            // A name not made yet: the code that makes it (`get_or_create`, `family`) or
            // `configure`s it gives a layer too, known only then.
            let made = self.existing(&name).is_some() || live.contains(&name);
            let layered: Option<Layered> = (!made).then(|| {
                Arc::new(move |site: Site, code: &Config| {
                    let (config, sources, keys) = layers
                        .build(Own::Code(site, code))
                        .map_err(|e| e.to_string())?;
                    let keys = keys
                        .into_iter()
                        .map(|k| (k.key, k.config, k.sources))
                        .collect();
                    Ok(Built {
                        config,
                        sources,
                        keys,
                    })
                }) as Layered
            });
            let table = table.map(|t| (t.line, key_bits(&t.keys)));
            configs.push(Prepared {
                name,
                place,
                config,
                sources,
                layered,
                table,
            });
        }
        // The shared tables, for `check`: which keys each sets, and where.
        let shared = parsed
            .defaults
            .iter()
            .map(|t| (DEFAULTS.to_owned(), t))
            .chain(
                parsed
                    .configs
                    .iter()
                    .map(|(name, t)| (format!("{CONFIGS}.{name}"), t)),
            )
            .map(|(name, t)| (name, t.line, key_bits(&t.keys)))
            .collect();
        Ok((configs, key_configs, shared))
    }

    /// The names a table may give without `dynamic = true`, and a variable may address: every
    /// breaker the registry knows, created or annotated, every keyed family, annotated or
    /// created, and every name given a config already. `names`, not `breakers`: listing must
    /// create nothing, or every annotated breaker would exist before the file could configure
    /// it.
    fn known_names(&self) -> HashSet<String> {
        let mut known: HashSet<String> = self.names().into_iter().collect();
        known.extend(self.keyed_names().map(str::to_owned));
        known.extend(crate::keyed::families::reloadable().into_keys());
        known.extend(self.preset_names());
        known
    }

    /// The names of every `#[circuit_breaker]` function, keyed or not.
    fn attribute_names(&self) -> Vec<String> {
        self.names()
            .into_iter()
            .filter(|name| self.attribute(name).is_some())
            .chain(self.keyed_names().map(str::to_owned))
            .collect()
    }

    fn check_names(
        &self,
        path: &Path,
        tables: &BTreeMap<String, Table>,
        known: &HashSet<String>,
    ) -> Result<(), LoadError> {
        let Some((name, table)) = tables
            .iter()
            .find(|(name, table)| !table.dynamic && !known.contains(*name))
        else {
            return Ok(());
        };
        Err(LoadError::UnknownBreaker {
            path: path.to_owned(),
            line: table.line,
            breaker: name.clone(),
            suggestion: closest(name, known.iter().map(String::as_str)).map(str::to_owned),
        })
    }
}

/// What [`Registry::prepare`] builds: every breaker's config, every single key's, and the
/// shared tables' notes.
type PreparedFile = (Vec<Prepared>, Vec<PreparedKey>, Vec<SharedNote>);

/// A `[defaults]` or `[configs.<name>]` table: its name (`defaults`, `configs.fast`), its line
/// and its keys (one bit per [`KEYS`] entry).
type SharedNote = (String, usize, u32);

/// The keys of a table, one bit per [`KEYS`] entry.
fn key_bits(keys: &Keys) -> u32 {
    keys.iter()
        .filter_map(|(key, _, _)| KEYS.iter().position(|k| k == key))
        .fold(0u32, |bits, i| bits | 1 << i)
}

/// Where a configured breaker's config comes from in the file, for an error about applying
/// it: its table's line, or the variable that reached it.
#[derive(Clone, Debug)]
enum Place {
    Line(usize),
    Env(String),
}

/// A breaker's (or keyed family's) config, built from its layers.
struct Prepared {
    name: String,
    place: Place,
    config: Config,
    /// Where each key's value came from.
    sources: Vec<KeySource>,
    /// For a name neither annotated nor created: the layers again, to put over the config of
    /// the code that makes it.
    layered: Option<Layered>,
    /// Its `[breakers.<name>]` table's line and keys (one bit per [`KEYS`] entry), if it has
    /// one.
    table: Option<(usize, u32)>,
}

/// The layers a file (and the environment) gives one name, other than its own (its
/// attribute's or its code's).
struct Layers {
    path: Arc<Path>,
    name: String,
    /// The line an error with no line of its own is reported at.
    line: usize,
    defaults: Option<Arc<Keys>>,
    base: Option<(String, Arc<Keys>)>,
    table: Option<Keys>,
    /// `[breakers.<name>.keys."<key>"]`: each key, its table's line and its keys.
    per_key: Vec<(String, usize, Keys)>,
    env: Keys,
}

impl Layers {
    /// The layers up to the name's table, with `own` under the table.
    fn under_table(&self, own: Own<'_>) -> Result<Merge<'_>, LoadError> {
        let mut m = Merge::new(&self.path, self.name.clone(), self.line);
        m.owned_by(own);
        if let Some(defaults) = &self.defaults {
            m.text(defaults, |line| Source::Defaults { line })?;
        }
        if let Some((base, keys)) = &self.base {
            m.text(keys, |line| Source::Base {
                name: base.clone(),
                line,
            })?;
        }
        m.own(own);
        if let Some(table) = &self.table {
            m.text(table, |line| Source::Table {
                name: self.name.clone(),
                line,
            })?;
        }
        Ok(m)
    }

    /// Every layer, with `own`, checked; and each single key's table over them.
    fn build(&self, own: Own<'_>) -> Result<(Config, Vec<KeySource>, Vec<PreparedKey>), LoadError> {
        let mut m = self.under_table(own)?;
        let mut keys = Vec::with_capacity(self.per_key.len());
        for (key, line, own) in &self.per_key {
            let key_name = key_table_name(&self.name, key);
            let mut k = m.for_key(key_name.clone(), *line);
            k.text(own, |line| Source::Table {
                name: key_name.clone(),
                line,
            })?;
            k.text(&self.env, |_| Source::Default)?;
            let (config, sources) = k.finish()?;
            keys.push(PreparedKey {
                family: self.name.clone(),
                key: key.clone(),
                line: *line,
                keys: key_bits(own),
                config,
                sources,
            });
        }
        m.text(&self.env, |_| Source::Default)?;
        let (config, sources) = m.finish()?;
        Ok((config, sources, keys))
    }
}

/// A single key's config, from its `[breakers.<family>.keys."<key>"]` table over its family's
/// layers.
struct PreparedKey {
    family: String,
    key: String,
    line: usize,
    /// The keys its table sets, one bit per [`KEYS`] entry.
    keys: u32,
    config: Config,
    sources: Vec<KeySource>,
}

/// The largest config file read: far above any real config (a 16 MB file loads in seconds),
/// low enough that a wrong path cannot fill memory.
const MAX_FILE: u64 = 256 << 20;

/// The text of the file at `path`, for `load_toml`, `reload_toml` and the watcher. Only a
/// regular file (after symlinks) of at most 256 MiB is read: a FIFO would block the reader
/// for ever, and `/dev/zero` would never end.
fn read(path: &Path) -> Result<String, LoadError> {
    let refuse = |why: String| LoadError::Read {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
    };
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(refuse("not a regular file".to_owned()));
    }
    if meta.len() > MAX_FILE {
        return Err(refuse(format!(
            "{} bytes, more than the 256 MiB a config file may have",
            meta.len()
        )));
    }
    std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Each key and value of a breaker's table on its own: the file's mistakes come before any of
/// the environment's, and before the combinations of layers.
fn check_file_keys(path: &Path, name: &str, table: &Table) -> Result<(), LoadError> {
    let mut b: ConfigBuilder = Config::builder();
    for (key, value, origin) in &table.keys {
        let line = match origin {
            Origin::File { line } => *line,
            Origin::Env { .. } => table.line,
        };
        b = apply(b, key, value, Dialect::Text).map_err(|message| LoadError::Invalid {
            path: path.to_owned(),
            line,
            breaker: name.to_owned(),
            key: key.clone(),
            message,
        })?;
    }
    for (key, own) in &table.per_key {
        check_file_keys(path, &key_table_name(name, key), own)?;
    }
    Ok(())
}

/// Each key and value of `[defaults]` or a `[configs.<name>]` table on its own.
fn check_shared_keys(path: &Path, name: &str, table: &Table) -> Result<(), LoadError> {
    let mut b: ConfigBuilder = Config::builder();
    for (key, value, origin) in &table.keys {
        let line = match origin {
            Origin::File { line } => *line,
            Origin::Env { .. } => table.line,
        };
        let wrong = |message: String| LoadError::InvalidShared {
            path: path.to_owned(),
            line,
            table: name.to_owned(),
            key: key.clone(),
            message,
        };
        if [DYNAMIC, BASE, KEYS_TABLE].contains(&key.as_str()) {
            return Err(wrong(format!(
                "belongs in a `[breakers.<name>]` table; [{}] holds config keys only",
                Name(name)
            )));
        }
        b = apply(b, key, value, Dialect::Text).map_err(wrong)?;
    }
    Ok(())
}

/// A table's `base` names a `[configs.<name>]` table of the file.
fn check_base(
    path: &Path,
    name: &str,
    table: &Table,
    configs: &BTreeMap<String, Table>,
) -> Result<(), LoadError> {
    let Some((base, line)) = &table.base else {
        return Ok(());
    };
    if configs.contains_key(base) {
        return Ok(());
    }
    Err(LoadError::Invalid {
        path: path.to_owned(),
        line: *line,
        breaker: name.to_owned(),
        key: BASE.to_owned(),
        message: format!(
            "`{}` names no `[configs.<name>]` table{}",
            Name(base),
            base_hint(base, configs)
        ),
    })
}

/// After "names no `[configs.<name>]` table": "; did you mean `fast`?", or the file's bases,
/// or how to write one.
fn base_hint(base: &str, configs: &BTreeMap<String, Table>) -> String {
    match closest(base, configs.keys().map(String::as_str)) {
        Some(near) => format!("; did you mean `{}`?", Name(near)),
        None if configs.is_empty() => {
            "; the file has none: add one, like `[configs.fast]` followed by `open_for = \"5s\"`"
                .to_owned()
        }
        None => format!(
            "; the file's are {}",
            configs
                .keys()
                .take(10)
                .map(|n| format!("`{}`", Name(n)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
