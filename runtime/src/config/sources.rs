//! Where each key of a breaker's config came from: [`Registry::config_sources`].

use core::fmt;
use std::path::PathBuf;

use super::builder::ConfigBuilder;
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
    if config.failure_rate.is_none() && config.failures != d.failures {
        b = b.failures(config.failures);
    }
    if let Some(v) = config.failures_within {
        b = b.failures_within(v);
    }
    if let Some(v) = config.failure_rate {
        b = b.failure_rate(v);
    }
    if config.uses_window() {
        if config.window != d.window {
            b = b.window(config.window);
        }
        // The default minimum adapts to a small count window: only another value was set.
        let derived = match config.window {
            super::settings::Window::Calls(n) => d.min_calls.min(n),
            super::settings::Window::Time(_) => d.min_calls,
        };
        if config.min_calls != derived {
            b = b.min_calls(config.min_calls);
        }
    }
    if let Some(v) = config.slow {
        b = b.slow(v);
    }
    if let Some(v) = config.slow_rate {
        b = b.slow_rate(v);
    }
    if config.open_for != d.open_for {
        b = b.open_for(config.open_for);
    }
    if config.backoff != d.backoff {
        b = b.backoff(config.backoff);
    }
    let derived_max = if config.backoff > 1.0 {
        config.open_for.max(core::time::Duration::from_secs(300))
    } else {
        config.open_for
    };
    if config.max_open_for != derived_max {
        b = b.max_open_for(config.max_open_for);
    }
    if config.jitter != d.jitter {
        b = b.jitter(config.jitter);
    }
    if config.half_open_calls != d.half_open_calls {
        b = b.half_open_calls(config.half_open_calls);
    }
    if config.successes != d.successes {
        b = b.successes(config.successes);
    }
    if config.probe_timeout != d.probe_timeout {
        b = b.probe_timeout(config.probe_timeout);
    }
    if let Some(v) = config.max_concurrent {
        b = b.max_concurrent(v);
    }
    if config.probe_every != d.probe_every {
        b = b.probe_every(config.probe_every);
    }
    if config.max_keys != d.max_keys {
        b = b.max_keys(config.max_keys);
    }
    if config.idle_for != d.idle_for {
        b = b.idle_for(config.idle_for);
    }
    if config.latency != d.latency {
        b = b.latency(config.latency);
    }
    if config.health != d.health {
        b = b.health(config.health);
    }
    if config.critical != d.critical {
        b = b.critical(config.critical);
    }
    if let Some(v) = config.timeout {
        b = b.timeout(v);
    }
    b
}
