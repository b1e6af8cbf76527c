//! What the task is told, taken in: the listeners' messages (a local change, a breaker to
//! track, the event of an import) and the store's push messages (a published record, the
//! connection's loss).

use core::time::Duration;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use tokio::sync::oneshot;
use tokio::time::Instant;

use breakerbox_runtime::__integrations::BreakerExt;
use breakerbox_runtime::{Reason, State, WeakBreaker};

use super::state::{Intent, Task};
use crate::shared::Message;
use crate::store::Event;

impl Task {
    /// Takes in a message, except a resync request, which it hands back for the caller to
    /// run (or, during a re-read, to answer with that re-read's result).
    pub(super) fn note(&mut self, message: Message) -> Option<oneshot::Sender<bool>> {
        match message {
            Message::Changed {
                name,
                to,
                reason,
                breaker,
            } => self.on_change(name, to, reason, breaker),
            Message::Imported { name } => {
                // The task's imports, in order: this event is the oldest one not yet read. A
                // name with none left waiting goes, so that a family's keys leave no entry.
                let queue = self.own_imports.get_mut(&name);
                let own = queue.and_then(VecDeque::pop_front);
                if self.own_imports.get(&name).is_some_and(VecDeque::is_empty) {
                    self.own_imports.remove(&name);
                }
                if own == Some(true) {
                    // A hold or a give-back: no record of the fleet's.
                    return None;
                }
                if let Some(pending) = self.pending.get_mut(&name) {
                    pending.auto = None;
                    pending.reimport |= pending.manual.is_some();
                }
            }
            Message::Track { name, breaker } => {
                self.track(&name, breaker);
                self.owed = true;
            }
            // Read by the next pass, as any key tracked anew (keys.rs).
            Message::KeyBorn { name, breaker } => {
                self.track_key(&name, breaker);
                self.born_from_book(&name);
            }
            Message::Resync(done) => return Some(done),
        }
        None
    }

    pub(super) fn on_change(
        &mut self,
        name: String,
        to: State,
        reason: Reason,
        breaker: Option<WeakBreaker>,
    ) {
        if let Some(breaker) = breaker {
            self.track(&name, breaker);
        } else if !self.tracked.contains_key(&name) {
            match self.lookup(&name) {
                Some(b) => self.track(&name, b.downgrade()),
                None => return,
            }
        }
        if to != State::HalfOpen
            && let Some(breaker) = self.breaker(&name)
        {
            // The round the leases were for is over (lease.rs): the breaker decides alone
            // again until it holds leases anew.
            breaker.set_probe_budget(None);
            if let Some(t) = self.tracked.get_mut(&name) {
                t.lease = None;
            }
        }
        let manual = self.breaker(&name).map(|b| b.manual_changes());
        if let Some(held) = self.shared.held.lock().unwrap().as_mut()
            && held.get(&name).is_some_and(|h| Some(h.manual) != manual)
        {
            // Changed here by hand while held: that change stands, nothing is given back. A
            // held breaker changes by no other hand (forced open or disabled, it neither trips
            // nor closes), so a change told with no hand on it since the hold was made before
            // the hold: the state the hold keeps already has it.
            held.remove(&name);
        }
        if let (Some(t), Some(m)) = (self.tracked.get_mut(&name), manual) {
            t.manual = m;
        }
        if let Some(t) = self.tracked.get_mut(&name) {
            t.recount();
        }
        let quorum = self.quorum_of(&name).is_some();
        let pending = self.pending.entry(name).or_default();
        // The breaker's latest state is this local change: it stands (written below).
        pending.reimport = false;
        match (to, reason) {
            (State::ForcedOpen | State::Disabled, _) | (State::Closed, Reason::Reset) => {
                // A manual change supersedes the automatic one before it.
                pending.manual = Some((to, reason));
                pending.auto = None;
            }
            // A trip by hand (`trip_for`) reaches the fleet as manual control does; a trip
            // by the breaker's own calls waits for a quorum, if the breaker has one.
            (State::Open, Reason::TripFor(_)) => pending.auto = Some((Intent::Trip, reason)),
            (State::Open, _) if quorum => pending.auto = Some((Intent::Report, reason)),
            (State::Open, _) => pending.auto = Some((Intent::Trip, reason)),
            (State::Closed, _) => pending.auto = Some((Intent::Close, reason)),
            _ => {}
        }
    }

    /// An event of the store's change feed: a written record, a record to read again, a
    /// foreign message, or the connection's loss.
    pub(super) fn on_event(&mut self, event: Event) {
        match event {
            Event::Lost => {
                self.owed = true;
                self.shared.connected.store(false, Ordering::Relaxed);
                self.hold();
            }
            Event::Written(name, record) => {
                // Written by a fleet: the key holds a record again.
                self.readable(&name);
                if record.epoch > self.tracked.get(&name).map_or(0, |t| t.applied) {
                    self.apply(&name, &record);
                }
            }
            Event::Stale(name) => {
                // Written, too long for the feed to carry: read by the next pass, soon.
                if let Some(t) = self.tracked.get_mut(&name) {
                    t.read = false;
                    self.owed = true;
                }
            }
            Event::Foreign(payload) => self.foreign_message(&payload),
        }
    }

    /// A Redis push message, as the feed reads it.
    #[cfg(test)]
    pub(super) fn on_push(&mut self, push: redis::PushInfo) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let _ = tx.send(push);
        if let Some(event) = crate::store::Feed::redis(rx).try_recv() {
            self.on_event(event);
        }
    }

    /// A message on the channel that is no record of a fleet's (another application's, another
    /// version's, or made up): skipped, with a warning at most once a second.
    pub(super) fn foreign_message(&mut self, payload: &[u8]) {
        let now = Instant::now();
        if self
            .foreign_warned
            .is_none_or(|at| now >= at + Duration::from_secs(1))
        {
            self.foreign_warned = Some(now);
            let shown = String::from_utf8_lossy(&payload[..payload.len().min(64)]).into_owned();
            tracing::warn!(target: "breakerbox", channel = self.channel, message = shown, bytes = payload.len(), "fleet: a message on the channel is not a fleet record; skipped");
        }
    }
}
