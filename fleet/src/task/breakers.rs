//! The local breakers the task shares, and how a state is taken on by them: which breakers
//! are tracked (`track`, `breaker`), a state imported (`import`: the fleet's, or the task's own
//! for a hold or a give-back), a published or read record applied (`apply`), and the record a
//! write returned taken on (`took`).

use core::time::Duration;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use breakerbox_runtime::__integrations::{BreakerExt, RegistryExt};
use breakerbox_runtime::{Breaker, SharedState, State, WeakBreaker, registry};

use super::state::{Task, Tracked};
use crate::keys::{split_key, told_of};
use crate::record::Record;

pub(super) use crate::keys::held;

impl Task {
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
                // A family key's is read by the next pass, as it is new (resync.rs).
                if split_key(name).is_none() {
                    self.owed = true;
                }
            }
            None => {
                self.tracked.insert(name.to_owned(), Tracked::new(breaker));
            }
        }
    }

    /// Tracks `breaker`, the key `name`'s (keys.rs), unless it is tracked: a key's new
    /// breaker is shared from scratch, its record read by the next pass (not a full one).
    pub(super) fn track_key(&mut self, name: &str, breaker: WeakBreaker) {
        let Some(b) = breaker.upgrade() else {
            return;
        };
        if self
            .tracked
            .get(name)
            .and_then(|t| t.breaker.upgrade())
            .is_some_and(|t| t.ptr_eq(&b))
        {
            return;
        }
        self.tracked.insert(name.to_owned(), Tracked::new(breaker));
    }

    /// The breaker `name` in the registry: a single one, or a shared family's key held here.
    pub(super) fn lookup(&self, name: &str) -> Option<Breaker> {
        match split_key(name) {
            Some((family, key)) => {
                if !self.shared.config.shares(family) {
                    return None;
                }
                // A key made lately is found among the keys the fleet saw made, without a
                // search of its family (which a key type other than `String` needs).
                let born = self
                    .shared
                    .keyed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .born(name);
                born.or_else(|| {
                    registry()
                        .key_breaker(&self.shared.registry_family(family), key)
                        .ok()
                })
            }
            None => registry().existing(name),
        }
    }

    /// What the fleet holds of a family key not closed (keys.rs) takes `record` in; a breaker
    /// made for the key meanwhile, which may not have been in its family when the task looked
    /// for it, is tracked so that it takes `record` on.
    pub(super) fn know(&mut self, name: &str, record: &Record) {
        if split_key(name).is_none() {
            return;
        }
        let births = self
            .shared
            .keyed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .know(name, record);
        for b in births {
            if b.upgrade().is_some_and(|b| b.state() != record.state) {
                self.track_key(name, b);
            }
        }
    }

    /// A key made here took the fleet's record from the book (keys.rs): it matches that
    /// record, as if it had read it. So that record vanishing later (expired while this
    /// instance was cut off) is told as any record's vanishing (a key still forced open, say,
    /// is written again, as after a `FLUSHALL`), not taken for "no record ever seen", which
    /// would leave the key forced open here alone.
    pub(super) fn born_from_book(&mut self, name: &str) {
        let record = self
            .shared
            .keyed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(name);
        if let (Some(record), Some(t)) = (record, self.tracked.get_mut(name))
            && t.applied == 0
            && t.breaker
                .upgrade()
                .is_some_and(|b| b.state() == record.state)
        {
            t.saw(&record);
        }
    }

    /// Tracks the registry's breakers the config shares that are not tracked yet.
    pub(super) fn track_registry(&mut self) {
        if self.shared.config.share.is_empty() {
            return;
        }
        for name in registry().names() {
            if !self.tracked.contains_key(&name)
                && self.shared.config.shares(&name)
                && let Some(b) = registry().existing(&name)
            {
                self.track(&name, b.downgrade());
            }
        }
    }

    /// The local breaker `name`: tracked, or a registry breaker (or family key) the config
    /// shares.
    pub(super) fn breaker(&mut self, name: &str) -> Option<Breaker> {
        if let Some(b) = self.tracked.get(name).and_then(|t| t.breaker.upgrade()) {
            return Some(b);
        }
        if split_key(name).is_none() && !self.shared.config.shares(name) {
            return None;
        }
        let b = self.lookup(name)?;
        self.tracked
            .insert(name.to_owned(), Tracked::new(b.downgrade()));
        Some(b)
    }

    /// The breaker whose change of `name` is written: for a family key, the one its family
    /// holds now. A key evicted here (idle, closed or with its open time run) and made again
    /// is another breaker, and the evicted one may live on a while (a handle, the family's
    /// totals): its change is no longer this instance's state, so it is judged by the new
    /// breaker's, tracked anew (its record read before anything is written over it). A key
    /// no longer held here has nothing to write.
    pub(super) fn holder(&mut self, name: &str) -> Option<Breaker> {
        let tracked = self.breaker(name)?;
        if split_key(name).is_none() {
            return Some(tracked);
        }
        let now = self.lookup(name)?;
        if !now.ptr_eq(&tracked) {
            self.track_key(name, now.downgrade());
        }
        Some(now)
    }

    /// Takes on the record `record` as the breaker's state, unless it holds it already.
    pub(super) fn apply(&mut self, name: &str, record: &Record) {
        self.know(name, record);
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
            h.state = held(&breaker, record.shared_state());
            h.hold = h
                .state
                .open_remaining
                .unwrap_or_default()
                .saturating_sub(record.open_remaining().unwrap_or_default());
            h.failure = None;
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
            &held(&breaker, record.shared_state()),
            false,
        );
        self.shared.applied.fetch_add(1, Ordering::Relaxed);
    }

    /// A record this instance's write returned: written (taken on here as the fleet's), or
    /// another instance's that won (taken on over the local change).
    pub(super) fn took(&mut self, name: &str, breaker: &Breaker, record: &Record, reimport: bool) {
        if record.changed {
            self.know(name, record);
            if self
                .tracked
                .get(name)
                .and_then(|t| t.breaker.upgrade())
                .is_some_and(|b| !b.ptr_eq(breaker))
            {
                // A family key evicted here and made again while the write was out (`know`
                // has tracked the new one): the breaker the family holds now takes the
                // written record on, as a record of the fleet's.
                self.apply(name, record);
                self.shared.pushed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            if let Some(t) = self.tracked.get_mut(name) {
                t.saw(record);
            }
            if record.state == State::Open && breaker.state() == State::Open {
                // Tripped here: held open like the others until a lease says probe.
                self.import(name, breaker, &held(breaker, record.shared_state()), false);
            } else if reimport && breaker.state() != record.state {
                // A manual change, with an older record taken on over it here meanwhile: the
                // write made it the fleet's newest record, so this breaker holds it too.
                self.import(name, breaker, &held(breaker, record.shared_state()), false);
                self.shared.applied.fetch_add(1, Ordering::Relaxed);
            }
            self.shared.pushed.fetch_add(1, Ordering::Relaxed);
        } else {
            // Another instance changed it first: its record wins here too.
            self.apply(name, record);
        }
    }

    /// Imports `state` into `breaker`: `own` for a hold or a give-back (see `own_imports`),
    /// else the fleet's record taken on.
    pub(super) fn import(&mut self, name: &str, breaker: &Breaker, state: &SharedState, own: bool) {
        // Every open state this task imports is held one `probe_timeout` past the fleet's
        // open time (`held`), for the fleet's probe leases; it reports the fleet's, when the
        // fleet's probe is due.
        let shown = (state.state == State::Open).then(|| {
            let left = state.open_remaining.unwrap_or_default();
            left.saturating_sub(breaker.config().probe_timeout())
        });
        self.import_shown(name, breaker, state, own, shown, None);
    }

    /// As `import`, an open state reported as open for `shown`; `failure` is the failure
    /// behind it where no record the breaker last saw tells one (an opening of its own given
    /// back after a hold).
    pub(super) fn import_shown(
        &mut self,
        name: &str,
        breaker: &Breaker,
        state: &SharedState,
        own: bool,
        shown: Option<Duration>,
        failure: Option<&str>,
    ) {
        if breaker.state() != state.state {
            // A change of state tells an event: its `Imported` message is matched to this.
            self.own_imports
                .entry(name.to_owned())
                .or_default()
                .push_back(own);
        }
        let (told, told_failure) = self.told(name, state.state);
        let failure = told_failure.as_deref().or(failure);
        breaker.import_reporting(state, shown, told.as_deref(), failure);
    }

    /// Why the breaker takes on `state`, as the record it last saw tells it, if that record
    /// holds `state` (a hold for a failing store is no record's): who changed it and its
    /// reason (`web-2 tripped it (5 consecutive failures)`), and for an open record the
    /// failure behind it, `web-2: HTTP 503`. A record this instance wrote tells its own reason
    /// and failure as they were.
    pub(super) fn told(&self, name: &str, state: State) -> (Option<String>, Option<String>) {
        let Some(t) = self.tracked.get(name).filter(|t| t.seen == state) else {
            return (None, None);
        };
        let (origin, reason, failure) = &t.told;
        told_of(
            &self.shared.instance,
            (origin.as_str(), reason.as_str(), failure.as_str()),
            state,
        )
    }

    /// Imports `state` into `breaker` as this task's own change: a hold or a give-back.
    pub(super) fn import_own(&mut self, name: &str, breaker: &Breaker, state: &SharedState) {
        self.import(name, breaker, state, true);
    }
}
