//! One breaker's config from its layers, key by key: the built-in defaults, `[defaults]`, its
//! base (`[configs.<name>]`), its attribute (or the config of the code that created it), its
//! table (and a single key's table), then the environment. Each layer sets only the keys it
//! names; the result is checked once, and an error names every key it involves with its value
//! and the layer it came from.

use std::path::Path;

use super::load_error::{Cut, LoadError, Name};
use super::table::Origin;
use crate::config::sources::{ConfigSource, KeySource, code_keys};
use crate::config::{Config, ConfigBuilder, ConfigError};
use crate::config_keys::KEYS;
use crate::registration::{Registration, Site, keys as values_of, value};
use crate::serde_impls::{Dialect, Raw, apply};

/// Where a key's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// The built-in default ([`Config::default`]).
    Default,
    /// The `[defaults]` table, at this line.
    Defaults { line: usize },
    /// A `[configs.<name>]` table, at this line.
    Base { name: String, line: usize },
    /// A `#[circuit_breaker]` attribute.
    Attribute(Site),
    /// The config of the code that created the breaker (`get_or_create`).
    Code(Site),
    /// A `[breakers.<name>]` table (or a single key's), at this line.
    Table { name: String, line: usize },
    /// A `BREAKERBOX__<NAME>__<KEY>` variable.
    Env { var: String },
}

impl Source {
    /// The public form, with the file's path.
    fn public(&self, path: &Path) -> ConfigSource {
        let file = path.to_owned();
        match self.clone() {
            Source::Default => ConfigSource::Default,
            Source::Defaults { line } => ConfigSource::Defaults { file, line },
            Source::Base { name, line } => ConfigSource::Base { name, file, line },
            Source::Attribute(site) | Source::Code(site) => ConfigSource::Site(site),
            Source::Table { name, line } => ConfigSource::Table {
                table: name,
                file,
                line,
            },
            Source::Env { var } => ConfigSource::Env { var },
        }
    }

    /// How a message names the layer: `[breakers.users] at breakers.toml:3`,
    /// `#[circuit_breaker] at src/api.rs:12`, `BREAKERBOX__USERS__OPEN_FOR`.
    pub(super) fn describe(&self, path: &Path) -> String {
        let path = path.display();
        match self {
            Source::Default => "the built-in default".to_owned(),
            Source::Defaults { line } => format!("[defaults] at {path}:{line}"),
            Source::Base { name, line } => format!("[configs.{}] at {path}:{line}", Name(name)),
            Source::Attribute(site) | Source::Code(site) => site.to_string(),
            Source::Table { name, line } => format!("[breakers.{}] at {path}:{line}", Name(name)),
            Source::Env { var } => Name(var).to_string(),
        }
    }
}

/// What the layer under a breaker's table is: its attribute, the config of the code that
/// created it, or nothing (a breaker made at run time, not yet created).
#[derive(Clone, Copy)]
pub(super) enum Own<'a> {
    None,
    Attribute(&'static Registration),
    Code(Site, &'a Config),
}

/// A breaker's config, built layer by layer.
#[derive(Clone)]
pub(super) struct Merge<'p> {
    path: &'p Path,
    /// The name messages give: `users`, or `api.keys."slow-host"`.
    breaker: String,
    /// The line an error with no line of its own is reported at.
    line: usize,
    b: ConfigBuilder,
    /// Each key's layer, by its place in [`KEYS`].
    from: Vec<Source>,
    /// The attribute of a function whose calls read no `timeout` (its attribute names
    /// none): `[defaults]` and bases leave its `timeout` alone, and a table or variable
    /// setting it is an error.
    untimed: Option<Site>,
}

fn index(key: &str) -> Option<usize> {
    KEYS.iter().position(|k| *k == key)
}

impl<'p> Merge<'p> {
    pub(super) fn new(path: &'p Path, breaker: String, line: usize) -> Merge<'p> {
        Merge {
            path,
            breaker,
            line,
            b: Config::builder(),
            from: vec![Source::Default; KEYS.len()],
            untimed: None,
        }
    }

    /// The breaker belongs to `own`: an attribute without `timeout` takes none from a file.
    pub(super) fn owned_by(&mut self, own: Own<'_>) {
        if let Own::Attribute(r) = own
            && !r.is_timed()
        {
            self.untimed = Some(r.site());
        }
    }

    /// The same layers so far, for a single key of the family, named `breaker` in messages.
    pub(super) fn for_key(&self, breaker: String, line: usize) -> Merge<'p> {
        Merge {
            breaker,
            line,
            ..self.clone()
        }
    }

