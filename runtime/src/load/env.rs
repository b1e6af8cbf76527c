//! `BREAKERBOX__<NAME>__<KEY>` environment variables over the file's tables.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::Path;

use super::load_error::{Cut, LoadError, Name};
use super::table::{Keys, Origin};

use crate::config_keys::KEYS;
use crate::serde_impls::{Raw, did_you_mean};
use crate::suggest::closest;

/// The prefix of environment overrides: `BREAKERBOX__<NAME>__<KEY>=value`.
const ENV_PREFIX: &str = "BREAKERBOX__";

/// A breaker's name as it is written in an environment variable: ASCII letters in capitals,
/// digits as they are, every other character `_` (`my_app::fetch` → `MY_APP__FETCH`).
pub(super) fn env_name(name: &str) -> String {
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

/// One `BREAKERBOX__<NAME>__<KEY>` variable, read and checked on its own.
pub(super) struct EnvVar {
    /// The whole name, for messages.
    pub(super) var: String,
    /// `<NAME>`, in capitals.
    pub(super) name: String,
    /// `<KEY>`, in lower case: one of [`KEYS`].
    pub(super) key: String,
    pub(super) value: Raw,
}

/// Whether `name` starts with `prefix`, in any case.
fn prefixed(name: &[u8], prefix: &str) -> bool {
    name.get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// The variable as it should be written, if `rest` (what follows the prefix) ends in
/// `_<KEY>` after a name: `USERS_OPEN_FOR` → `BREAKERBOX__USERS__OPEN_FOR`. The longest key
/// that ends it is taken: `_MAX_OPEN_FOR` before `_OPEN_FOR`.
fn key_apart(rest: &str) -> Option<String> {
    let upper = rest.to_ascii_uppercase();
    let mut keys: Vec<&str> = KEYS.to_vec();
    keys.sort_by_key(|k| core::cmp::Reverse(k.len()));
    keys.into_iter().find_map(|key| {
        let name = upper.strip_suffix(&key.to_ascii_uppercase())?;
        let name = name.strip_suffix('_')?.trim_end_matches('_');
        (!name.is_empty()).then(|| format!("{ENV_PREFIX}{name}__{}", key.to_ascii_uppercase()))
    })
}

/// Every variable of ours in `env`, in name order (so the same environment always gives the
/// same error), each checked for its form, its key and its value's encoding. The prefix is
/// read in any case (`breakerbox__users__open_for`); one written with single underscores
/// that ends in a key (`BREAKERBOX_USERS_OPEN_FOR`) is an error that shows how to write it.
pub(super) fn read_env(
    env: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<Vec<EnvVar>, LoadError> {
    let mut vars: Vec<(String, OsString)> = Vec::new();
    for (k, v) in env {
        match k.into_string() {
            Ok(k) if prefixed(k.as_bytes(), ENV_PREFIX) => vars.push((k, v)),
            Ok(k) if prefixed(k.as_bytes(), &ENV_PREFIX[..ENV_PREFIX.len() - 1]) => {
                // `BREAKERBOX_USERS_OPEN_FOR` (single underscores, as Spring's relaxed
                // binding writes `SPRING_…`) is meant as an override; `BREAKERBOX_TEST_REDIS_URL`
                // and the like, which end in no key, are not.
                if let Some(fixed) = key_apart(&k[ENV_PREFIX.len() - 1..]) {
                    return Err(LoadError::Env {
                        var: k,
                        message: format!(
                            "a breaker's key is set by `{ENV_PREFIX}<NAME>__<KEY>`, with two \
                             underscores after `BREAKERBOX` and before the key; write `{}`",
                            Name(&fixed)
                        ),
                    });
                }
            }
            Ok(_) => {}
            // Ours by its prefix, but not readable: say so rather than ignore it.
            Err(k) if prefixed(k.as_encoded_bytes(), ENV_PREFIX) => {
                return Err(LoadError::Env {
                    var: k.to_string_lossy().into_owned(),
                    message:
                        "its name is not valid UTF-8; write it `BREAKERBOX__<NAME>__<KEY>` in ASCII"
                            .to_owned(),
                });
            }
            Err(_) => {}
        }
    }
    vars.sort();
    let mut out = Vec::with_capacity(vars.len());
    for (var, value) in vars {
        let err = |message: String| LoadError::Env {
            var: var.clone(),
            message,
        };
        // The key is what follows the last `__`: a name may contain `__` (`a::b` → `A__B`),
        // a key never does.
        let Some((name, key)) = var[ENV_PREFIX.len()..]
            .rsplit_once("__")
            .filter(|(name, key)| !name.is_empty() && !key.is_empty())
        else {
            let rest = &var[ENV_PREFIX.len()..];
            return Err(err(
                match key_apart(rest).filter(|_| !rest.contains("__")) {
                    Some(fixed) => format!(
                        "a breaker's key follows its name after two underscores; write `{}`",
                        Name(&fixed)
                    ),
                    None => format!(
                        "write it `{ENV_PREFIX}<NAME>__<KEY>`, like `{ENV_PREFIX}USERS__OPEN_FOR=30s`"
                    ),
                },
            ));
        };
        let key = key.to_ascii_lowercase();
        if !KEYS.contains(&key.as_str()) {
            return Err(err(format!(
                "unknown key `{}`{}",
                Cut(&key),
                did_you_mean(&key)
            )));
        }
        let name = name.to_ascii_uppercase();
        let value = value.into_string().map_err(|_| {
            err("its value is not valid UTF-8; write it as text, like `30s` or `5`".to_owned())
        })?;
        out.push(EnvVar {
            name,
            key,
            value: Raw::from_env(&value),
            var,
        });
    }
    Ok(out)
}

/// Each variable matched to the breaker it names among `known`, as that breaker's keys (in
/// variable order). A variable that names none of them, or more than one, is an error.
pub(super) fn match_env<'a>(
    path: &Path,
    vars: Vec<EnvVar>,
    known: impl IntoIterator<Item = &'a str>,
) -> Result<HashMap<String, Keys>, LoadError> {
    let mut out: HashMap<String, Keys> = HashMap::new();
    if vars.is_empty() {
        return Ok(out);
    }
    let mut by_env: HashMap<String, Vec<&'a str>> = HashMap::new();
    // A name may come twice (the registry's and the file's): each is listed once.
    let mut seen: HashSet<&'a str> = HashSet::new();
    for name in known {
        if seen.insert(name) {
            by_env.entry(env_name(name)).or_default().push(name);
        }
    }
    for EnvVar {
        var,
        name,
        key,
        value,
    } in vars
    {
        let err = |message: String| LoadError::Env {
            var: var.clone(),
            message,
        };
        let Some(matching) = by_env.get(&name) else {
            let suggestion = closest(&name, by_env.keys().map(String::as_str)).map(|near| {
                let names: Vec<_> = by_env[near]
                    .iter()
                    .map(|n| format!("'{}'", Name(n)))
                    .collect();
                format!(
                    "; did you mean `{ENV_PREFIX}{}__{}` (breaker {})?",
                    Name(near),
                    key.to_ascii_uppercase(),
                    names.join(" or ")
                )
            });
            return Err(err(format!(
                "names no known breaker or keyed family (`{}`){} A breaker made at run time needs a `[breakers.<name>]` table with `dynamic = true` in {} for a variable to reach it.",
                Name(&name),
                suggestion.unwrap_or_else(|| ".".to_owned()),
                path.display()
            )));
        };
        if matching.len() > 1 {
            let names: Vec<_> = matching.iter().map(|n| format!("'{}'", Name(n))).collect();
            return Err(err(format!(
                "{} could be any of the breakers {}; rename one of them",
                Name(&name),
                names.join(" and "),
            )));
        }
        let keys = out.entry(matching[0].to_owned()).or_default();
        // Two variables for one key (`…__OPEN_FOR` and `…__open_for`): which one wins would
        // depend on their order, so neither does.
        if let Some((_, _, Origin::Env { var: first })) = keys.iter().find(|(k, _, _)| *k == key) {
            return Err(err(format!(
                "sets `{key}` of '{}', and so does {}; keep one of them",
                Name(matching[0]),
                Name(first)
            )));
        }
        keys.push((key, value, Origin::Env { var }));
    }
    Ok(out)
}
