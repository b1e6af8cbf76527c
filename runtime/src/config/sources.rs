//! Where each key of a breaker's config came from: [`Registry::config_sources`](crate::Registry::config_sources).

use core::fmt;
use std::path::PathBuf;

use super::builder::{ConfigBuilder, default_max_open_for};
use super::settings::Config;
use crate::site::Site;

/// The layer a config key's value came from (see docs/configuration.md for the layers).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigSource {
    /// The built-in default ([`Config::default`](crate::Config::default)): no layer names the
    /// key.
    Default,
    /// The `[defaults]` table of a config file.
    Defaults {
        /// The file (or the origin given to `load_toml_str`).
        file: PathBuf,
        /// The key's line, from 1.
        line: usize,
    },
    /// A named base, `[configs.<name>]`, of a config file.
    Base {
        /// The base's name.
        name: String,
        /// The file.
        file: PathBuf,
        /// The key's line, from 1.
        line: usize,
    },
    /// A `#[circuit_breaker]` attribute, the call that created the breaker or keyed family
    /// with its config (`get_or_create`, `family`), or the call to
    /// [`Registry::configure`](crate::Registry::configure) that gave it: the site's file and
    /// line.
    Site(Site),
    /// A `[breakers.<name>]` table of a config file, or a single key's
    /// `[breakers.<family>.keys."<key>"]`.
    Table {
        /// The table's name after `breakers.`: `users`, or `api.keys."slow-host"`.
        table: String,
        /// The file.
        file: PathBuf,
        /// The key's line, from 1.
        line: usize,
    },
    /// A `BREAKERBOX__<NAME>__<KEY>` environment variable.
    Env {
        /// The variable's name.
        var: String,
    },
    /// A whole config given in code after a config file was applied, by
    /// [`Breaker::reconfigure`](crate::Breaker::reconfigure): it names no keys, so every key
    /// whose value it changed is said to come from it.
    Code,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Default => f.write_str("the built-in default"),
            ConfigSource::Defaults { file, line } => {
                write!(f, "[defaults] at {}:{line}", file.display())
            }
            ConfigSource::Base { name, file, line } => {
                write!(f, "[configs.{name}] at {}:{line}", file.display())
            }
            ConfigSource::Site(site) => site.fmt(f),
            ConfigSource::Table { table, file, line } => {
                write!(f, "[breakers.{table}] at {}:{line}", file.display())
            }
            ConfigSource::Env { var } => f.write_str(var),
            ConfigSource::Code => f.write_str("a config set in code"),
        }
    }
}

/// One key of a breaker's config: its effective value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeySource {
    /// The key, as the attribute and the config file name it (`open_for`).
    pub key: &'static str,
    /// Its value, as `Debug` shows durations (`5s`, `250ms`) and `unset` for an option not
    /// set.
    pub value: String,
    /// Where the value came from.
    pub source: ConfigSource,
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {} ({})", self.key, self.value, self.source)
    }
}

/// The keys of `config` that are not [`Config::default`]'s (a value derived from others, as
/// `max_open_for` from `open_for`, counts as not set): what a config built in code sets.
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
pub(crate) fn code_keys(mut b: ConfigBuilder, config: &Config) -> ConfigBuilder {
    let d = Config::default();
    macro_rules! optional {
        ($($key:ident)*) => { $(if let Some(v) = config.$key { b = b.$key(v); })* };
    }
    macro_rules! changed {
        ($($key:ident)*) => { $(if config.$key != d.$key { b = b.$key(config.$key); })* };
    }
    if config.failure_rate.is_none() && config.failures != d.failures {
        b = b.failures(config.failures);
    }
    optional!(failures_within failure_rate slow slow_rate max_concurrent timeout);
    if config.uses_window() {
        changed!(window);
        // The default minimum adapts to a small count window: only another value was set.
        let derived = match config.window {
            super::settings::Window::Calls(n) => d.min_calls.min(n),
            super::settings::Window::Time(_) => d.min_calls,
        };
        if config.min_calls != derived {
            b = b.min_calls(config.min_calls);
        }
    }
    changed!(open_for backoff jitter half_open_calls successes probe_timeout probe_every);
    changed!(max_keys idle_for latency health critical);
    if config.max_open_for != default_max_open_for(config.open_for, config.backoff) {
        b = b.max_open_for(config.max_open_for);
    }
    b
}
