//! `serde` support: durations as `"250ms"`/`"2s"`, [`Config`] as the attribute's keys (checked
//! by [`ConfigBuilder::build`], so a deserialized config is always valid), [`Window`] as a
//! count or a duration, [`State`] as its name.

use core::fmt;
use core::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::config::{Config, ConfigBuilder, Window};
use crate::config_keys::{ATTRIBUTE_ONLY, KEYS};
use crate::duration::{self as text, DurationError};
use crate::state::State;
use crate::suggest::closest;

/// A config value as written in a file or an environment variable, before its key gives it a
/// type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Raw {
    Int(i128),
    /// A whole number past `i128`, as written.
    Big(String),
    Float(f64),
    Str(String),
    Bool(bool),
    /// Anything else: its kind, for the message.
    Other(&'static str),
}

impl Raw {
    /// An environment variable's value: a number if it reads as one, else a string.
    pub(crate) fn from_env(value: &str) -> Raw {
        let v = value.trim();
        // Quoted as in a `.env` file or a compose file that kept its quotes: `"5s"` is `5s`.
        let v = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|&(open, close)| v.strip_prefix(open)?.strip_suffix(close))
            .map_or(v, str::trim);
        let digits = v.replace('_', "");
        if let Ok(i) = digits.parse::<i128>() {
            Raw::Int(i)
        } else if is_whole(&digits) {
            Raw::Big(v.to_owned())
        } else if let Ok(f) = v.parse::<f64>() {
            Raw::Float(f)
        } else if let Ok(b) = v.parse::<bool>() {
            Raw::Bool(b)
        } else {
            Raw::Str(v.to_owned())
        }
    }

    /// A whole number as a message quotes it.
    fn whole(&self) -> Option<String> {
        match self {
            Raw::Int(n) => Some(n.to_string()),
            // Its first 32 characters and its length, so a huge value makes no huge message.
            Raw::Big(s) => Some(match s.char_indices().nth(32) {
                None => s.clone(),
                Some((end, _)) => format!("{}… ({} characters)", &s[..end], s.len()),
            }),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Raw::Int(_) | Raw::Big(_) => "an integer",
            Raw::Float(_) => "a float",
            Raw::Str(_) => "a string",
            Raw::Bool(_) => "a boolean",
            Raw::Other(kind) => kind,
        }
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Raw, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Raw;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, a string or a boolean")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
                Ok(Raw::Int(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Raw, E> {
                Ok(Raw::Int(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Raw, E> {
                Ok(Raw::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
                Ok(Raw::Str(v.to_owned()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
                Ok(Raw::Bool(v))
            }
            fn visit_unit<E>(self) -> Result<Raw, E> {
                Ok(Raw::Other("null"))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Raw, A::Error> {
                while a.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Raw::Other("an array"))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Raw, A::Error> {
                while a.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
                Ok(Raw::Other("a table"))
            }
        }
        d.deserialize_any(V)
    }
}

/// How a config's durations read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// A config file or an environment variable: the attribute's dialect, longer than zero and
    /// at most `u64::MAX` nanoseconds, with the attribute's messages.
    Text,
    /// A serialized [`Config`]: any `Duration` that serialization writes reads back exactly.
    Serde,
}

impl Dialect {
    fn duration(self, s: &str) -> Result<Duration, DurationError> {
        match self {
            Dialect::Text => text::parse(s).map(Duration::from_nanos),
            Dialect::Serde => text::parse_duration(s),
        }
    }
}

/// Whether `s` is a whole number in decimal: digits, after a sign.
fn is_whole(s: &str) -> bool {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// After "unknown key": "; did you mean `failures`? valid keys: …" for a key close to a valid
/// one, else "; valid keys: …".
pub(crate) fn did_you_mean(key: &str) -> String {
    let keys = KEYS.join(", ");
    // Keys are lowercase: `FAILURES` is `failures`, however far apart the letters' codes.
    let cased = KEYS.iter().copied().find(|k| k.eq_ignore_ascii_case(key));
    match cased.or_else(|| closest(key, KEYS.iter().copied())) {
        Some(k) => format!("; did you mean `{k}`? valid keys: {keys}"),
        None => format!("; valid keys: {keys}"),
    }
}

/// Sets `key` to `value` on `b`, or says what is wrong with the value (or the key), in words
/// that follow the key (the caller writes the key first). Ranges and combinations are left to
/// [`ConfigBuilder::build`], which names the key too.
pub(crate) fn apply(
    b: ConfigBuilder,
    key: &str,
    value: &Raw,
    dialect: Dialect,
) -> Result<ConfigBuilder, String> {
    let count = || match value {
        Raw::Int(n) => u32::try_from(*n)
            .map_err(|_| format!("must be a whole number from 1 to {}, got {n}", u32::MAX)),
        Raw::Big(_) => Err(format!(
            "must be a whole number from 1 to {}, got {}",
            u32::MAX,
            value.whole().unwrap_or_default()
        )),
        other => Err(format!("must be a whole number, got {}", other.kind())),
    };
    let percent = || match value {
        Raw::Int(n) => {
            u8::try_from(*n).map_err(|_| format!("must be a percentage from 1 to 100, got {n}"))
        }
        Raw::Big(_) => Err(format!(
            "must be a percentage from 1 to 100, got {}",
            value.whole().unwrap_or_default()
        )),
        other => Err(format!(
            "must be a percentage from 1 to 100, got {}",
            other.kind()
        )),
    };
    let duration = || match value {
        Raw::Str(s) => dialect.duration(s).map_err(|e| e.to_string()),
        Raw::Int(n) if dialect.duration(&format!("{n}ms")).is_ok() => Err(format!(
            "must be a duration with a unit, like \"{n}s\" or \"{n}ms\", got the bare number {n}"
        )),
        Raw::Int(_) | Raw::Big(_) => Err(format!(
            "must be a duration with a unit, like \"250ms\" or \"2s\", got the bare number {}",
            value.whole().unwrap_or_default()
        )),
        other => Err(format!(
            "must be a duration like \"250ms\" or \"2s\", got {}",
            other.kind()
        )),
    };
    let float = || match value {
        Raw::Float(f) => Ok(*f),
        Raw::Int(n) => Ok(*n as f64),
        Raw::Big(s) => Ok(s.replace('_', "").parse().unwrap_or(f64::INFINITY)),
        other => Err(format!("must be a number, got {}", other.kind())),
    };
    let boolean = || match value {
        Raw::Bool(v) => Ok(*v),
        other => Err(format!("must be true or false, got {}", other.kind())),
    };
    Ok(match key {
        "failures" => b.failures(count()?),
        "failures_within" => b.failures_within(duration()?),
        "failure_rate" => b.failure_rate(percent()?),
        "window" => b.window(match value {
            Raw::Int(n) => Window::Calls(
                u32::try_from(*n)
                    .map_err(|_| format!("must be from 1 to 10000 calls, got {n}"))?,
            ),
            Raw::Big(_) => {
                return Err(format!(
                    "must be from 1 to 10000 calls, got {}",
                    value.whole().unwrap_or_default()
                ));
            }
            Raw::Str(_) => Window::Time(duration()?),
            other => {
                return Err(format!(
                    "must be a number of calls (`window = 100`) or a duration (`window = \"10s\"`), got {}",
                    other.kind()
                ));
            }
        }),
        "min_calls" => b.min_calls(count()?),
        "slow" => b.slow(duration()?),
        "slow_rate" => b.slow_rate(percent()?),
        "open_for" => b.open_for(duration()?),
        "max_open_for" => b.max_open_for(duration()?),
        "backoff" => b.backoff(float()?),
        "jitter" => b.jitter(float()?),
        "half_open_calls" => b.half_open_calls(count()?),
        "successes" => b.successes(count()?),
        "probe_timeout" => b.probe_timeout(duration()?),
        "max_concurrent" => b.max_concurrent(count()?),
        "probe_every" => b.probe_every(duration()?),
        "max_keys" => b.max_keys(count()?),
        "idle_for" => b.idle_for(duration()?),
        "latency" => b.latency(boolean()?),
        "health" => b.health(boolean()?),
        "critical" => b.critical(boolean()?),
        "timeout" => b.timeout(duration()?),
        "config" => {
            return Err(
                "is the attribute's way to take a `[configs.<name>]` table; a table takes one \
                 with `base = \"<name>\"`"
                    .to_owned(),
            );
        }
        _ if ATTRIBUTE_ONLY.contains(&key) => {
            return Err(format!(
                "belongs to the function's `#[circuit_breaker(...)]` attribute, not to the breaker's config; valid keys here: {}",
                KEYS.join(", ")
            ));
        }
        _ => {
            return Err(format!("unknown key{}", did_you_mean(key)));
        }
    })
}

/// The config as the attribute's keys; keys that the config does not use are left out, so that
/// the output deserializes to the same config. The clock is not serialized.
impl Serialize for Config {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        let d = text::display_duration;
        if let Some(n) = self.failures() {
            m.serialize_entry("failures", &n)?;
        }
        if let Some(w) = self.failures_within {
            m.serialize_entry("failures_within", &d(w))?;
        }
        if let Some(r) = self.failure_rate {
            m.serialize_entry("failure_rate", &r)?;
        }
        if self.uses_window() {
            m.serialize_entry("window", &self.window)?;
            m.serialize_entry("min_calls", &self.min_calls)?;
        }
        if let Some(slow) = self.slow {
            m.serialize_entry("slow", &d(slow))?;
        }
        if let Some(r) = self.slow_rate {
            m.serialize_entry("slow_rate", &r)?;
        }
        m.serialize_entry("open_for", &d(self.open_for))?;
        m.serialize_entry("max_open_for", &d(self.max_open_for))?;
        m.serialize_entry("backoff", &self.backoff)?;
        m.serialize_entry("jitter", &self.jitter)?;
        m.serialize_entry("half_open_calls", &self.half_open_calls)?;
        m.serialize_entry("successes", &self.successes)?;
        m.serialize_entry("probe_timeout", &d(self.probe_timeout))?;
        if let Some(n) = self.max_concurrent {
            m.serialize_entry("max_concurrent", &n)?;
        }
        m.serialize_entry("probe_every", &d(self.probe_every))?;
        m.serialize_entry("max_keys", &self.max_keys)?;
        m.serialize_entry("idle_for", &d(self.idle_for))?;
        m.serialize_entry("latency", &self.latency)?;
        m.serialize_entry("health", &self.health)?;
        m.serialize_entry("critical", &self.critical)?;
        if let Some(t) = self.timeout {
            m.serialize_entry("timeout", &d(t))?;
        }
        m.end()
    }
}

/// A map of the attribute's keys (any subset; the others keep their defaults), validated by
/// [`ConfigBuilder::build`]: an unknown key, a value of the wrong kind, or an invalid
/// combination is an error naming the key.
impl<'de> Deserialize<'de> for Config {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Config, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Config;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a circuit breaker config (a map of keys such as `failures`)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Config, A::Error> {
                let mut b = Config::builder();
                while let Some(key) = a.next_key::<std::borrow::Cow<'de, str>>()? {
                    let value: Raw = a.next_value()?;
                    b = apply(b, &key, &value, Dialect::Serde).map_err(|e| {
                        de::Error::custom(format_args!("`{}` {e}", text::excerpt(&key)))
                    })?;
                }
                b.build().map_err(de::Error::custom)
            }
        }
        d.deserialize_map(V)
    }
}

/// `Calls(n)` as the number `n`, `Time(d)` as a duration string, as in the attribute.
impl Serialize for Window {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Window::Calls(n) => s.serialize_u32(*n),
            Window::Time(d) => s.serialize_str(&text::display_duration(*d)),
        }
    }
}

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Window, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Int(n) => u32::try_from(n)
                .map(Window::Calls)
                .map_err(|_| de::Error::custom(format_args!("a window of {n} calls"))),
            Raw::Str(s) => text::parse_duration(&s)
                .map(Window::Time)
                .map_err(de::Error::custom),
            other => Err(de::Error::custom(format_args!(
                "a window is a number of calls or a duration, got {}",
                other.kind()
            ))),
        }
    }
}

/// As its name: `"closed"`, `"open"`, `"half-open"`, `"forced-open"`, `"disabled"`.
impl Serialize for State {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for State {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<State, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        [
            State::Closed,
            State::Open,
            State::HalfOpen,
            State::ForcedOpen,
            State::Disabled,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
        .ok_or_else(|| {
            de::Error::custom(format_args!(
                "unknown state \"{name}\": expected closed, open, half-open, forced-open or disabled"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_values_read_as_numbers_when_they_are() {
        assert_eq!(Raw::from_env("5"), Raw::Int(5));
        assert_eq!(Raw::from_env(" 1.5 "), Raw::Float(1.5));
        assert_eq!(Raw::from_env("10s"), Raw::Str("10s".into()));
    }
}
