//! `Registry::reload_toml`: a file's configs applied to live breakers and keyed families.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use super::file::read;
use super::load_error::{LoadError, Name};
use super::prepare::{Place, Prepared, PreparedKey};
use super::table::key_table_name;
use crate::config::layers::Reached;
use crate::keyed::family_config::{self as reload, KeyTable, Reload};
use crate::keyed::family_exists;
use crate::reconfigure::ReconfigureError;
use crate::registry::Registry;

impl Registry {
    /// What [`load_toml`](Registry::load_toml) does (the two are one since a load applies to
    /// breakers that exist too): each breaker's config is rebuilt from its layers (the file's,
    /// the environment's, and its attribute's or its code's) and replaced live, keeping its
    /// state, counts, window and open time (see
    /// [`Breaker::reconfigure`](crate::Breaker::reconfigure) for what a new value changes
    /// when). Breakers not created yet are configured for their creation. Returns the names
    /// configured.
    ///
    /// **What was removed is gone.** Every name the last load of the same file (the same
    /// `path`, or `origin` for [`reload_toml_str`](Registry::reload_toml_str)) reached is
    /// rebuilt too: one whose table, key table, `[defaults]` key, base or variable is gone
    /// takes the layers under it again (its attribute's or its code's config, the defaults),
    /// keeping its state, and is among the names returned. Another file's load leaves it,
    /// unless that file reaches the name too (its table, a variable, or its `[defaults]`, which
    /// reach every annotated breaker): then that load builds it from its own layers.
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config, State};
    ///
    /// let b = registry().get_or_create("doc-reload", || Config::builder().failures(3).build().unwrap());
    /// let _ = b.call(|| Err::<(), _>("down"));
    /// let _ = b.call(|| Err::<(), _>("down"));
    /// registry().reload_toml_str("live.toml", "[breakers.doc-reload]\nfailures = 2\n").unwrap();
    /// assert_eq!(b.config().failures(), Some(2));
    /// let _ = b.call(|| Err::<(), _>("down")); // the third of the streak: over the new 2
    /// assert_eq!(b.state(), State::Open);
    /// ```
    ///
    /// **All or nothing.** The whole file (and the environment) is read and checked, every
    /// config built, and every live breaker's change checked, before anything is applied: a
    /// file with any error changes no breaker and returns the error. A change a live breaker
    /// cannot take is one: [`LoadError::NotReloadable`] names the key, for the window's kind
    /// or size and for adding or removing `failure_rate`, `slow_rate`, `slow`,
    /// `max_concurrent` or `failures_within` (these shape the window or the call path: they
    /// must reset the window, so they apply to breakers created after the change, that is
    /// after a restart).
    ///
    /// **Keyed families.** For a family that exists ([`family`](Registry::family), or
    /// `#[circuit_breaker(key = …)]`), the config its layers give (its table's keys over its
    /// attribute's, under the environment's) becomes the config its new keys get and, live as
    /// above, every key's breaker held now (and its overflow
    /// breaker), each keeping its state, counts, window and open time; a
    /// `[breakers.<name>.keys."<key>"]` table does the same for one key (its keys over the
    /// family table's). The file's key tables replace the family's: a key whose table is
    /// gone takes the family's config. The family keeps its clock and its probe (a file names
    /// no probe function). The same rule refuses a change that must reset a window, checked
    /// against every key held now, the family's config and each key table, old or new (so
    /// whether a reload is taken does not depend on which keys happen to be held);
    /// `max_keys` and `idle_for` cannot change on a live family. A key created while the
    /// file is applied ends with the new config.
    ///
    /// A breaker created by another thread while the file is applied is configured live if
    /// it can be, else reported, with the tables before it applied. Loads run one at a time:
    /// two loads at once (a watcher's and a call's, say) apply one file after the other, never
    /// interleaved breaker by breaker.
    pub fn reload_toml(&self, path: impl AsRef<Path>) -> Result<Vec<String>, LoadError> {
        let path = path.as_ref();
        self.reload_toml_str(path, &read(path)?)
    }

    /// [`reload_toml`](Registry::reload_toml) from a string. `origin` stands for the file's
    /// path: it names the text in errors, and a later load under the same `origin` replaces
    /// this one ("What was removed is gone" above), as
    /// [`load_toml_str`](Registry::load_toml_str) shows.
    pub fn reload_toml_str(
        &self,
        origin: impl AsRef<Path>,
        text: &str,
    ) -> Result<Vec<String>, LoadError> {
        self.reload_with_env(origin.as_ref(), text, std::env::vars_os())
    }

    pub(crate) fn reload_with_env(
        &self,
        path: &Path,
        text: &str,
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Vec<String>, LoadError> {
        let _one_at_a_time = crate::registry::one_load_at_a_time();
        let scope = scope(path);
        let (configs, key_configs, shared) = self.prepare(path, &scope, text, env)?;
        let refused = |name: &str, place: &Place, e: ReconfigureError| match place {
            Place::Line(line) => LoadError::NotReloadable {
                path: path.to_owned(),
                line: *line,
                breaker: name.to_owned(),
                key: Some(e.field.to_owned()),
                message: e.to_string(),
            },
            Place::Env(var) => LoadError::Env {
                var: var.clone(),
                message: format!("[breakers.{}] {e}", Name(name)),
            },
        };
        // The live families in the file (by their index in `configs`), each with its single
        // keys' tables (all of them: a key whose table is gone goes back to the family's
        // config).
        let live = crate::keyed::registered::reloadable();
        let mut tables: HashMap<&str, KeyTable> = HashMap::new();
        for k in &key_configs {
            if live.contains_key(&k.family) {
                let table = tables.entry(&k.family).or_default();
                table.insert(k.key.clone(), k.config.clone());
            } else if self.existing(&k.family).is_some()
                || self.attribute(&k.family).is_some_and(|r| !r.is_keyed())
            {
                // A single breaker, made or annotated: its keys' tables would reach nothing.
                return Err(LoadError::NotReloadable {
                    path: path.to_owned(),
                    line: k.line,
                    breaker: key_table_name(&k.family, &k.key),
                    key: None,
                    message: format!(
                        "'{}' is a single breaker, not a keyed family: only a family has keys",
                        Name(&k.family)
                    ),
                });
            }
        }
        let mut families: Vec<(usize, &Arc<dyn Reload>, KeyTable)> = Vec::new();
        for (i, p) in configs.iter().enumerate() {
            if let Some(family) = live.get(&p.name) {
                families.push((
                    i,
                    family,
                    tables.remove(p.name.as_str()).unwrap_or_default(),
                ));
            }
        }
        // Every check first.
        let mut next = families.iter().peekable();
        for (i, p) in configs.iter().enumerate() {
            if let Some((_, family, keys)) = next.next_if(|f| f.0 == i) {
                family
                    .check(&p.config, keys)
                    .map_err(|r| family_refused(path, &p.name, &p.place, &key_configs, r))?;
            } else if let Some(b) = self.existing(&p.name) {
                b.can_reconfigure(&p.config)
                    .map_err(|e| refused(&p.name, &p.place, e))?;
            }
        }
        // Then every change.
        let file: Arc<Path> = path.into();
        let mut names = Vec::with_capacity(configs.len());
        let mut families = families.into_iter().peekable();
        for (i, p) in configs.into_iter().enumerate() {
            let Prepared {
                name,
                place,
                config,
                sources,
                layered,
                table,
            } = p;
            let note = |name: &str| {
                if let Some((line, keys)) = table {
                    self.files.note_table(name, &file, line, keys, false);
                }
            };
            if let Some((_, family, keys)) = families.next_if(|f| f.0 == i) {
                self.set_sources(&name, &config, sources);
                family.apply(config, keys);
                note(&name);
                names.push(name);
                continue;
            }
            let account = (config.clone(), sources);
            let live = match self.existing(&name) {
                Some(b) => Some(b),
                // Not created: configured for its creation, unless created meanwhile.
                None if self.preset_from_file(&name, config.clone(), layered) => None,
                None => self.existing(&name),
            };
            if let Some(b) = live {
                b.reconfigure(config)
                    .map_err(|e| refused(&name, &place, e))?;
                self.mark_preset(&name);
            }
            // After `configure`, which forgets the account of a config it replaces.
            self.set_sources(&name, &account.0, account.1);
            note(&name);
            names.push(name);
        }
        let keys = key_configs
            .iter()
            .map(|k| key_table_name(&k.family, &k.key))
            .collect();
        self.files.set_reached(
            &scope,
            Reached {
                names: names.clone(),
                keys,
            },
        );
        for (name, line, keys) in shared {
            self.files.note_table(&name, &file, line, keys, true);
        }
        for k in key_configs {
            let table = key_table_name(&k.family, &k.key);
            self.files.note_table(&table, &file, k.line, k.keys, false);
            self.set_sources(&table, &k.config, k.sources);
            if live.contains_key(&k.family) {
                continue;
            }
            // A breaker or family created since the check: say so.
            if family_exists(&k.family) || !self.configure_key(&k.family, &k.key, k.config) {
                return Err(LoadError::AlreadyCreated {
                    path: path.to_owned(),
                    line: k.line,
                    breaker: k.family,
                });
            }
        }
        Ok(names)
    }
}

