//! Breaker configs from a TOML file, overridden by environment variables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::config::{Config, ConfigBuilder};
use crate::registry::Registry;
use crate::serde_impl::{KEYS, Raw, apply};

/// The prefix of environment overrides: `BREAKERBOX__<NAME>__<KEY>=value`.
const ENV_PREFIX: &str = "BREAKERBOX__";

/// Why [`Registry::load_toml`] configured nothing. The message names the file, the line and the
/// key (or the environment variable), and says what is wrong.
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
    #[error("{}:{line}: [breakers.{breaker}] `{key}` {message}", path.display())]
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
    /// An environment override is malformed or its value is wrong.
    #[error("environment variable {var}: {message}")]
    Env {
        /// The variable's name.
        var: String,
        /// What is wrong.
        message: String,
    },
    /// A breaker in the file already exists: configs apply only before a breaker's first use.
    #[error(
        "{}:{line}: circuit breaker '{breaker}' already exists, so its config cannot change; load the file at startup, before the breaker's first call", path.display()
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
            | LoadError::AlreadyCreated { line, .. } => Some(*line),
            LoadError::Read { .. } | LoadError::Env { .. } => None,
        }
    }

    /// The config key the error is about, if one.
    pub fn key(&self) -> Option<&str> {
        match self {
            LoadError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// Where a key's value came from, for the error.
enum Origin {
    File { line: usize },
    Env { var: String },
}

/// One `[breakers.<name>]` table, with its keys in order: the file's, then the environment's.
struct Table {
    line: usize,
    keys: Vec<(String, Raw, Origin)>,
}

impl Registry {
    /// Configures the breakers of a TOML file's `[breakers.<name>]` tables, then applies the
    /// environment overrides `BREAKERBOX__<NAME>__<KEY>=value`; returns the names configured.
    ///
    /// Keys are the attribute's (`failures`, `failure_rate`, `window` as a count or `"10s"`,
    /// `min_calls`, `slow`, `slow_rate`, `open_for`, `max_open_for`, `backoff`, `jitter`,
    /// `half_open_calls`, `successes`, `probe_timeout`, `max_concurrent`); keys not given keep
    /// the defaults of [`Config::default`], and a config from the file replaces the call site's
    /// whole (as [`configure`](Registry::configure) does). Other top-level tables are ignored, so
    /// the file can be the application's own config.
    ///
    /// ```toml
    /// [breakers.users]
    /// failures = 5
    /// open_for = "30s"
    ///
    /// [breakers.payments]
    /// failure_rate = 50
    /// window = "10s"
    /// min_calls = 20
    /// ```
    ///
    /// `BREAKERBOX__PAYMENTS__OPEN_FOR=5s` then overrides one key of `payments`. `<NAME>` is the
    /// breaker's name in capitals with every character other than a letter or a digit written
    /// `_` (`users-api` → `USERS_API`); it must name a table of the file. A value reads as a
    /// number if it is one, else as a string.
    ///
    /// Call it at startup, before the breakers' first calls. All or nothing: on any error, no
    /// breaker is configured and the error names the file, line and key (or the variable).
    pub fn load_toml(&self, path: impl AsRef<Path>) -> Result<Vec<String>, LoadError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load_toml_str(path, &text)
    }

    /// [`load_toml`](Registry::load_toml) from a string, such as a config service's answer;
    /// `origin` names it in errors. Environment overrides apply too.
    pub fn load_toml_str(
        &self,
        origin: impl AsRef<Path>,
        text: &str,
    ) -> Result<Vec<String>, LoadError> {
        // `vars()` would panic on a variable that is not Unicode; such a one cannot be ours.
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        self.load_with_env(origin.as_ref(), text, env)
    }

    pub(crate) fn load_with_env(
        &self,
        path: &Path,
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Vec<String>, LoadError> {
        let mut tables = parse(path, text)?;
        overlay_env(path, &mut tables, env)?;
        let mut configs = Vec::with_capacity(tables.len());
        for (name, table) in tables {
            let config = build(path, &name, &table)?;
            if self.created(&name) {
                return Err(LoadError::AlreadyCreated {
                    path: path.to_owned(),
                    line: table.line,
                    breaker: name,
                });
            }
            configs.push((name, config));
        }
        let names = configs.iter().map(|(n, _)| n.clone()).collect();
        for (name, config) in configs {
            self.configure(&name, config);
        }
        Ok(names)
    }
}

/// The line and column (from 1) of byte `offset` of `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn parse(path: &Path, text: &str) -> Result<BTreeMap<String, Table>, LoadError> {
    let syntax = |offset: usize, message: String| {
        let (line, column) = position(text, offset);
        LoadError::Syntax {
            path: path.to_owned(),
            line,
            column,
            message,
        }
    };
    let doc = DeTable::parse(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        syntax(offset, e.message().trim_end().to_owned())
    })?;
    let Some((key, breakers)) = doc.get_ref().get_key_value("breakers") else {
        return Ok(BTreeMap::new());
    };
    let DeValue::Table(breakers) = breakers.get_ref() else {
        return Err(syntax(
            key.span().start,
            "`breakers` must be a table of breaker tables, like `[breakers.users]`".to_owned(),
        ));
    };
    let mut tables = BTreeMap::new();
    for (name, table) in breakers.iter() {
        let line = position(text, name.span().start).0;
        let DeValue::Table(entries) = table.get_ref() else {
            return Err(syntax(
                name.span().start,
                format!(
                    "`breakers.{}` must be a table of keys, like `[breakers.{0}]` followed by `failures = 5`",
                    name.get_ref()
                ),
            ));
        };
        let keys = entries
            .iter()
            .map(|(k, v)| {
                let line = position(text, k.span().start).0;
                (k.get_ref().to_string(), raw(v), Origin::File { line })
            })
            .collect();
        tables.insert(name.get_ref().to_string(), Table { line, keys });
    }
    Ok(tables)
}

