//! Telling state changes: the queue of events not yet told, delivered in order by one thread
//! at a time, to the breaker's listeners, then the registry's.

use super::inner::Inner;
use super::rare_parts::Pending;
use crate::event::Event;
use crate::state::State;
use crate::sync::{Mutex, lock};

/// Clears `delivering` if telling an event unwinds, so that a later transition delivers what is
/// left. Listeners' panics are caught (`event::tell`); a `tracing` subscriber's are not.
struct Delivering<'a>(&'a Mutex<Pending>);

impl Drop for Delivering<'_> {
    fn drop(&mut self) {
        lock(self.0).delivering = false;
    }
}

impl Inner {
    /// Tells queued events, unless another thread is at it: that one will tell ours too.
    pub(super) fn deliver(&self) {
        let pending = &self.extras().pending;
        {
            let mut p = lock(pending);
            if p.delivering {
                return;
            }
            p.delivering = true;
        }
        let on_panic = Delivering(pending);
        loop {
            let next = {
                let mut p = lock(pending);
                let next = p.events.pop_front();
                p.delivering = next.is_some();
                next
            };
            let Some(event) = next else { break };
            self.emit(&event);
        }
        core::mem::forget(on_panic);
    }

    pub(super) fn emit(&self, event: &Event) {
        let level_warn = event.to == State::Open || event.to == State::ForcedOpen;
        if event.to == State::Open {
            // With the short explanation: why it opened, and the failure that did it.
            // Built only for a subscriber that wants it: it reads the breaker's counts.
            let why = if tracing::enabled!(target: "breakerbox", tracing::Level::WARN) {
                self.short_why()
            } else {
                String::new()
            };
            tracing::warn!(target: "breakerbox", name = %event.name, key = event.key.as_deref(), from = %event.from, to = %event.to, reason = %event.reason, failure = event.failure.as_deref(), why = %why, "circuit breaker state changed");
        } else if level_warn {
            tracing::warn!(target: "breakerbox", name = %event.name, key = event.key.as_deref(), from = %event.from, to = %event.to, reason = %event.reason, "circuit breaker state changed");
        } else {
            tracing::info!(target: "breakerbox", name = %event.name, key = event.key.as_deref(), from = %event.from, to = %event.to, reason = %event.reason, "circuit breaker state changed");
        }
        // Each listener's panic is caught (see `event::tell`): one that panics while this
        // thread is unwinding (a permit recording a panicking call's failure) would otherwise
        // abort.
        if let Some(extras) = self.extras.get() {
            extras.listeners.notify(event);
        }
        if self.tells_registry {
            crate::event::registry_wide().notify(event);
        }
    }
}