    /// A table's keys, each from `source(line)` (a variable's from the variable).
    pub(super) fn text(
        &mut self,
        keys: &[(String, Raw, Origin)],
        source: impl Fn(usize) -> Source,
    ) -> Result<(), LoadError> {
        self.switch(|name| keys.iter().any(|(key, _, _)| key == name));
        for (key, value, origin) in keys {
            if key == "timeout"
                && let Some(site) = self.untimed
            {
                // A shared table's `timeout` is for the functions that can time out.
                if let Origin::File { line } = origin
                    && matches!(source(*line), Source::Defaults { .. } | Source::Base { .. })
                {
                    continue;
                }
                return Err(self.bad(
                    key,
                    origin,
                    format!(
                        "cannot apply: the function of breaker `{}` ({site}) has no `timeout` in \
                         its attribute, so nothing times its calls out; add `timeout = \"…\"` \
                         to the attribute of its `async fn`, and this value replaces it",
                        Name(&self.breaker)
                    ),
                ));
            }
            let b = core::mem::take(&mut self.b);
            self.b = apply(b, key, value, Dialect::Text).map_err(|m| self.bad(key, origin, m))?;
            let line = match origin {
                Origin::File { line } => *line,
                Origin::Env { .. } => self.line,
            };
            let source = match origin {
                Origin::Env { var } => Source::Env { var: var.clone() },
                Origin::File { .. } => source(line),
            };
            if let Some(i) = index(key) {
                self.from[i] = source;
            }
        }
        Ok(())
    }

    /// The attribute's keys, or those of the code's config.
    pub(super) fn own(&mut self, own: Own<'_>) {
        let (given, source) = match own {
            Own::None => return,
            Own::Attribute(r) => {
                let given = r.configure_onto(Config::builder());
                self.switch(|name| given.given().any(|k| k == name));
                self.b = r.configure_onto(core::mem::take(&mut self.b));
                (given, Source::Attribute(r.site()))
            }
            Own::Code(site, config) => {
                let given = code_keys(Config::builder(), config);
                self.switch(|name| given.given().any(|k| k == name));
                self.b = code_keys(core::mem::take(&mut self.b), config);
                (given, Source::Code(site))
            }
        };
        for key in given.given() {
            if let Some(i) = index(key) {
                self.from[i] = source.clone();
            }
        }
    }

    /// Before a layer that names one way of tripping, drops the other way from the layers
    /// under it: `failures` (and `failures_within`, which counts its streak) and
    /// `failure_rate` exclude each other, so a layer may switch the breaker from one to the
    /// other (the same layer naming both is still an error). A rate dropped takes `window` and
    /// `min_calls` with it unless a slow-call rate still uses them.
    fn switch(&mut self, names: impl Fn(&str) -> bool) {
        let set_below =
            |m: &Self, key: &str| index(key).is_some_and(|i| m.from[i] != Source::Default);
        let mut drop: Vec<&'static str> = Vec::new();
        if names("failure_rate") && !names("failures") && !names("failures_within") {
            drop.extend(["failures", "failures_within"]);
        }
        if (names("failures") || names("failures_within")) && !names("failure_rate") {
            drop.push("failure_rate");
            let slow_rate = names("slow_rate") || set_below(self, "slow_rate");
            if !slow_rate && set_below(self, "failure_rate") {
                drop.extend(["window", "min_calls"].into_iter().filter(|k| !names(k)));
            }
        }
        for key in drop {
            if set_below(self, key) {
                self.b = core::mem::take(&mut self.b).unset(key);
                if let Some(i) = index(key) {
                    self.from[i] = Source::Default;
                }
            }
        }
    }