/// Under what a load's file is known to the next load of it: its path. The loader's unit
/// tests run in parallel in one process and name their files alike; each test's loads are
/// apart (by its thread), so that one test's file does not undo another's.
#[cfg(not(test))]
fn scope(path: &Path) -> std::path::PathBuf {
    path.to_owned()
}

#[cfg(test)]
fn scope(path: &Path) -> std::path::PathBuf {
    let thread = std::thread::current();
    let id = format!("{:?}", thread.id());
    path.join(thread.name().unwrap_or(&id))
}

/// A live family's refusal of a reload, as an error: blamed on the key's table if it has one
/// in the file, else on the family's.
fn family_refused(
    path: &Path,
    name: &str,
    place: &Place,
    keys: &[PreparedKey],
    refused: reload::Refused,
) -> LoadError {
    let (field, message) = match refused.error {
        reload::FamilyRefusal::Shape(e) => (
            e.field,
            format!(
                "`{}` cannot change on a live keyed family's breakers: {}; restart to apply it",
                e.field, e.why
            ),
        ),
        reload::FamilyRefusal::Bounds(field) => (
            field,
            format!(
                "`{field}` cannot change on a live keyed family: its bounds are fixed when it \
                 is made; restart to apply it"
            ),
        ),
    };
    let line = match place {
        Place::Line(line) => *line,
        Place::Env(var) if refused.key.is_none() => {
            return LoadError::Env {
                var: var.clone(),
                message: format!("[breakers.{}] {message}", Name(name)),
            };
        }
        Place::Env(_) => 1,
    };
    let (breaker, line) = match &refused.key {
        None => (name.to_owned(), line),
        Some(key) => (
            key_table_name(name, key),
            keys.iter()
                .find(|k| k.family == name && k.key == *key)
                .map_or(line, |k| k.line),
        ),
    };
    LoadError::NotReloadable {
        path: path.to_owned(),
        line,
        breaker,
        key: Some(field.to_owned()),
        message,
    }
}
