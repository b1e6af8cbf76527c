//! The task's loop: one turn at a time, local changes from the listeners first, then the
//! published records, the probe leases, the count batches and the re-reads; and how a local
//! change or a published record is taken in.

use core::time::Duration;
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use redis::{PushInfo, PushKind, Value};
use tokio::sync::oneshot;
use tokio::time::Instant;

use breakerbox_runtime::__edge::{BreakerExt, RegistryExt};
use breakerbox_runtime::{Breaker, Reason, SharedState, State, WeakBreaker, registry};

use super::state::{Intent, Task, Tracked};
use super::{counts, lease};
use crate::record::{Record, parse_payload};
use crate::shared::{Message, give_back};

/// The loop's timers: the next re-read, and the count batches.
pub(super) struct Timers {
    pub(super) next: Instant,
    pub(super) batch: tokio::time::Interval,
}

impl Task {
    pub(crate) async fn run(mut self) {
        let mut timers = Timers {
            next: Instant::now(),
            batch: tokio::time::interval(counts::BATCH),
        };
        timers
            .batch
            .set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while self.step(&mut timers).await {}
    }

    /// One turn of the loop; `false` once the fleet is gone.
    ///
    /// Local changes come before published records: a change this instance made before the
    /// task looks at a record is written (or kept pending, if the store fails) first, so a
    /// record written before that change (by another instance, or by this one's count batch)
    /// is never taken on over it; `apply` then finds it older than the write, or a manual
    /// change pending.
    pub(super) async fn step(&mut self, timers: &mut Timers) -> bool {
        let probe_at = self.next_probe();
        tokio::select! {
            biased;
            message = self.rx.recv() => match message {
                Some(Message::Changed { name, to, reason, breaker }) => {
                    self.on_change(name, to, reason, breaker);
                    // Everything queued goes in one flush.
                    while let Ok(more) = self.rx.try_recv() {
                        self.on_message(more).await;
                    }
                    self.flush().await;
                }
                Some(other) => self.on_message(other).await,
                None => return false,
            },
            push = self.pushes.recv() => match push {
                Some(push) => self.on_push(push),
                None => return false,
            },
            _ = tokio::time::sleep_until(probe_at.unwrap_or(timers.next)), if probe_at.is_some() => {
                self.probe_due().await;
            }
            _ = timers.batch.tick() => self.send_counts().await,
            _ = tokio::time::sleep_until(timers.next) => {
                self.tick().await;
                timers.next = Instant::now() + self.period();
            }
        }
        self.shared
            .pending
            .store(self.pending.len() as u64, Ordering::Relaxed);
        self.shared
            .shared
            .store(self.tracked.len() as u64, Ordering::Relaxed);
        // A failure or a disconnection in any branch owes a re-read within 100 ms (`period`):
        // the next one comes forward, never later.
        let soon = Instant::now() + self.period();
        if soon < timers.next {
            timers.next = soon;
        }
        true
    }

    /// While the store fails or a re-read is owed: a quarter of `resync_every`, at most 100 ms.
    pub(super) fn period(&self) -> Duration {
        let every = self.shared.config.resync_every;
        if self.owed || self.pending.keys().any(|name| !self.left_alone(name)) {
            (every / 4).min(Duration::from_millis(100))
        } else {
            every
        }
    }

