//! [`ConfigError`]: why a config was refused.

/// Why a [`Config`](crate::Config) was refused. The message names the field and what it accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value outside what the field accepts.
    #[error("`{field}` must be {allowed}, got {got}")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// What it accepts.
        allowed: &'static str,
        /// What it was given.
        got: String,
    },
    /// Two fields that cannot be set together.
    #[error("`{field}` cannot be combined with `{with}`: {hint}")]
    Conflict {
        /// The field.
        field: &'static str,
        /// The field it conflicts with.
        with: &'static str,
        /// How to choose.
        hint: &'static str,
    },
    /// A field that only means something together with another.
    #[error("`{field}` requires {requires}")]
    Requires {
        /// The field.
        field: &'static str,
        /// What it needs.
        requires: &'static str,
    },
}

impl ConfigError {
    /// The field the error is about.
    pub fn field(&self) -> &'static str {
        match self {
            ConfigError::OutOfRange { field, .. }
            | ConfigError::Conflict { field, .. }
            | ConfigError::Requires { field, .. } => field,
        }
    }
}
