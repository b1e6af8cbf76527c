//! A file and the environment checked and built, layer by layer, into the configs they give:
//! [`Prepared`] for each breaker, [`PreparedKey`] for each single key's table.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use super::env::{match_env, read_env};
use super::file::{base_hint, check_base, check_file_keys, check_shared_keys};
use super::load_error::LoadError;
use super::merge::{Merge, Own, Source};
use super::parse::parse;
use super::table::{CONFIGS, DEFAULTS, Keys, Origin, Table, key_table_name};
use crate::config::Config;
use crate::config::layers::{Built, Layered};
use crate::config::sources::KeySource;
use crate::config_keys::KEYS;
use crate::registration::Site;
use crate::registry::Registry;
use crate::suggest::closest;

impl Registry {
    /// Reads and checks a file and the environment, and builds, layer by layer, the config of
    /// every breaker they reach (and of every single key's table), and of every breaker the last
    /// load of `scope` (the file, see [`reload_toml`](Registry::reload_toml)) reached.
    pub(super) fn prepare(
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
        if let Some(previous) = self.files.reached_by(scope) {
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
        let live: HashSet<String> = crate::keyed::registered::reloadable().into_keys().collect();
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
        known.extend(crate::keyed::registered::reloadable().into_keys());
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
pub(super) type PreparedFile = (Vec<Prepared>, Vec<PreparedKey>, Vec<SharedNote>);

/// A `[defaults]` or `[configs.<name>]` table: its name (`defaults`, `configs.fast`), its line
/// and its keys (one bit per [`KEYS`] entry).
pub(super) type SharedNote = (String, usize, u32);

/// The keys of a table, one bit per [`KEYS`] entry.
pub(super) fn key_bits(keys: &Keys) -> u32 {
    keys.iter()
        .filter_map(|(key, _, _)| KEYS.iter().position(|k| k == key))
        .fold(0u32, |bits, i| bits | 1 << i)
}

/// Where a configured breaker's config comes from in the file, for an error about applying
/// it: its table's line, or the variable that reached it.
#[derive(Clone, Debug)]
pub(super) enum Place {
    Line(usize),
    Env(String),
}

/// A breaker's (or keyed family's) config, built from its layers.
pub(super) struct Prepared {
    pub(super) name: String,
    pub(super) place: Place,
    pub(super) config: Config,
    /// Where each key's value came from.
    pub(super) sources: Vec<KeySource>,
    /// For a name neither annotated nor created: the layers again, to put over the config of
    /// the code that makes it.
    pub(super) layered: Option<Layered>,
    /// Its `[breakers.<name>]` table's line and keys (one bit per [`KEYS`] entry), if it has
    /// one.
    pub(super) table: Option<(usize, u32)>,
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
pub(super) struct PreparedKey {
    pub(super) family: String,
    pub(super) key: String,
    pub(super) line: usize,
    /// The keys its table sets, one bit per [`KEYS`] entry.
    pub(super) keys: u32,
    pub(super) config: Config,
    pub(super) sources: Vec<KeySource>,
}
