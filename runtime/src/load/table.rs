//! A TOML file's tables as read: their names, their keys in order, and where each value came
//! from.

use crate::serde_impls::Raw;

/// The key of a `[breakers.<name>]` table that says the breaker is created at run time, so the
/// loader does not look for it among the known breakers.
pub(super) const DYNAMIC: &str = "dynamic";

/// The top-level table whose keys apply to every breaker the file reaches.
pub(super) const DEFAULTS: &str = "defaults";

/// The top-level table of named configs, `[configs.<name>]`.
pub(super) const CONFIGS: &str = "configs";

/// The key of a `[breakers.<name>]` table that names its base, a `[configs.<name>]` table.
pub(super) const BASE: &str = "base";

/// Where a key's value came from, for the error.
#[derive(Clone)]
pub(super) enum Origin {
    File { line: usize },
    Env { var: String },
}

/// Config keys in order, each with its value as written and where it was written.
pub(super) type Keys = Vec<(String, Raw, Origin)>;

/// One table of config keys (`[breakers.<name>]`, `[defaults]`, `[configs.<name>]`), with its
/// keys in order.
pub(super) struct Table {
    pub(super) line: usize,
    pub(super) dynamic: bool,
    /// `base = "<name>"`, with its line.
    pub(super) base: Option<(String, usize)>,
    pub(super) keys: Keys,
    /// `[breakers.<name>.keys."<key>"]`: single keys of a keyed family, each a table whose
    /// keys apply over this one's.
    pub(super) per_key: Vec<(String, Table)>,
}

/// The key of a `[breakers.<name>]` table that holds the tables of single keys of a family.
pub(super) const KEYS_TABLE: &str = "keys";

/// How a single key's table is named in messages: `api.keys."slow-host.example"`.
pub(super) fn key_table_name(name: &str, key: &str) -> String {
    format!("{name}.{KEYS_TABLE}.{key:?}")
}
