//! The keys of a breaker's config as text: the attribute's, less those that belong to the
//! function (`name`, `key`, `config`, `fallback`, `fallback_on`, `classify`, `probe`, `crate`).

/// The keys a config file, an environment variable or a serialized [`Config`](crate::Config)
/// may hold, in the order the docs list them. The macro crate's test `keys_mirror_the_runtime`
/// checks that the attribute's list is this one plus its own keys.
#[doc(hidden)]
pub const KEYS: &[&str] = &[
    "failures",
    "failures_within",
    "failure_rate",
    "window",
    "min_calls",
    "slow",
    "slow_rate",
    "open_for",
    "max_open_for",
    "backoff",
    "jitter",
    "half_open_calls",
    "successes",
    "probe_timeout",
    "max_concurrent",
    "probe_every",
    "max_keys",
    "idle_for",
    "latency",
    "health",
    "critical",
    "timeout",
];

/// Keys of the attribute that configure the function, not the breaker.
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
pub(crate) const ATTRIBUTE_ONLY: &[&str] = &[
    "name",
    "key",
    "config",
    "fallback",
    "fallback_with_reason",
    "fallback_on",
    "classify",
    "probe",
    "crate",
];
