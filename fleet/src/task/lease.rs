//! Fleet-wide half-open: probe leases (`probe.lua`). One lease is one probe.
//!
//! Every instance holds an open record one `probe_timeout` past its open time. When the
//! record's open time runs out, each instance's task asks for leases: at most
//! `half_open_calls` leases exist at once, fleet-wide, and an instance is granted every free
//! one, provided they are at least `successes` (fewer probes could not close its round). An
//! instance granted `n` sets its breaker's probe budget to `n`
//! ([`Breaker::set_probe_budget`]) and takes the record on with no open time left, so its
//! next calls probe, `n` of them at most; the others stay open and ask again when the
//! earliest lease expires. A probe's outcome is written as any change (a re-open or a close),
//! and that write drops the leases. Any change, local or remote, lifts the budget: while the
//! store fails, an instance's hold runs out and it probes on its own, `half_open_calls` of
//! them.

use core::time::Duration;

use tokio::time::Instant;

use super::breakers::held;
use super::state::{Answer, Lease, Task};

use crate::shared::later;
use crate::store::{LeaseAsk, Leases};
use breakerbox_runtime::__integrations::BreakerExt;
use breakerbox_runtime::{Breaker, SharedState, State};

impl Task {
    /// The earliest moment a tracked breaker asks for a lease.
    pub(super) fn next_probe(&self) -> Option<Instant> {
        self.tracked.values().filter_map(|t| t.probe_at).min()
    }

    /// Asks for a lease for every breaker whose moment has come, or checks the leases held.
    pub(super) async fn probe_due(&mut self) {
        let now = Instant::now();
        let due: Vec<(String, Option<Lease>)> = self
            .tracked
            .iter()
            .filter(|(_, t)| t.probe_at.is_some_and(|at| at <= now))
            .map(|(name, t)| (name.clone(), t.lease))
            .collect();
        for (name, lease) in due {
            match lease {
                Some(lease) => self.check_lease(&name, lease).await,
                None => self.probe(&name).await,
            }
        }
    }

    /// Whether `breaker` is open here for longer than the fleet's record holds it (its open
    /// time plus one `probe_timeout`).
    pub(super) fn outlasts_the_fleet(&self, name: &str, breaker: &Breaker) -> bool {
        let Some(left) = breaker.held_state().open_remaining else {
            return false;
        };
        let now = Instant::now();
        let hold = self
            .tracked
            .get(name)
            .and_then(|t| t.open_until)
            .map_or(Duration::ZERO, |until| until.saturating_duration_since(now))
            .saturating_add(breaker.config().probe_timeout());
        left > hold.saturating_add(Duration::from_millis(10))
    }

    /// A lease held here, at half its life or at its end. Probes in flight keep the leases
    /// (renewed, so no other instance starts probes while they run). With none in flight at
    /// half its life, no new probe starts under it (one started then could outlast it); at its
    /// end this instance stops probing for the fleet and waits its turn again, so an idle
    /// holder never leaves its probe budget behind.
    async fn check_lease(&mut self, name: &str, lease: Lease) {
        let Some(breaker) = self.breaker(name) else {
            return self.gone(name);
        };
        let in_flight = |b: &Breaker| b.probe_round().is_some_and(|(a, s)| a > s);
        if in_flight(&breaker) {
            return self.probe(name).await;
        }
        if Instant::now() >= lease.until {
            return self.relinquish(name, &breaker, lease);
        }
        // The budget first, then a second look: a probe admitted in between is renewed for.
        let admitted = breaker.probe_round().map_or(0, |(a, _)| a);
        breaker.set_probe_budget(Some(admitted));
        if in_flight(&breaker) {
            return self.probe(name).await;
        }
        if let Some(t) = self.tracked.get_mut(name) {
            t.probe_at = Some(lease.until);
        }
    }

    /// The breaker `name` is gone (dropped, or a family key evicted here): nothing to probe
    /// for, and nothing due, so the loop does not come back to it at once.
    fn gone(&mut self, name: &str) {
        if let Some(t) = self.tracked.get_mut(name) {
            t.probe_at = None;
            t.lease = None;
        }
    }

    /// The lease ran out with no probe in flight: no new probe from here, the breaker held
    /// open like the others', and the leases asked for again once the store has dropped them
    /// (after the others waiting have asked).
    fn relinquish(&mut self, name: &str, breaker: &Breaker, lease: Lease) {
        breaker.set_probe_budget(Some(0));
        let ttl = breaker.config().probe_timeout();
        let again = later(lease.until, lease.rtt.saturating_add(ttl / 4));
        if let Some(t) = self.tracked.get_mut(name) {
            t.lease = None;
            t.probe_at = Some(again);
        }
        if matches!(breaker.state(), State::Open | State::HalfOpen) {
            let wait = again.saturating_duration_since(Instant::now());
            let reopens = breaker.held_state().reopens;
            self.import_own(
                name,
                breaker,
                &held(breaker, SharedState::new(State::Open, Some(wait), reopens)),
            );
        }
        // Held open, it decides alone again only if its hold runs out (the store unreachable).
        breaker.set_probe_budget(None);
    }

