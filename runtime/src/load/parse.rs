//! The TOML text into breaker tables, read once, with each key's line.

use std::collections::BTreeMap;
use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::load_error::{Cut, LoadError, Name};
use super::table::{BASE, CONFIGS, DEFAULTS, DYNAMIC, KEYS_TABLE, Origin, Table};
use crate::serde_impls::Raw;

#[cfg(test)]
thread_local! {
    /// Bytes of the text that the loader itself read, to show that it reads each once.
    pub(super) static SCANNED: core::cell::Cell<usize> = const { core::cell::Cell::new(0) };
}

fn scanned(bytes: usize) {
    #[cfg(test)]
    SCANNED.with(|s| s.set(s.get() + bytes));
    let _ = bytes;
}

/// Where each line of a text starts, found in one pass; the line of an offset is then a binary
/// search, so numbering every key of a file costs `O(keys × log lines)`.
pub(super) struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        scanned(text.len());
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Lines { text, starts }
    }

    /// The line (from 1) of byte `offset`, any offset.
    fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset)
    }

    /// The line and column (from 1, in characters) of byte `offset`; an offset past the end
    /// or inside a character counts as the character's start.
    pub(super) fn position(&self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line(offset);
        let start = self.starts[line - 1];
        scanned(offset - start);
        (line, self.text[start..offset].chars().count() + 1)
    }
}

/// The breaker config of a TOML text: the `[defaults]` table, the named bases
/// (`[configs.<name>]`) and the breakers' tables, each key with its line.
#[derive(Default)]
pub(super) struct Parsed {
    /// `[defaults]`: keys for every breaker the file reaches.
    pub(super) defaults: Option<Table>,
    /// `[configs.<name>]`: keys a breaker's table takes with `base = "<name>"`.
    pub(super) configs: BTreeMap<String, Table>,
    /// `[breakers.<name>]`.
    pub(super) breakers: BTreeMap<String, Table>,
}

impl Table {
    fn new(line: usize, capacity: usize) -> Table {
        Table {
            line,
            dynamic: false,
            base: None,
            keys: Vec::with_capacity(capacity),
            per_key: Vec::new(),
        }
    }
}

