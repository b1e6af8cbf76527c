//! What the config tests share: a second, the attribute's error type, and
//! the lock and guard for environment variables (process-wide: every test that sets one or
//! loads holds the lock).

use std::ffi::OsString;
use std::fmt;
use std::sync::{Mutex, MutexGuard};
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

pub static ENV: Mutex<()> = Mutex::new(());

pub fn env_lock() -> MutexGuard<'static, ()> {
    ENV.lock().unwrap_or_else(|e| e.into_inner())
}

pub struct Var(pub &'static str);
impl Var {
    pub fn set(name: &'static str, value: impl Into<OsString>) -> Var {
        // SAFETY: every test of this binary that reads or writes the environment holds `ENV`.
        unsafe { std::env::set_var(name, value.into()) };
        Var(name)
    }
}
impl Drop for Var {
    fn drop(&mut self) {
        // SAFETY: as in `set`.
        unsafe { std::env::remove_var(self.0) };
    }
}
