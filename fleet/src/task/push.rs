//! Writing local changes: the pending changes of the shared breakers, manual ones first, each
//! written (`cas` or `force`) only if the breaker still holds it.

use breakerbox_runtime::__integrations::BreakerExt;
use core::time::Duration;

use super::state::{Answer, Intent, Pushed, Task};

use crate::keys::split_key;
use breakerbox_runtime::State;

impl Task {
    /// Writes the pending local changes, manual ones first; stops at the first failure of the
    /// store and keeps what is left for the next tick. A change over a record this instance
    /// cannot read is kept, and tried again after that record's backoff (`Task::troubled`),
    /// while the others are written.
    pub(super) async fn flush(&mut self) -> bool {
        if self.holding() {
            // Held for a failing store: the breakers' states are the hold's, not the changes
            // to write. Written once a `PING` answers and the breakers are given back (`tick`).
            return false;
        }
        let names: Vec<String> = self.pending.keys().cloned().collect();
        for name in names {
            if self.left_alone(&name) {
                continue;
            }
            let Some(mut pending) = self.pending.remove(&name) else {
                continue;
            };
            if let Some((state, reason)) = pending.manual {
                let intent = Intent::Manual(state);
                match self
                    .push(&name, intent, reason.to_string(), pending.reimport)
                    .await
                {
                    Pushed::Done => pending.manual = None,
                    Pushed::Kept => {
                        self.pending.insert(name, pending);
                        continue;
                    }
                    Pushed::Failed => {
                        self.pending.insert(name, pending);
                        return false;
                    }
                }
            }
            if let Some((intent, reason)) = pending.auto {
                match self.push(&name, intent, reason.to_string(), false).await {
                    Pushed::Done => {}
                    Pushed::Kept => {
                        self.pending.insert(name, pending);
                    }
                    Pushed::Failed => {
                        self.pending.insert(name, pending);
                        return false;
                    }
                }
            }
        }
        true
    }

    /// A family key tracked anew (keys.rs) has not read its record: a closed one there is what
    /// it held (its closed records are not re-read), so it is read first, and a change made
    /// here is written over it. `false` if the store failed.
    async fn first_read(&mut self, name: &str) -> bool {
        if split_key(name).is_none() || self.tracked.get(name).is_none_or(|t| t.read) {
            return true;
        }
        match self.read_record(name).await {
            Answer::Done(record) => {
                if let Some(t) = self.tracked.get_mut(name) {
                    t.read = true;
                    if record.epoch != 0 && record.state == State::Closed {
                        t.saw(&record);
                    }
                }
                true
            }
            // Written over whatever is there, as without the read.
            Answer::Unreadable(_) => true,
            Answer::Failed => false,
        }
    }

    /// Writes one change if the breaker still holds it. With `reimport` (a manual change a
    /// record was taken on over), the breaker takes the written record on.
    pub(super) async fn push(
        &mut self,
        name: &str,
        intent: Intent,
        reason: String,
        reimport: bool,
    ) -> Pushed {
        let Some(breaker) = self.holder(name) else {
            return Pushed::Done;
        };
        let quorum = self.quorum_of(name);
        // A trip over the open record it holds has nothing to write, unless it opened the
        // breaker for longer than the record does (a `trip_for` of an open breaker): the
        // fleet then learns the longer open time, rather than this instance alone holding it.
        if self
            .tracked
            .get(name)
            .is_some_and(|t| t.holds(intent, quorum.is_some()))
            && !self.outlasts_the_fleet(name, &breaker)
        {
            return Pushed::Done;
        }
        let now = breaker.held_state();
        // An open time is written as the breaker reports it: an open record taken on here is
        // held one `probe_timeout` longer for the fleet's probe leases, and that hold is this
        // instance's, not the fleet's (a vanished record written again keeps its open time).
        let left = breaker
            .export_state()
            .open_remaining
            .or(now.open_remaining)
            .unwrap_or_default();
        let (force, state, open_for) = match intent {
            Intent::Trip | Intent::Report if now.state == State::Open => (false, State::Open, left),
            Intent::Again(State::Open) if now.state == State::Open => (false, State::Open, left),
            // A trip the store could not take before its open time ran out (the breaker is
            // half-open since, with no record taken on over it: that would have dropped the
            // change). It is written with no open time left, so that the fleet learns of it
            // and probes through its leases, as after any trip whose time is up.
            Intent::Trip if now.state == State::HalfOpen => (false, State::Open, Duration::ZERO),
            Intent::Close if now.state == State::Closed => (false, State::Closed, Duration::ZERO),
            Intent::Manual(state) => (true, state, Duration::ZERO),
            Intent::Again(state) if now.state == state => (false, state, Duration::ZERO),
            // The breaker has moved on (closed or re-opened since, each a change of its own):
            // nothing of it to write.
            _ => return Pushed::Done,
        };
        if !self.first_read(name).await {
            return Pushed::Failed;
        }
        let expected = self.tracked.get(name).map_or(0, |t| t.applied);
        let open_ms = u64::try_from(open_for.as_millis().max(1)).unwrap_or(u64::MAX);
        let last_failure = match state {
            State::Open => breaker
                .last_failure()
                .map(|f| f.to_string())
                .unwrap_or_default(),
            _ => String::new(),
        };
        let change = self.change_of(
            name,
            force,
            expected,
            state,
            open_ms,
            now.reopens,
            reason,
            last_failure,
        );
        let closed = self
            .tracked
            .get(name)
            .is_none_or(|t| t.seen == State::Closed);
        if intent == Intent::Report
            && closed
            && let Some(quorum) = quorum
        {
            return self.report(name, &breaker, quorum, change).await;
        }
        let mut record = match self.write_record(name, change.clone()).await {
            Answer::Done(record) => record,
            Answer::Unreadable(why) => {
                // Over what this instance cannot read the change is kept, and written once the
                // key holds a record again (or nothing): a foreign value that is removed later
                // leaves this breaker's change to be written, as over a vanished record.
                self.troubled(name, &why);
                return Pushed::Kept;
            }
            Answer::Failed => return Pushed::Failed,
        };
        if !record.changed && record.epoch == 0 && expected != 0 {
            // The record vanished (FLUSHALL, a restart): write over "no record" instead. Under
            // a quorum an opening over no record is a report, as any opening over a closed one.
            let mut change = change;
            change.seen = 0;
            if state == State::Open
                && let Some(quorum) = quorum
            {
                return self.report(name, &breaker, quorum, change).await;
            }
            record = match self.write_record(name, change).await {
                Answer::Done(record) => record,
                Answer::Unreadable(why) => {
                    self.troubled(name, &why);
                    return Pushed::Kept;
                }
                Answer::Failed => return Pushed::Failed,
            };
        }
        self.took(name, &breaker, &record, reimport);
        Pushed::Done
    }
}
