//! The store policy ([`OnStoreError`](crate::OnStoreError)): while the store is unreachable,
//! every shared single breaker is held forced open or disabled, and given its state back when
//! the store answers. A shared family's keys decide locally meanwhile.

use core::time::Duration;
use std::collections::BTreeMap;

use tokio::time::Instant;

use breakerbox_runtime::__integrations::BreakerExt;
use breakerbox_runtime::{Reason, SharedState, State};

use super::breakers;
use super::state::Task;
use crate::config::OnStoreError;
use crate::keys::split_key;
use crate::shared::{Held, later};

impl Task {
    /// Whether shared breakers are held for a failing store.
    pub(super) fn holding(&self) -> bool {
        self.shared.held.lock().unwrap().is_some()
    }

    /// The store is unreachable: under `on_store_error = "open" | "closed"`, holds every
    /// shared breaker forced open or disabled, keeping the state it had. Once per outage.
    pub(super) fn hold(&mut self) {
        let to = match self.shared.config.on_store_error {
            OnStoreError::Local => return,
            OnStoreError::Open => State::ForcedOpen,
            OnStoreError::Closed => State::Disabled,
        };
        if self.holding() {
            return;
        }
        self.track_registry();
        let mut held = BTreeMap::new();
        let mut hold = Vec::new();
        // Single breakers only: a shared family's keys decide locally while the store fails
        // (holding the keys the task tracks, and not those it does not, would split a family).
        let names: Vec<String> = self
            .tracked
            .keys()
            .filter(|n| split_key(n).is_none())
            .cloned()
            .collect();
        for name in names {
            let Some(breaker) = self.breaker(&name) else {
                continue;
            };
            let was = breaker.held_state();
            if matches!(was.state, State::ForcedOpen | State::Disabled) {
                continue; // set by hand: it stays as it is
            }
            held.insert(
                name.clone(),
                Held {
                    breaker: breaker.downgrade(),
                    state: was,
                    since: Instant::now(),
                    hold: unreported(&breaker, &was),
                    failure: breaker.last_failure().filter(|_| was.state == State::Open),
                    manual: breaker.manual_changes(),
                },
            );
            hold.push((name, breaker, was.reopens));
        }
        tracing::warn!(target: "breakerbox", policy = self.shared.config.on_store_error.as_str(), breakers = held.len(), "fleet: the store is unreachable; shared breakers held {to} until it answers");
        for (name, breaker, reopens) in hold {
            self.import_own(&name, &breaker, &SharedState::new(to, None, reopens));
            if let Some(t) = self.tracked.get_mut(&name) {
                t.recount();
            }
        }
        // Recorded once the breakers are held: a `Fleet` dropped meanwhile (on another thread)
        // found nothing to give back, and the task's own drop, when the abort lands, gives
        // back what is recorded here.
        *self.shared.held.lock().unwrap() = Some(held);
    }

    /// The store answers again: every held breaker gets back the state it had, or the
    /// fleet's record taken on during the hold, its open time counted on; the re-read that
    /// follows takes on the fleet's newer records.
    pub(super) fn give_back(&mut self) {
        let Some(held) = self.shared.held.lock().unwrap().take() else {
            return;
        };
        let hold = match self.shared.config.on_store_error {
            OnStoreError::Open => State::ForcedOpen,
            _ => State::Disabled,
        };
        for (name, mut h) in held {
            let Some(breaker) = h.breaker.upgrade() else {
                continue;
            };
            if breaker.state() != hold {
                continue; // changed since by hand: that change stands
            }
            if breaker.manual_changes() != h.manual {
                // Forced open (or disabled) by hand into the state it was held in: no event
                // told it, so it is written here, as any manual change.
                let reason = if hold == State::ForcedOpen {
                    Reason::ForcedOpen
                } else {
                    Reason::Disabled
                };
                let pending = self.pending.entry(name).or_default();
                pending.manual = Some((hold, reason));
                pending.auto = None;
                continue;
            }
            let mut state = h.now();
            if state.state == State::HalfOpen {
                // A round of probes the hold ended: the next one waits for a lease too, held
                // one `probe_timeout` as an open record is.
                state = breakers::held(
                    &breaker,
                    SharedState::new(State::Open, Some(Duration::ZERO), state.reopens),
                );
                h.hold = breaker.config().probe_timeout();
            }
            if let Some(t) = self.tracked.get_mut(&name) {
                // Counts start over (counts.rs): what a disabled breaker admitted meanwhile
                // was judged by none. An open state waits for a lease like any the fleet
                // holds: asked for when the record's open time ends (the state given back is
                // already held past it, as the record was taken on), or its own.
                t.recount();
                t.lease = None;
                t.probe_at = match (t.seen, t.open_until) {
                    (State::Open, Some(until)) if state.state == State::Open => Some(until),
                    _ => state.open_remaining.map(|left| later(Instant::now(), left)),
                };
            }
            breaker.set_probe_budget(None);
            // Reported as before the hold: the fleet's open time, or an opening's own.
            let shown = state.open_remaining.map(|left| left.saturating_sub(h.hold));
            let failure = h.failure.as_deref();
            self.import_shown(&name, &breaker, &state, true, shown, failure);
        }
        tracing::info!(target: "breakerbox", "fleet: the store answers again; shared breakers decide as before");
    }
}

/// How much of `state`, `breaker`'s state as held, is a hold for the fleet's probe leases that
/// the breaker does not report.
fn unreported(breaker: &breakerbox_runtime::Breaker, state: &SharedState) -> Duration {
    let shown = breaker.export_state().open_remaining.unwrap_or_default();
    state
        .open_remaining
        .unwrap_or_default()
        .saturating_sub(shown)
}
