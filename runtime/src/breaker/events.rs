//! Telling state changes: the queue of events not yet told, delivered in order by one thread
//! at a time, to the breaker's listeners, then the registry's.

use std::collections::VecDeque;
use std::sync::Arc;

use super::inner::Inner;
use crate::event::{Event, Listeners};
use crate::state::State;
use crate::sync::{Mutex, lock};

/// The parts of a breaker that few breakers use.
#[derive(Default)]
pub(super) struct Cold {
    pub(super) listeners: Listeners,
    /// The message of the failure that last tripped the breaker. std, not loom: no protocol
    /// runs through it.
    pub(super) last_failure: std::sync::Mutex<Option<Arc<str>>>,
    /// Events not yet told, in the order of their transitions (queued under the transition
    /// lock), and whether a thread is telling them. One thread at a time delivers, so
    /// listeners see transitions in order even when two threads cause them at once, and a
    /// listener that changes the state itself queues its event instead of deadlocking. The
    /// flag lives under the queue's lock: the deliverer finds the queue empty and stops
    /// delivering in one step, so no event is left behind.
    pub(super) pending: Mutex<Pending>,
    /// The message of the last failure a rate window judged too soon (fewer than `min_calls`
    /// calls), with its generation: a success that brings the window to `min_calls` may trip
    /// it, and its rejections name this failure. std, not loom: a plain slot.
    pub(super) behind: std::sync::Mutex<Option<(u32, Arc<str>)>>,
    /// Why the breaker is in its state, for `explain`: written with each transition, under
    /// the transition lock. std, not loom: a plain slot.
    pub(super) why: std::sync::Mutex<crate::explain::Why>,
    /// A rate trip's tally (generation, bad calls, calls), left by `judge_rates` for the
    /// transition it asks for.
    pub(super) tally: std::sync::Mutex<Option<(u32, u64, u64)>>,
    /// The configs a reload replaced: kept while the breaker lives, since a call may still
    /// read one (see `LiveConfig`).
    pub(super) retired: std::sync::Mutex<Vec<Arc<crate::config::Config>>>,
    /// A keyed family's breaker: its key as it displays, set by the family when it first
    /// rejects a call of the key (see `keyed`), for [`Rejected::key`](crate::Rejected::key).
    pub(super) key: std::sync::OnceLock<Box<str>>,
}

#[derive(Default)]
pub(super) struct Pending {
    pub(super) events: VecDeque<Event>,
    pub(super) delivering: bool,
}

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
        let pending = &self.cold().pending;
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
            tracing::warn!(target: "breakerbox", name = %event.name, from = %event.from, to = %event.to, reason = %event.reason, why = %why, "circuit breaker state changed");
        } else if level_warn {
            tracing::warn!(target: "breakerbox", name = %event.name, from = %event.from, to = %event.to, reason = %event.reason, "circuit breaker state changed");
        } else {
            tracing::info!(target: "breakerbox", name = %event.name, from = %event.from, to = %event.to, reason = %event.reason, "circuit breaker state changed");
        }
        // Each listener's panic is caught (see `event::tell`): one that panics while this
        // thread is unwinding (a permit recording a panicking call's failure) would otherwise
        // abort.
        if let Some(cold) = self.cold.get() {
            cold.listeners.notify(event);
        }
        if self.registered {
            crate::event::registry_wide().notify(event);
        }
    }
}