    async fn probe(&mut self, name: &str) {
        let Some(breaker) = self.breaker(name) else {
            return self.gone(name);
        };
        let Some(epoch) = self.tracked.get(name).map(|t| t.applied) else {
            return;
        };
        if self.left_alone(name) {
            // Its keys hold what this instance cannot read: asked again after the backoff.
            if let Some(t) = self.tracked.get_mut(name) {
                t.probe_at = Some(Instant::now() + Duration::from_millis(100));
            }
            return;
        }
        let config = breaker.config();
        // A life the store can count (`LONGEST_LIFE`).
        let ttl = config.probe_timeout().min(crate::config::LONGEST_LIFE);
        let ask = LeaseAsk {
            epoch,
            limit: config.half_open_calls().max(1),
            life: ttl,
            holder: self.shared.holder.clone(),
            fewest: config.successes().max(1),
        };
        let sent = Instant::now();
        let generation = breaker.generation();
        let limit = self.shared.config.timeout * 2;
        let reply = tokio::time::timeout(limit, self.store.lease(name.to_owned(), ask)).await;
        let reply = self.answered(reply);
        if breaker.generation() != generation && !matches!(reply, Answer::Failed) {
            // The breaker changed while the ask was out (a reset, a trip by hand or by
            // calls): that change is written and the record read again before any lease is
            // taken on, rather than a grant for the opening it asked about ending this one.
            // It asks again soon, after that change has been written (or the record read).
            if let Some(t) = self.tracked.get_mut(name) {
                t.probe_at = Some(Instant::now() + Duration::from_millis(100));
                t.lease = None;
            }
            self.owed = true;
            return;
        }
        let retry = |task: &mut Task, after: Duration| {
            if let Some(t) = task.tracked.get_mut(name) {
                t.probe_at = Some(later(Instant::now(), after));
            }
        };
        match reply {
            Answer::Done(_) if self.outlasts_the_fleet(name, &breaker) => {
                // Opened here for longer than the fleet's record (a `trip_for` of an open
                // breaker): the grant would end that; asked again when it runs out.
                let left = breaker.held_state().open_remaining.unwrap_or_default();
                if let Some(t) = self.tracked.get_mut(name) {
                    t.probe_at = Some(later(Instant::now(), left));
                    t.lease = None;
                }
            }
            Answer::Done(Leases::Granted { count: leases, .. }) => {
                // The lease runs from before the ask left, so it ends here no later than in
                // the store.
                let lease = Lease {
                    until: later(sent, ttl),
                    rtt: sent.elapsed(),
                };
                if let Some(t) = self.tracked.get_mut(name) {
                    t.lease = Some(lease);
                    t.probe_at = Some(later(sent, ttl / 2));
                }
                if breaker.state() == State::HalfOpen {
                    // Renewed while its probes run: one probe per lease again.
                    breaker.set_probe_budget(Some(leases));
                } else if breaker.state() == State::Open {
                    // One probe per lease, set before the breaker may go half-open.
                    breaker.set_probe_budget(Some(leases));
                    // No open time left: the next call probes.
                    let reopens = breaker.held_state().reopens;
                    self.import(
                        name,
                        &breaker,
                        &SharedState::new(State::Open, Some(Duration::ZERO), reopens),
                        false,
                    );
                }
            }
            Answer::Done(Leases::Wait(wait)) => {
                if self
                    .tracked
                    .get_mut(name)
                    .and_then(|t| t.lease.take())
                    .is_some()
                {
                    // Held here, and gone from the store before the renewal came: the probes
                    // in flight finish, no new one starts.
                    let admitted = breaker.probe_round().map_or(0, |(a, _)| a);
                    breaker.set_probe_budget(Some(admitted));
                }
                retry(self, wait);
                if breaker.state() == State::Open {
                    // Still not this instance's turn: held until it may ask again.
                    let reopens = breaker.held_state().reopens;
                    self.import(
                        name,
                        &breaker,
                        &held(&breaker, SharedState::new(State::Open, Some(wait), reopens)),
                        false,
                    );
                }
            }
            Answer::Done(Leases::Gone) => {
                // The record moved on: the next resync takes it on.
                if let Some(t) = self.tracked.get_mut(name) {
                    t.probe_at = None;
                }
                self.owed = true;
            }
            Answer::Unreadable(why) => {
                self.troubled(name, &why);
                retry(self, Duration::from_millis(100));
            }
            Answer::Failed => retry(self, Duration::from_millis(100)),
        }
    }
}