    /// A key's own error (its value, or an unknown key), blamed where it was set.
    fn bad(&self, key: &str, origin: &Origin, message: String) -> LoadError {
        match origin {
            Origin::Env { var } => LoadError::Env {
                var: var.clone(),
                message: format!("`{}` {message}", Cut(key)),
            },
            Origin::File { line } => LoadError::Invalid {
                path: self.path.to_owned(),
                line: *line,
                breaker: self.breaker.clone(),
                key: key.to_owned(),
                message,
            },
        }
    }

    /// The merged config, checked; an error names each key it involves, its value and layer.
    pub(super) fn finish(self) -> Result<(Config, Vec<KeySource>), LoadError> {
        // The values as set, for a message should the check fail (a clone of a config is a
        // copy and reference counts).
        let pending = self.b.values().clone();
        let from = self.from;
        let e = match self.b.build() {
            Ok(config) => {
                // The keys a layer named; the others are the defaults, and cost nothing here.
                let sources = KEYS
                    .iter()
                    .zip(&from)
                    .filter(|(_, source)| **source != Source::Default)
                    .map(|(key, source)| KeySource {
                        key,
                        value: value(&config, key),
                        source: source.public(self.path),
                    })
                    .collect();
                return Ok((config, sources));
            }
            Err(e) => e,
        };
        let values = values_of(&pending);
        let key = e.field();
        let involved = involved(&e);
        let place = |k: &str| index(k).map_or(Source::Default, |i| from[i].clone());
        let shown: Vec<String> = involved
            .iter()
            .map(|k| {
                let value = values
                    .iter()
                    .find(|(name, _)| name == k)
                    .map_or("unset", |(_, v)| v.as_str());
                match place(k) {
                    Source::Default if value == "unset" => format!("`{k}` is not set"),
                    source => format!("{k} = {} from {}", Cut(value), source.describe(self.path)),
                }
            })
            .collect();
        let message = e.to_string();
        // The message starts with the key already; say the rest.
        let message = message
            .strip_prefix(&format!("`{key}` "))
            .unwrap_or(&message)
            .to_owned();
        // One key set in the table or variable the error is reported at says all; else each
        // involved key's value and layer.
        let alone =
            involved.len() == 1 && matches!(place(key), Source::Table { .. } | Source::Env { .. });
        let message = if alone {
            message
        } else {
            format!("{message} ({})", shown.join("; "))
        };
        // Blamed on the highest layer among the involved keys that is the file's or the
        // environment's: the last change made, which the lower layers did not expect.
        let rank = |s: &Source| match s {
            Source::Env { .. } => 4,
            Source::Table { .. } => 3,
            Source::Base { .. } => 2,
            Source::Defaults { .. } => 1,
            _ => 0,
        };
        // Of equal layers, the error's own key (the first) is blamed.
        let blame = involved
            .iter()
            .rev()
            .map(|k| place(k))
            .filter(|s| rank(s) > 0)
            .max_by_key(rank);
        Err(match blame {
            Some(Source::Env { var }) if alone => LoadError::Env {
                var,
                message: format!("`{key}` {message}"),
            },
            Some(Source::Env { var }) => LoadError::Env {
                var,
                message: format!("[breakers.{}] `{key}` {message}", Name(&self.breaker)),
            },
            Some(
                Source::Table { line, .. } | Source::Defaults { line } | Source::Base { line, .. },
            ) => LoadError::Invalid {
                path: self.path.to_owned(),
                line,
                breaker: self.breaker,
                key: key.to_owned(),
                message,
            },
            _ => LoadError::Invalid {
                path: self.path.to_owned(),
                line: self.line,
                breaker: self.breaker,
                key: key.to_owned(),
                message,
            },
        })
    }
}

/// The keys an error is about: its own and those it is checked against.
fn involved(e: &ConfigError) -> Vec<&'static str> {
    let key = e.field();
    let mut keys = vec![key];
    match e {
        ConfigError::Conflict { with, .. } => keys.push(with),
        ConfigError::Requires { field, .. } => match *field {
            "window" | "min_calls" => keys.extend(["failure_rate", "slow_rate"]),
            "slow_rate" => keys.push("slow"),
            _ => {}
        },
        ConfigError::OutOfRange { field, .. } => match *field {
            "min_calls" => keys.push("window"),
            "max_open_for" => keys.push("open_for"),
            "successes" => keys.push("half_open_calls"),
            _ => {}
        },
    }
    keys
}
