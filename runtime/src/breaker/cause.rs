//! Why: a failure's cause (its message, formatted by the user's `Display` with its panic caught,
//! and kept as the last failure that tripped the breaker), and the breaker's explanation of
//! its state ([`Breaker::explain`]).

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use super::Breaker;
use super::inner::Inner;
use crate::explain::{Explanation, Parts};
use crate::state::State;
use crate::sync::Ordering;

/// What a panicking `Display` leaves in a message.
pub(crate) const DISPLAY_PANICKED: &str = "<Display panicked>";

/// A user's `Display`, whose panic is caught: it ends what was written with
/// [`DISPLAY_PANICKED`] instead of unwinding through the breaker.
pub(super) struct CaughtDisplay<'a>(pub(super) &'a dyn fmt::Display);

impl fmt::Display for CaughtDisplay<'_> {
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
    /// Keeps `failure` as the last one.
    pub(super) fn set_last_failure(&self, failure: Option<Arc<str>>) {
        *self
            .report
            .last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = failure;
    }

    /// `judge_rates`.
    pub(super) fn failure_behind(&self, expect: Option<u32>) -> Option<Arc<str>> {
        let extras = self.extras.get()?;
        let behind = extras.behind.lock().unwrap_or_else(|e| e.into_inner());
        match (&*behind, expect) {
            (Some((generation, text)), Some(expect)) if *generation == expect => Some(text.clone()),
            _ => None,
        }
    }
}

impl Inner {
    /// What `Breaker::explain` says now.
    fn explain(&self) -> Explanation {
        let m = self.metrics();
        let now = self.clock().coarse();
        let why = match self.extras.get() {
            Some(extras) => extras.why.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            None => Default::default(),
        };
        let window = self.window.as_ref().map(|w| {
            let t = w.tally(now);
            (t.failures, t.slow, t.calls)
        });
        Explanation::new(Parts {
            name: m.name,
            key: self.key().map(str::to_owned),
            state: m.state,
            now: Duration::from_nanos(now),
            since: Duration::from_nanos(self.state_since.load(Ordering::Relaxed)),
            why,
            last_failure: self.last_failure(),
            open_until: (m.state == State::Open).then(|| {
                Duration::from_nanos(self.report.shown(self.open_until.load(Ordering::Relaxed)))
            }),
            reopens: self.reopens_since_close(),
            consecutive_failures: m.consecutive_failures,
            probe_successes: m.consecutive_successes,
            window,
            config: (*self.config).clone(),
        })
    }

    /// The short explanation for the `tracing` event of an opening. It reads the clock, which
    /// may be the user's and panic: caught, as a listener's panic is (empty then).
    pub(super) fn short_why(&self) -> String {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.explain().short().to_string()
        }))
        .unwrap_or_else(|payload| {
            crate::event::discard(payload);
            String::new()
        })
    }
}

impl Breaker {
    /// Why the breaker is in its state, as data and (through `Display`) as a sentence; see
    /// [`Explanation`]. For a keyed family's entry, ask its breaker
    /// ([`BreakerMap::get`](crate::BreakerMap::get)).
    ///
    /// Reads the clock, and allocates: meant for dashboards, logs and admin endpoints, not
    /// for the call path.
    pub fn explain(&self) -> Explanation {
        self.inner().explain()
    }
}