fn raw(value: &Spanned<DeValue<'_>>) -> Raw {
    match value.get_ref() {
        DeValue::Integer(i) => {
            i128::from_str_radix(i.as_str(), i.radix()).map_or(Raw::Other("an integer"), Raw::Int)
        }
        DeValue::Float(f) => f.as_str().parse().map_or(Raw::Other("a float"), Raw::Float),
        DeValue::String(s) => Raw::Str(s.to_string()),
        DeValue::Boolean(_) => Raw::Other("a boolean"),
        DeValue::Datetime(_) => Raw::Other("a date"),
        DeValue::Array(_) => Raw::Other("an array"),
        DeValue::Table(_) => Raw::Other("a table"),
    }
}

/// `users-api` → `USERS_API`, as it is written in an environment variable.
fn env_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn overlay_env(
    path: &Path,
    tables: &mut BTreeMap<String, Table>,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), LoadError> {
    let mut vars: Vec<(String, String)> = env
        .into_iter()
        .filter(|(k, _)| k.starts_with(ENV_PREFIX))
        .collect();
    // Deterministic order, so the same environment always gives the same error.
    vars.sort();
    for (var, value) in vars {
        let err = |message: String| LoadError::Env {
            var: var.clone(),
            message,
        };
        let Some((name, key)) = var[ENV_PREFIX.len()..].split_once("__") else {
            return Err(err(format!(
                "write it `{ENV_PREFIX}<NAME>__<KEY>`, like `{ENV_PREFIX}USERS__OPEN_FOR=30s`"
            )));
        };
        let key = key.to_ascii_lowercase();
        if !KEYS.contains(&key.as_str()) {
            return Err(err(format!(
                "unknown key `{key}`; valid keys: {}",
                KEYS.join(", ")
            )));
        }
        let name = name.to_ascii_uppercase();
        let mut matching: Vec<_> = tables
            .iter_mut()
            .filter(|(n, _)| env_name(n) == name)
            .collect();
        if matching.len() > 1 {
            let names: Vec<_> = matching.iter().map(|(n, _)| format!("'{n}'")).collect();
            return Err(err(format!(
                "{name} could be any of the breakers {}; rename one of them in {}",
                names.join(" and "),
                path.display()
            )));
        }
        let Some((_, table)) = matching.pop() else {
            return Err(err(format!(
                "no [breakers.<name>] table in {} is named {name} (written in capitals, `_` for other characters); the environment only overrides breakers the file configures",
                path.display()
            )));
        };
        table
            .keys
            .push((key, Raw::from_env(&value), Origin::Env { var: var.clone() }));
    }
    Ok(())
}