    pub(super) async fn on_message(&mut self, message: Message) {
        if let Some(done) = self.note(message) {
            let ok = self.tick().await;
            let _ = done.send(ok);
        }
    }

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
                // The task's imports, in order: this event is the oldest one not yet read.
                let own = self
                    .own_imports
                    .get_mut(&name)
                    .and_then(VecDeque::pop_front);
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
            Message::Resync(done) => return Some(done),
        }
        None
    }

    pub(super) fn track(&mut self, name: &str, breaker: WeakBreaker) {
        let same = |t: &Tracked| match (t.breaker.upgrade(), breaker.upgrade()) {
            (Some(a), Some(b)) => a.ptr_eq(&b),
            (None, None) => true,
            _ => false,
        };
        match self.tracked.get(name) {
            Some(t) if same(t) => {}
            // Another breaker under this name (the one before was dropped, or is left to
            // go): the new one is shared from scratch, its record read by the next pass.
            Some(_) => {
                self.tracked.insert(name.to_owned(), Tracked::new(breaker));
                self.owed = true;
            }
            None => {
                self.tracked.insert(name.to_owned(), Tracked::new(breaker));
            }
        }
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
            match registry().existing(&name) {
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

    /// A push message: a published record, or the connection's loss.
    pub(super) fn on_push(&mut self, push: PushInfo) {
        match push.kind {
            PushKind::Disconnection => {
                self.owed = true;
                self.shared.connected.store(false, Ordering::Relaxed);
                self.hold();
            }
            PushKind::Message => {
                let Some(Value::BulkString(payload)) = push.data.get(1) else {
                    return;
                };
                let Some((name, record)) = parse_payload(payload) else {
                    self.foreign_message(payload);
                    return;
                };
                // Written by a fleet's script: the key holds a record again.
                self.readable(&name);
                if record.epoch > self.tracked.get(&name).map_or(0, |t| t.applied) {
                    self.apply(&name, &record);
                }
            }
            _ => {}
        }
    }

    /// The local breaker `name`: tracked, or a registry breaker the config shares.
    pub(super) fn breaker(&mut self, name: &str) -> Option<Breaker> {
        if let Some(b) = self.tracked.get(name).and_then(|t| t.breaker.upgrade()) {
            return Some(b);
        }
        if !self.shared.config.shares(name) {
            return None;
        }
        let b = registry().existing(name)?;
        self.tracked
            .insert(name.to_owned(), Tracked::new(b.downgrade()));
        Some(b)
    }

    /// Takes on the record `record` as the breaker's state, unless it holds it already.
    pub(super) fn apply(&mut self, name: &str, record: &Record) {
        if record.epoch == 0 {
            return; // no record is no state to take on
        }
        if self.pending.get(name).is_some_and(|p| p.manual.is_some()) {
            // A manual change made here is about to be written over this record (`force`):
            // the breaker keeps it.
            return;
        }
        let Some(breaker) = self.breaker(name) else {
            return;
        };
        // The fleet moved on: whatever leases this instance held are dropped (lease.rs).
        breaker.set_probe_budget(None);
        if let Some(t) = self.tracked.get_mut(name) {
            t.saw(record);
        }
        if let Some(pending) = self.pending.get_mut(name) {
            pending.auto = None;
        }
        if let Some(h) = self
            .shared
            .held
            .lock()
            .unwrap()
            .as_mut()
            .and_then(|held| held.get_mut(name))
        {
            // Held for a failing store: the breaker stays held, and gets this record back
            // when the store answers, instead of the state it had before the hold, which
            // the record is newer than.
            h.state = lease::held(&breaker, record.shared_state());
            h.since = Instant::now();
            self.shared.applied.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let local = breaker.state();
        if local == record.state && record.state != State::Open {
            return;
        }
        // A local change of this breaker not yet written loses to the record: the record is
        // newer than what that change was made from. An open record is held here one
        // `probe_timeout` longer, for the fleet's probe leases (lease.rs).
        self.import(
            name,
            &breaker,
            &lease::held(&breaker, record.shared_state()),
            false,
        );
        self.shared.applied.fetch_add(1, Ordering::Relaxed);
    }

    /// Imports `state` into `breaker`: `own` for a hold or a give-back (see `own_imports`),
    /// else the fleet's record taken on.
    pub(super) fn import(&mut self, name: &str, breaker: &Breaker, state: &SharedState, own: bool) {
        if breaker.state() != state.state {
            // A change of state tells an event: its `Imported` message is matched to this.
            self.own_imports
                .entry(name.to_owned())
                .or_default()
                .push_back(own);
        }
        breaker.import_state(state);
    }

    /// Imports `state` into `breaker` as this task's own change: a hold or a give-back.
    pub(super) fn import_own(&mut self, name: &str, breaker: &Breaker, state: &SharedState) {
        self.import(name, breaker, state, true);
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

impl Drop for Task {
    /// The task is gone (its `Fleet` dropped, or its runtime shut down): no breaker stays held.
    fn drop(&mut self) {
        give_back(&self.shared);
        // The probe budgets lease.rs set are the fleet's: unshared, each decides alone.
        for t in self.tracked.values() {
            if let Some(b) = t.breaker.upgrade() {
                b.set_probe_budget(None);
            }
        }
    }
}