pub(super) fn parse(path: &Path, text: &str) -> Result<Parsed, LoadError> {
    let lines = Lines::new(text);
    let syntax = |offset: usize, message: String| {
        let (line, column) = lines.position(offset);
        LoadError::Syntax {
            path: path.to_owned(),
            line,
            column,
            message,
        }
    };
    let doc = DeTable::parse(text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        let message = e.message().trim_end();
        let named = e
            .span()
            .and_then(|s| text.get(s))
            .filter(|_| message == "duplicate key");
        let message = match named {
            Some(key) => format!(
                "duplicate key `{}`: a key or a table may appear once in its table; keep one of \
                 the two",
                Cut(key)
            ),
            None => message.to_owned(),
        };
        syntax(offset, message)
    })?;
    let doc = doc.get_ref();
    let mut parsed = Parsed::default();
    if let Some((key, defaults)) = doc.get_key_value(DEFAULTS) {
        let DeValue::Table(entries) = defaults.get_ref() else {
            return Err(syntax(
                key.span().start,
                "`defaults` must be a table of keys for every breaker, like `[defaults]` followed by `open_for = \"30s\"`".to_owned(),
            ));
        };
        let mut table = Table::new(lines.line(key.span().start), entries.len());
        plain_keys(&lines, entries, &mut table);
        parsed.defaults = Some(table);
    }
    if let Some((key, configs)) = doc.get_key_value(CONFIGS) {
        let shape = |at: usize| {
            syntax(
                at,
                "`configs` must be a table of named configs, like `[configs.fast]` followed by `open_for = \"5s\"`, which a breaker's table takes with `base = \"fast\"`".to_owned(),
            )
        };
        let DeValue::Table(configs) = configs.get_ref() else {
            return Err(shape(key.span().start));
        };
        for (name, entries) in configs.iter() {
            let DeValue::Table(entries) = entries.get_ref() else {
                return Err(shape(name.span().start));
            };
            let mut table = Table::new(lines.line(name.span().start), entries.len());
            plain_keys(&lines, entries, &mut table);
            parsed.configs.insert(name.get_ref().to_string(), table);
        }
    }
    // Other top-level tables are the application's, but one spelt one edit away from
    // `breakers` (`[breaker.users]`, `[Breakers.users]`, `[braekers.users]`) is a typo that
    // would configure nothing. (Two edits away are real names: `[brokers]`.)
    if let Some((key, _)) = doc.iter().find(|(key, value)| {
        let key = key.get_ref();
        key != "breakers"
            && matches!(value.get_ref(), DeValue::Table(_))
            && key.len() < 16
            && crate::suggest::edit_distance(&key.to_ascii_lowercase(), "breakers") <= 1
    }) {
        return Err(syntax(
            key.span().start,
            format!(
                "`{}` is not a table breakerbox reads; did you mean `breakers`, as in `[breakers.users]`?",
                Cut(key.get_ref())
            ),
        ));
    }
    let Some((key, breakers)) = doc.get_key_value("breakers") else {
        return Ok(parsed);
    };
    let DeValue::Table(breakers) = breakers.get_ref() else {
        return Err(syntax(
            key.span().start,
            "`breakers` must be a table of breaker tables, like `[breakers.users]`".to_owned(),
        ));
    };
    let tables = &mut parsed.breakers;
    for (name, table) in breakers.iter() {
        let line = lines.line(name.span().start);
        let DeValue::Table(entries) = table.get_ref() else {
            return Err(syntax(
                name.span().start,
                format!(
                    "`breakers.{}` must be a table of keys, like `[breakers.{0}]` followed by `failures = 5`",
                    Name(name.get_ref())
                ),
            ));
        };
        let mut table = Table::new(line, entries.len());
        for (k, v) in entries.iter() {
            let line = lines.line(k.span().start);
            if k.get_ref() == KEYS_TABLE {
                fn tables_of<'b, 'a>(v: &'b Spanned<DeValue<'a>>) -> Option<&'b DeTable<'a>> {
                    match v.get_ref() {
                        DeValue::Table(t) => Some(t),
                        _ => None,
                    }
                }
                let shape = || {
                    syntax(
                        k.span().start,
                        format!(
                            "`breakers.{}.keys` must be a table of single keys' tables, like `[breakers.{0}.keys.\"slow-host.example\"]` followed by `open_for = \"5m\"`",
                            Name(name.get_ref())
                        ),
                    )
                };
                let keys = tables_of(v).ok_or_else(shape)?;
                for (key, entries) in keys.iter() {
                    let entries = tables_of(entries).ok_or_else(shape)?;
                    let mut own = Table::new(lines.line(key.span().start), entries.len());
                    plain_keys(&lines, entries, &mut own);
                    table.per_key.push((key.get_ref().to_string(), own));
                }
                continue;
            }
            if k.get_ref() == DYNAMIC {
                let DeValue::Boolean(dynamic) = v.get_ref() else {
                    return Err(LoadError::Invalid {
                        path: path.to_owned(),
                        line,
                        breaker: name.get_ref().to_string(),
                        key: DYNAMIC.to_owned(),
                        message: "must be `true` (the breaker is created at run time) or `false`"
                            .to_owned(),
                    });
                };
                table.dynamic = *dynamic;
                continue;
            }
            if k.get_ref() == BASE {
                let DeValue::String(base) = v.get_ref() else {
                    return Err(LoadError::Invalid {
                        path: path.to_owned(),
                        line,
                        breaker: name.get_ref().to_string(),
                        key: BASE.to_owned(),
                        message:
                            "must be the name of a `[configs.<name>]` table, like `base = \"fast\"`"
                                .to_owned(),
                    });
                };
                table.base = Some((base.to_string(), line));
                continue;
            }
            table
                .keys
                .push((k.get_ref().to_string(), raw(v), Origin::File { line }));
        }
        tables.insert(name.get_ref().to_string(), table);
    }
    Ok(parsed)
}

/// The keys of a table that holds config keys only, each with its line.
fn plain_keys(lines: &Lines<'_>, entries: &DeTable<'_>, table: &mut Table) {
    for (k, v) in entries.iter() {
        let line = lines.line(k.span().start);
        table
            .keys
            .push((k.get_ref().to_string(), raw(v), Origin::File { line }));
    }
}

fn raw(value: &Spanned<DeValue<'_>>) -> Raw {
    match value.get_ref() {
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix()).map_or_else(
            |_| match i.radix() {
                10 => Raw::Big(i.as_str().to_owned()),
                _ => Raw::Other("an integer"),
            },
            Raw::Int,
        ),
        DeValue::Float(f) => f.as_str().parse().map_or(Raw::Other("a float"), Raw::Float),
        DeValue::String(s) => Raw::Str(s.to_string()),
        DeValue::Boolean(b) => Raw::Bool(*b),
        DeValue::Datetime(_) => Raw::Other("a date"),
        DeValue::Array(_) => Raw::Other("an array"),
        DeValue::Table(_) => Raw::Other("a table"),
    }
}
