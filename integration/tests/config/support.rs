//! What the config tests share: a second, the attribute's error type, and a test run alone in
//! a process that starts with the environment variables it needs.

use std::fmt;
use std::time::Duration;

use breakerbox::Rejected;

pub const S: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub enum AppError {
    Panicky,
    Rejected(Rejected),
}
impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Panicky => panic!("AppError's Display panics"),
            AppError::Rejected(r) => r.fmt(f),
        }
    }
}
impl From<Rejected> for AppError {
    fn from(r: Rejected) -> Self {
        AppError::Rejected(r)
    }
}

/// A test run alone in a process that starts with the environment variables it needs: the
/// runtime's tests' helper, one file for every package.
#[allow(dead_code)]
#[path = "../../../runtime/tests/common/alone.rs"]
mod alone;
#[allow(unused_imports)]
pub use alone::alone_with_env;
