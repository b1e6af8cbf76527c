//! [`Site`]: where a name was given a config, as conflicts report it.

use core::fmt;

/// Where a breaker's config was given: a `#[circuit_breaker]` attribute, or a call to
/// [`Registry::get_or_create`](crate::Registry::get_or_create),
/// [`Registry::try_get_or_create`](crate::Registry::try_get_or_create),
/// [`Registry::family`](crate::Registry::family) or
/// [`Registry::configure`](crate::Registry::configure).
///
/// Displays as `#[circuit_breaker] at src/api.rs:12`, `get_or_create at src/main.rs:40`,
/// `Registry::family at src/main.rs:44` or `Registry::configure at src/main.rs:48`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Site {
    /// A `#[circuit_breaker]` attribute: the file and the line of the attribute.
    Attribute {
        /// The file, as the compiler names it (relative to the package's root).
        file: &'static str,
        /// The line, from 1.
        line: u32,
        /// The column, from 1.
        column: u32,
    },
    /// A call to `get_or_create` or `try_get_or_create`: the caller's file and line.
    Call {
        /// The file, as the compiler names it.
        file: &'static str,
        /// The line, from 1.
        line: u32,
        /// The column, from 1.
        column: u32,
    },
    /// A `#[circuit_breaker(key = …)]` attribute: the name is a keyed family's.
    KeyedAttribute {
        /// The file, as the compiler names it (relative to the package's root).
        file: &'static str,
        /// The line, from 1.
        line: u32,
        /// The column, from 1.
        column: u32,
    },
    /// A call to [`Registry::family`](crate::Registry::family): the caller's file and line.
    Family {
        /// The file, as the compiler names it.
        file: &'static str,
        /// The line, from 1.
        line: u32,
        /// The column, from 1.
        column: u32,
    },
    /// A call to [`Registry::configure`](crate::Registry::configure): the caller's file and
    /// line.
    Configure {
        /// The file, as the compiler names it.
        file: &'static str,
        /// The line, from 1.
        line: u32,
        /// The column, from 1.
        column: u32,
    },
}

impl Site {
    pub(crate) fn caller(location: &'static std::panic::Location<'static>) -> Site {
        Site::Call {
            file: location.file(),
            line: location.line(),
            column: location.column(),
        }
    }

    /// The site of a call to [`Registry::configure`](crate::Registry::configure).
    pub(crate) fn configure(location: &'static std::panic::Location<'static>) -> Site {
        Site::Configure {
            file: location.file(),
            line: location.line(),
            column: location.column(),
        }
    }

    /// The file.
    pub fn file(&self) -> &'static str {
        match self {
            Site::Attribute { file, .. }
            | Site::Call { file, .. }
            | Site::KeyedAttribute { file, .. }
            | Site::Family { file, .. }
            | Site::Configure { file, .. } => file,
        }
    }

    /// The line, from 1.
    pub fn line(&self) -> u32 {
        match self {
            Site::Attribute { line, .. }
            | Site::Call { line, .. }
            | Site::KeyedAttribute { line, .. }
            | Site::Family { line, .. }
            | Site::Configure { line, .. } => *line,
        }
    }

    /// Whether the site names a keyed family (`#[circuit_breaker(key = …)]`,
    /// [`Registry::family`](crate::Registry::family)) rather than a single breaker.
    pub fn is_keyed(&self) -> bool {
        matches!(self, Site::KeyedAttribute { .. } | Site::Family { .. })
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            Site::Attribute { .. } => "#[circuit_breaker]",
            Site::Call { .. } => "get_or_create",
            Site::KeyedAttribute { .. } => "#[circuit_breaker(key = …)]",
            Site::Family { .. } => "Registry::family",
            Site::Configure { .. } => "Registry::configure",
        };
        write!(f, "{what} at {}:{}", self.file(), self.line())
    }
}
