//! Reading a config file, and the checks of its tables' keys and bases.

use std::collections::BTreeMap;
use std::path::Path;

use super::load_error::{LoadError, Name};
use super::table::{BASE, DYNAMIC, KEYS_TABLE, Origin, Table, key_table_name};
use crate::config::{Config, ConfigBuilder};
use crate::serde_impls::{Dialect, apply};
use crate::suggest::closest;

/// The largest config file read: far above any real config (a 16 MB file loads in seconds),
/// low enough that a wrong path cannot fill memory.
pub(super) const MAX_FILE: u64 = 256 << 20;

/// The text of the file at `path`, for `load_toml`, `reload_toml` and the watcher. Only a
/// regular file (after symlinks) of at most 256 MiB is read: a FIFO would block the reader
/// for ever, and `/dev/zero` would never end.
pub(super) fn read(path: &Path) -> Result<String, LoadError> {
    let refuse = |why: String| LoadError::Read {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
    };
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(refuse("not a regular file".to_owned()));
    }
    if meta.len() > MAX_FILE {
        return Err(refuse(format!(
            "{} bytes, more than the 256 MiB a config file may have",
            meta.len()
        )));
    }
    let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        // Where the text stops being UTF-8: the line and column of its first bad byte.
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let good = std::str::from_utf8(good).unwrap_or_default();
        let line_start = good.rfind('\n').map_or(0, |i| i + 1);
        LoadError::Syntax {
            path: path.to_owned(),
            line: good.matches('\n').count() + 1,
            column: good[line_start..].chars().count() + 1,
            message: "not UTF-8 text (a TOML file must be): save the file as UTF-8".to_owned(),
        }
    })
}

/// Each key and value of a breaker's table on its own: the file's mistakes come before any of
/// the environment's, and before the combinations of layers.
pub(super) fn check_file_keys(path: &Path, name: &str, table: &Table) -> Result<(), LoadError> {
    let mut b: ConfigBuilder = Config::builder();
    for (key, value, origin) in &table.keys {
        let line = match origin {
            Origin::File { line } => *line,
            Origin::Env { .. } => table.line,
        };
        b = apply(b, key, value, Dialect::Text).map_err(|message| LoadError::Invalid {
            path: path.to_owned(),
            line,
            breaker: name.to_owned(),
            key: key.clone(),
            message,
        })?;
    }
    for (key, own) in &table.per_key {
        let table_name = key_table_name(name, key);
        // The family's bounds are its own: one key's table cannot set them.
        if let Some((bound, _, origin)) = own
            .keys
            .iter()
            .find(|(k, _, _)| k == "max_keys" || k == "idle_for")
        {
            return Err(LoadError::Invalid {
                path: path.to_owned(),
                line: match origin {
                    Origin::File { line } => *line,
                    Origin::Env { .. } => own.line,
                },
                breaker: table_name,
                key: bound.clone(),
                message: format!(
                    "bounds the whole family: set it in [breakers.{}], not in one key's table",
                    Name(name)
                ),
            });
        }
        check_file_keys(path, &table_name, own)?;
    }
    Ok(())
}

/// Each key and value of `[defaults]` or a `[configs.<name>]` table on its own.
pub(super) fn check_shared_keys(path: &Path, name: &str, table: &Table) -> Result<(), LoadError> {
    let mut b: ConfigBuilder = Config::builder();
    for (key, value, origin) in &table.keys {
        let line = match origin {
            Origin::File { line } => *line,
            Origin::Env { .. } => table.line,
        };
        let wrong = |message: String| LoadError::InvalidShared {
            path: path.to_owned(),
            line,
            table: name.to_owned(),
            key: key.clone(),
            message,
        };
        if [DYNAMIC, BASE, KEYS_TABLE].contains(&key.as_str()) {
            return Err(wrong(format!(
                "belongs in a `[breakers.<name>]` table; [{}] holds config keys only",
                Name(name)
            )));
        }
        b = apply(b, key, value, Dialect::Text).map_err(wrong)?;
    }
    Ok(())
}

/// A table's `base` names a `[configs.<name>]` table of the file.
pub(super) fn check_base(
    path: &Path,
    name: &str,
    table: &Table,
    configs: &BTreeMap<String, Table>,
) -> Result<(), LoadError> {
    let Some((base, line)) = &table.base else {
        return Ok(());
    };
    if configs.contains_key(base) {
        return Ok(());
    }
    Err(LoadError::Invalid {
        path: path.to_owned(),
        line: *line,
        breaker: name.to_owned(),
        key: BASE.to_owned(),
        message: format!(
            "`{}` names no `[configs.<name>]` table{}",
            Name(base),
            base_hint(base, configs)
        ),
    })
}

/// After "names no `[configs.<name>]` table": "; did you mean `fast`?", or the file's bases,
/// or how to write one.
pub(super) fn base_hint(base: &str, configs: &BTreeMap<String, Table>) -> String {
    match closest(base, configs.keys().map(String::as_str)) {
        Some(near) => format!("; did you mean `{}`?", Name(near)),
        None if configs.is_empty() => {
            "; the file has none: add one, like `[configs.fast]` followed by `open_for = \"5s\"`"
                .to_owned()
        }
        None => format!(
            "; the file's are {}",
            configs
                .keys()
                .take(10)
                .map(|n| format!("`{}`", Name(n)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