fn build(path: &Path, name: &str, table: &Table) -> Result<Config, LoadError> {
    let error = |key: &str, origin: Option<&Origin>, message: String| match origin {
        Some(Origin::Env { var }) => LoadError::Env {
            var: var.clone(),
            message: format!("`{key}` {message}"),
        },
        Some(Origin::File { line }) => LoadError::Invalid {
            path: path.to_owned(),
            line: *line,
            breaker: name.to_owned(),
            key: key.to_owned(),
            message,
        },
        None => LoadError::Invalid {
            path: path.to_owned(),
            line: table.line,
            breaker: name.to_owned(),
            key: key.to_owned(),
            message,
        },
    };
    let mut b: ConfigBuilder = Config::builder();
    for (key, value, origin) in &table.keys {
        b = apply(b, key, value).map_err(|m| error(key, Some(origin), m))?;
    }
    b.build().map_err(|e| {
        let key = e.field();
        // Blame where the key was set last: the environment wins over the file.
        let origin = table.keys.iter().rev().find(|(k, _, _)| k == key);
        let message = e.to_string();
        // The message starts with the key already; say the rest.
        let message = message
            .strip_prefix(&format!("`{key}` "))
            .unwrap_or(&message)
            .to_owned();
        error(key, origin.map(|(_, _, o)| o), message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::registry;
    use core::time::Duration;

    fn load(text: &str, env: &[(&str, &str)]) -> Result<Vec<String>, LoadError> {
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        registry().load_with_env(Path::new("breakers.toml"), text, env)
    }

    fn err(text: &str, env: &[(&str, &str)]) -> String {
        load(text, env).unwrap_err().to_string()
    }

    #[test]
    fn loads_tables_and_env_overrides_before_first_use() {
        let text = r#"
[server]
port = 8080

[breakers.load-users]
failures = 3
open_for = "30s"

[breakers.load-payments]
failure_rate = 50
window = "10s"
min_calls = 20
backoff = 2
"#;
        let names = load(
            text,
            &[
                ("BREAKERBOX__LOAD_USERS__OPEN_FOR", "5s"),
                ("BREAKERBOX__load_payments__window", "100"),
                ("UNRELATED", "x"),
            ],
        )
        .unwrap();
        assert_eq!(names, ["load-payments", "load-users"]);
        let users = registry().get_or_create("load-users", Config::default);
        assert_eq!(users.config().failures(), Some(3));
        assert_eq!(users.config().open_for(), Duration::from_secs(5));
        let payments = registry().get_or_create("load-payments", Config::default);
        assert_eq!(payments.config().failure_rate(), Some(50));
        assert_eq!(payments.config().window(), crate::Window::Calls(100));
        assert_eq!(payments.config().min_calls(), 20);
        assert_eq!(payments.config().backoff(), 2.0);
    }

    #[test]
    fn no_breakers_table_configures_nothing() {
        assert_eq!(
            load("[server]\nport = 1\n", &[]).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn syntax_error_names_file_line_and_column() {
        let e = load("[breakers.x]\nfailures = = 3\n", &[]).unwrap_err();
        assert!(matches!(e, LoadError::Syntax { line: 2, .. }), "{e}");
        assert!(e.to_string().starts_with("breakers.toml:2:"), "{e}");
    }

    #[test]
    fn breakers_must_be_tables() {
        assert_eq!(
            err("breakers = 5\n", &[]),
            "breakers.toml:1:1: `breakers` must be a table of breaker tables, like `[breakers.users]`"
        );
        assert!(
            err("[breakers]\nusers = 5\n", &[])
                .starts_with("breakers.toml:2:1: `breakers.users` must be a table")
        );
    }

    #[test]
    fn unknown_key_names_line_and_lists_keys() {
        let e = load("[breakers.bad-key]\nfailures = 3\nfailure = 3\n", &[]).unwrap_err();
        assert_eq!(e.line(), Some(3));
        assert_eq!(e.key(), Some("failure"));
        assert!(e.to_string().starts_with(
            "breakers.toml:3: [breakers.bad-key] `failure` unknown key; valid keys: failures, failures_within,"
        ), "{e}");
    }

    #[test]
    fn attribute_only_keys_are_explained() {
        let e = err("[breakers.t]\ntimeout = \"1s\"\n", &[]);
        assert!(
            e.contains("`timeout` belongs to the function's `#[circuit_breaker(...)]` attribute"),
            "{e}"
        );
    }

    #[test]
    fn wrong_kinds_of_value() {
        for (line, says) in [
            (
                "failures = \"3\"",
                "`failures` must be a whole number, got a string",
            ),
            (
                "failures = -1",
                "`failures` must be a whole number from 1 to 4294967295, got -1",
            ),
            (
                "failure_rate = 300",
                "`failure_rate` must be a percentage from 1 to 100, got 300",
            ),
            (
                "open_for = 30",
                "`open_for` must be a duration with a unit, like \"30s\" or \"30ms\", got the bare number 30",
            ),
            (
                "open_for = \"30 s\"",
                "`open_for` unknown unit ` s` in \"30 s\"",
            ),
            (
                "window = true",
                "`window` must be a number of calls (`window = 100`) or a duration (`window = \"10s\"`), got a boolean",
            ),
            (
                "backoff = \"2\"",
                "`backoff` must be a number, got a string",
            ),
        ] {
            let e = err(&format!("[breakers.kinds]\n\n{line}\n"), &[]);
            assert!(
                e.starts_with(&format!("breakers.toml:3: [breakers.kinds] {says}")),
                "{e}"
            );
        }
    }

    #[test]
    fn invalid_values_and_combinations_blame_the_key() {
        assert_eq!(
            err("[breakers.zero]\nfailures = 0\n", &[]),
            "breakers.toml:2: [breakers.zero] `failures` must be at least 1, got 0"
        );
        let e = err("[breakers.combo]\nfailures = 3\nfailure_rate = 50\n", &[]);
        assert_eq!(
            e,
            "breakers.toml:2: [breakers.combo] `failures` cannot be combined with `failure_rate`: trip either on consecutive failures or on a failure rate"
        );
        // The key that needs another one.
        let e = err("\n[breakers.needs]\nslow_rate = 50\n", &[]);
        assert_eq!(
            e,
            "breakers.toml:3: [breakers.needs] `slow_rate` requires `slow`, the duration from which a call is slow"
        );
    }

    #[test]
    fn env_errors_name_the_variable() {
        let file = "[breakers.env-x]\nfailures = 3\n";
        assert_eq!(
            err(file, &[("BREAKERBOX__ENV_X__FAILURES", "zero")]),
            "environment variable BREAKERBOX__ENV_X__FAILURES: `failures` must be a whole number, got a string"
        );
        assert_eq!(
            err(file, &[("BREAKERBOX__ENV_X__FAILURES", "0")]),
            "environment variable BREAKERBOX__ENV_X__FAILURES: `failures` must be at least 1, got 0"
        );
        assert!(err(file, &[("BREAKERBOX__ENV_X__COLOUR", "red")])
            .starts_with("environment variable BREAKERBOX__ENV_X__COLOUR: unknown key `colour`; valid keys: failures,"));
        assert!(err(file, &[("BREAKERBOX__OTHER__FAILURES", "3")])
            .starts_with("environment variable BREAKERBOX__OTHER__FAILURES: no [breakers.<name>] table in breakers.toml is named OTHER"));
        let two = "[breakers.a-b]\nfailures = 3\n[breakers.a_b]\nfailures = 3\n";
        assert!(err(two, &[("BREAKERBOX__A_B__FAILURES", "2")]).ends_with(
            "A_B could be any of the breakers 'a-b' and 'a_b'; rename one of them in breakers.toml"
        ));
        assert!(err(file, &[("BREAKERBOX__FAILURES", "3")]).starts_with(
            "environment variable BREAKERBOX__FAILURES: write it `BREAKERBOX__<NAME>__<KEY>`"
        ));
    }

    #[test]
    fn an_existing_breaker_is_not_reconfigured_and_nothing_is() {
        let _ = registry().get_or_create("load-exists", Config::default);
        let e = load(
            "[breakers.load-fresh]\nfailures = 2\n\n[breakers.load-exists]\nfailures = 2\n",
            &[],
        )
        .unwrap_err();
        assert!(
            matches!(e, LoadError::AlreadyCreated { line: 4, .. }),
            "{e}"
        );
        // All or nothing: the good table was not applied either.
        let fresh = registry().get_or_create("load-fresh", Config::default);
        assert_eq!(fresh.config().failures(), Some(5));
    }

    #[test]
    fn an_error_leaves_every_breaker_to_its_call_site() {
        let _ = load(
            "[breakers.load-half]\nfailures = 2\n[breakers.load-half2]\nfailures = 0\n",
            &[],
        );
        let half = registry().get_or_create("load-half", || {
            Config::builder().failures(9).build().unwrap()
        });
        assert_eq!(half.config().failures(), Some(9));
    }

    #[test]
    fn unreadable_file_names_the_path() {
        let e = registry()
            .load_toml("/nonexistent/breakers.toml")
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read circuit breaker config /nonexistent/breakers.toml: "),
            "{e}"
        );
    }
}
