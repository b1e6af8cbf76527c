//! [`LoadError`]: why a load configured nothing, and how its messages show names and values.

use std::fmt;
use std::path::PathBuf;

use crate::duration::excerpt;
use crate::registration::Site;

/// A key or value in a message, cut short if it is long.
pub(super) struct Cut<'a>(pub(super) &'a str);

impl fmt::Display for Cut<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&excerpt(self.0))
    }
}

/// The longest name (of a breaker or a variable) a message shows whole: far above any real
/// name, so that the user can always tell which one is meant.
pub(super) const NAME_BYTES: usize = 256;

/// A breaker's or a variable's name in a message: whole up to [`NAME_BYTES`] bytes, else its
/// first 256 bytes (to a character's end), `…` and its length.
pub(super) struct Name<'a>(pub(super) &'a str);

impl fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s.len() <= NAME_BYTES {
            return f.write_str(s);
        }
        let mut end = NAME_BYTES;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        write!(f, "{}… ({} bytes)", &s[..end], s.len())
    }
}

/// Why [`Registry::load_toml`] configured nothing. The message names the file, the line and the
/// key (or the environment variable), and says what is wrong. The names of breakers, tables,
/// bases and variables our messages quote are shown whole up to 256 bytes, the keys and values
/// cut to their first 32 characters (each with `…` and its length when cut); the fields keep
/// them whole. A TOML syntax error's message is the parser's.
///
/// [`Registry::load_toml`]: crate::Registry::load_toml
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
    #[error("{}:{line}: [breakers.{}] `{}` {message}", path.display(), Name(breaker), Cut(key))]
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
    /// A key of the `[defaults]` table or of a `[configs.<name>]` table is unknown, or its
    /// value is wrong.
    #[error("{}:{line}: [{}] `{}` {message}", path.display(), Name(table), Cut(key))]
    InvalidShared {
        /// The file.
        path: PathBuf,
        /// The line of the key, from 1.
        line: usize,
        /// The table: `defaults` or `configs.<name>`.
        table: String,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A `[breakers.<name>]` table names no breaker the registry knows, and does not say
    /// `dynamic = true`.
    #[error(
        "{}:{line}: no breaker named `{}`{} No `#[circuit_breaker]` function, keyed family or breaker has that name; if the program makes it at run time (with `registry().get_or_create`, `registry().family` or `Breaker::new`), say `dynamic = true` in its table.",
        path.display(),
        Name(breaker),
        suggestion.as_deref().map_or_else(|| ".".to_owned(), |s| format!("; did you mean `{}`?", Name(s)))
    )]
    UnknownBreaker {
        /// The file.
        path: PathBuf,
        /// The line of its table, from 1.
        line: usize,
        /// The name in the file.
        breaker: String,
        /// The known breaker it most likely means, if one is close.
        suggestion: Option<String>,
    },
    /// A `#[circuit_breaker(config = "<name>")]` attribute names a base the file does not
    /// have: every load must define the `[configs.<name>]` tables the attributes take.
    #[error(
        "{}: no [configs.{}] table for breaker `{}`, whose {site} takes `config = \"{}\"`{hint}",
        path.display(), Name(config), Name(breaker), Name(config)
    )]
    UnknownConfig {
        /// The file.
        path: PathBuf,
        /// The breaker's (or keyed family's) name.
        breaker: String,
        /// The base the attribute names.
        config: String,
        /// The attribute (boxed: it is larger than the other errors).
        site: Box<Site>,
        /// "; did you mean `fast`?", or the file's bases, or how to write one.
        hint: String,
    },
    /// `Registry::watch_toml` (feature `watch`) cannot watch the file (it names no file or a
    /// directory, its directory cannot be watched, or the thread cannot start), or the watch
    /// reported an error.
    #[error("cannot watch circuit breaker config {}: {source}", path.display())]
    Watch {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An environment override is malformed or its value is wrong.
    #[error("environment variable {}: {message}", Name(var))]
    Env {
        /// The variable's name.
        var: String,
        /// What is wrong.
        message: String,
    },
    /// [`Registry::reload_toml`]: a breaker in the file exists and cannot take the change live
    /// (see [`ReconfigureError`](crate::ReconfigureError)); or a keyed family that exists cannot (its bounds, or a
    /// change a key's breaker cannot take: `breaker` is then `<family>.keys."<key>"`); or a
    /// `keys` table names a single breaker's keys.
    ///
    /// [`Registry::reload_toml`]: crate::Registry::reload_toml
    #[error("{}:{line}: [breakers.{}] {message}", path.display(), Name(breaker))]
    NotReloadable {
        /// The file.
        path: PathBuf,
        /// The line of its table, from 1.
        line: usize,
        /// The breaker's name.
        breaker: String,
        /// The key that cannot change, if one.
        key: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A keyed family named in the file was created by another thread while the file was
    /// applied, so its single keys' tables could not be given to it. (A breaker or family
    /// that exists when the load starts takes the file live.)
    #[error(
        "{}:{line}: keyed family '{}' was created while the file was applied, so its single keys' tables did not reach it; load the file again", path.display(), Name(breaker)
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
            | LoadError::InvalidShared { line, .. }
            | LoadError::UnknownBreaker { line, .. }
            | LoadError::AlreadyCreated { line, .. }
            | LoadError::NotReloadable { line, .. } => Some(*line),
            LoadError::Read { .. }
            | LoadError::Env { .. }
            | LoadError::Watch { .. }
            | LoadError::UnknownConfig { .. } => None,
        }
    }

    /// The config key the error is about, if one.
    pub fn key(&self) -> Option<&str> {
        match self {
            LoadError::Invalid { key, .. } | LoadError::InvalidShared { key, .. } => Some(key),
            LoadError::NotReloadable { key, .. } => key.as_deref(),
            LoadError::UnknownConfig { .. } => Some("config"),
            _ => None,
        }
    }
}
