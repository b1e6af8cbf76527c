//! A failure's cause: its message, formatted by the user's `Display` with its panic caught, and
//! kept as the last failure that tripped the breaker.

use core::fmt;
use std::sync::Arc;

use super::inner::Inner;

/// What a panicking `Display` leaves in a message.
pub(crate) const DISPLAY_PANICKED: &str = "<Display panicked>";

/// A user's `Display`, whose panic is caught: it ends what was written with
/// [`DISPLAY_PANICKED`] instead of unwinding through the breaker.
pub(super) struct Guarded<'a>(pub(super) &'a dyn fmt::Display);

impl fmt::Display for Guarded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.fmt(f))) {
            Ok(result) => result,
            Err(payload) => {
                // Its `Drop` is user code too, and may panic.
                crate::event::discard(payload);
                f.write_str(DISPLAY_PANICKED)
            }
        }
    }
}

/// A failure's message, formatted by the user's `Display`; [`DISPLAY_PANICKED`] if it panics.
pub(super) fn message(cause: &dyn fmt::Display) -> Arc<str> {
    displayed(cause).into()
}

/// What a user's `Display` (a failure's, a key's) writes; [`DISPLAY_PANICKED`] if it panics.
pub(crate) fn displayed(value: &dyn fmt::Display) -> String {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| value.to_string())) {
        Ok(text) => text,
        Err(payload) => {
            // Dropped panic-safely: a payload whose `Drop` panics would otherwise unwind out
            // of the transition before it is made, and the failure that trips would open nothing.
            crate::event::discard(payload);
            DISPLAY_PANICKED.to_owned()
        }
    }
}

impl Inner {
    /// The message of the failure that last tripped the breaker.
    pub(super) fn last_failure(&self) -> Option<Arc<str>> {
        let cold = self.cold.get()?;
        cold.last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps `failure` as the last one, allocating the cold part only to store one.
    pub(super) fn set_last_failure(&self, failure: Option<Arc<str>>) {
        let cold = match (&failure, self.cold.get()) {
            (None, None) => return,
            (_, Some(cold)) => cold,
            (Some(_), None) => self.cold(),
        };
        *cold.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = failure;
    }

    /// `judge_rates`.
    pub(super) fn failure_behind(&self, expect: Option<u32>) -> Option<Arc<str>> {
        let cold = self.cold.get()?;
        let behind = cold.behind.lock().unwrap_or_else(|e| e.into_inner());
        match (&*behind, expect) {
            (Some((generation, text)), Some(expect)) if *generation == expect => Some(text.clone()),
            _ => None,
        }
    }
}
