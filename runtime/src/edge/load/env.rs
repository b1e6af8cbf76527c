//! `BREAKERBOX__<NAME>__<KEY>` environment variables over the file's tables.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::Path;

use super::{Cut, ENV_PREFIX, LoadError, Origin, Table};
use crate::edge::serde_impl::{Raw, did_you_mean};
use crate::keys::KEYS;

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

pub(super) fn overlay_env(
    path: &Path,
    tables: &mut BTreeMap<String, Table>,
    env: impl IntoIterator<Item = (OsString, OsString)>,
) -> Result<(), LoadError> {
    // A name that is not Unicode cannot start with our prefix as a `str`, nor be one of ours.
    let mut vars: Vec<(String, OsString)> = env
        .into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
        .filter(|(k, _)| k.starts_with(ENV_PREFIX))
        .collect();
    if vars.is_empty() {
        return Ok(());
    }
    // Deterministic order, so the same environment always gives the same error.
    vars.sort();
    let mut by_env: HashMap<String, Vec<String>> = HashMap::new();
    for name in tables.keys() {
        by_env.entry(env_name(name)).or_default().push(name.clone());
    }
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
            return Err(err(format!(
                "write it `{ENV_PREFIX}<NAME>__<KEY>`, like `{ENV_PREFIX}USERS__OPEN_FOR=30s`"
            )));
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
        let Some(matching) = by_env.get(&name) else {
            // Another file's breaker: not this load's business.
            continue;
        };
        if matching.len() > 1 {
            let names: Vec<_> = matching.iter().map(|n| format!("'{}'", Cut(n))).collect();
            return Err(err(format!(
                "{} could be any of the breakers {}; rename one of them in {}",
                Cut(&name),
                names.join(" and "),
                path.display()
            )));
        }
        let value = value.into_string().map_err(|_| {
            err("its value is not valid UTF-8; write it as text, like `30s` or `5`".to_owned())
        })?;
        let table = tables.get_mut(&matching[0]).expect("indexed above");
        table
            .keys
            .push((key, Raw::from_env(&value), Origin::Env { var: var.clone() }));
    }
    Ok(())
}
