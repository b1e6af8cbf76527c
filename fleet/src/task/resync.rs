//! The periodic re-read: pub/sub loses what is published while a connection is down, so after
//! every disconnection or failure (within 100 ms) the task subscribes if it must, writes what
//! is pending and reads every shared record again. Every `resync_every` besides, it reads the
//! records that need it (not closed here or in the fleet, pending, new) and `SWEEP` idle ones
//! in turn, and beats once for the instance if it shares a breaker under a quorum: an idle
//! instance's commands do not grow with the number of breakers it shares.

use std::sync::atomic::Ordering;

use tokio::sync::oneshot;

use super::state::{Answer, Intent, Pushed, READ_BATCH, SWEEP, Task, Tracked};
use crate::keys::{key_name, split_key};
use crate::record::Record;
use crate::store::{OpenKeys, Reads, StoreError};
use core::time::Duration;

use breakerbox_runtime::__integrations::BreakerExt;
use breakerbox_runtime::{SharedState, State};
use tokio::time::Instant;

impl Task {
    /// Subscribes if not yet, finds newly created shared registry breakers, writes what is
    /// pending, and re-reads every record. `true` if every store operation succeeded.
    pub(super) async fn tick(&mut self) -> bool {
        let mut asked = Vec::new();
        // A full pass when one is owed (at start, after a failure or a disconnection, when a
        // breaker is shared, when asked for); else the records that need it and a sweep.
        let full = self.owed;
        if self.holding() {
            // Held while the store was unreachable: given back once it answers, before the
            // pending changes are written and the records read.
            let limit = self.shared.config.timeout * 2;
            match tokio::time::timeout(limit, self.store.ping()).await {
                Ok(Ok(_)) => {
                    self.shared.connected.store(true, Ordering::Relaxed);
                    // Every change told so far first: one made by hand during the hold stands,
                    // and is not given back over.
                    while let Ok(more) = self.rx.try_recv() {
                        asked.extend(self.note(more));
                    }
                    self.give_back();
                }
                Ok(Err(StoreError::Failed(why) | StoreError::Record(why))) => {
                    self.failed(&why);
                    return false;
                }
                Err(_) => {
                    self.failed("timed out");
                    return false;
                }
            }
        }
        if !self.subscribed {
            let limit = self.shared.config.timeout * 2;
            match tokio::time::timeout(limit, self.store.follow()).await {
                Ok(Ok(())) => {
                    // A store operation that succeeded, as `FleetStatus::connected` says: a
                    // pass with no record to read yet sets it by this one alone.
                    self.shared.connected.store(true, Ordering::Relaxed);
                    self.subscribed = true;
                }
                Ok(Err(StoreError::Failed(why) | StoreError::Record(why))) => self.failed(&why),
                Err(_) => self.failed("timed out"),
            }
            if !self.subscribed {
                return false;
            }
        }
        self.track_registry();
        if !self.flush().await {
            return false;
        }
        let mut read = self.read_all(&mut asked, full).await;
        // A resync asked for during a pass came after some records were read (a user who
        // overwrote one and then asked must see it read): it is answered by a whole pass
        // begun after it.
        let mut answered = Vec::new();
        while read && !asked.is_empty() {
            self.shared.resyncs.fetch_add(1, Ordering::Relaxed);
            let waiting = std::mem::take(&mut asked);
            read = self.read_all(&mut asked, true).await;
            answered.extend(waiting);
        }
        answered.extend(asked);
        // The families' open keys too before a resync is answered: a key made after it takes
        // on the state the fleet holds for it.
        let read = read && self.read_open_keys().await;
        for done in answered {
            let _ = done.send(read);
        }
        if !read {
            return false;
        }
        self.tracked.retain(|_, t| t.breaker.upgrade().is_some());
        self.shared
            .keyed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .prune();
        self.owed = false;
        self.shared.resyncs.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// The records a periodic pass reads: those not closed here or in the fleet's record, those
    /// with a change pending, vanished or never read, and the next `SWEEP` of the others in
    /// turn (so that a change that reached the store without its message is found within
    /// `⌈idle / SWEEP⌉` passes).
    ///
    /// A family key closed here and in the fleet's record is never read by a pass, full or
    /// not (`full`: every single breaker): the family's open keys stand for them
    /// (`read_open_keys`), so that no pass grows with the keys this instance holds.
    fn pass_names(&mut self, full: bool) -> Vec<String> {
        let mut due = Vec::new();
        let mut idle = Vec::new();
        for (name, t) in &self.tracked {
            let here = t.breaker.upgrade().map_or(State::Closed, |b| b.state());
            if !t.read
                || t.vanished
                || t.seen != State::Closed
                || here != State::Closed
                || self.pending.contains_key(name)
            {
                due.push(name.clone());
            } else if split_key(name).is_some() {
                // Closed everywhere it is known: its record expires, or a change of it is
                // published and listed among its family's open keys.
            } else if full {
                due.push(name.clone());
            } else {
                idle.push(name);
            }
        }
        if !idle.is_empty() {
            let from = self.sweep % idle.len();
            let take = SWEEP.min(idle.len());
            due.extend(
                idle.iter()
                    .cycle()
                    .skip(from)
                    .take(take)
                    .map(|n| (*n).clone()),
            );
            self.sweep = (from + take) % idle.len();
        }
        due.sort();
        due.dedup();
        due
    }

    /// Re-reads the tracked records (`full`: every one, else `pass_names`), `READ_BATCH`
    /// records a round trip (one pipeline of `TIME` and an `HMGET` per record; the first also
    /// carries this instance's heartbeat, if it beats). As in `step`, before each batch the local changes told meanwhile are
    /// written, so an older record never wins over them, and the records published meanwhile
    /// are taken on, so a change published during a long pass waits for one batch at most; a
    /// resync asked for meanwhile goes into `asked`, for the pass after.
    async fn read_all(&mut self, asked: &mut Vec<oneshot::Sender<bool>>, full: bool) -> bool {
        let names: Vec<String> = self.pass_names(full);
        let mut beat = self.beats();
        for batch in names.chunks(READ_BATCH) {
            while let Ok(more) = self.rx.try_recv() {
                asked.extend(self.note(more));
            }
            while let Some(event) = self.pushes.try_recv() {
                self.on_event(event);
            }
            if !self.flush().await {
                return false;
            }
            // A record in its backoff (`Task::troubled`) is skipped: the others are read.
            let due: Vec<&String> = batch.iter().filter(|n| !self.left_alone(n)).collect();
            if due.is_empty() {
                continue;
            }
            // The records and, once a pass, the instance's heartbeat, in one round trip.
            let names: Vec<String> = due.iter().map(|n| (*n).clone()).collect();
            let beating = core::mem::take(&mut beat);
            let beat_of = beating.then(|| self.beat_of());
            let seen: Vec<u64> = due
                .iter()
                .map(|n| self.tracked.get(*n).map_or(0, |t| t.applied))
                .collect();
            let limit = self.shared.config.timeout * 2;
            let sent = tokio::time::Instant::now();
            let reads = tokio::time::timeout(limit, self.store.read_many(names, beat_of)).await;
            let (replies, beat_reply) = match reads {
                Ok(Ok(Reads { records, beat })) => (records, beat),
                Ok(Err(StoreError::Failed(why) | StoreError::Record(why))) => {
                    self.failed(&why);
                    return false;
                }
                Err(_) => {
                    self.failed("timed out");
                    return false;
                }
            };
            if let Some(beat) = beat_reply {
                self.took_beat(beat, sent);
            }
            self.shared.connected.store(true, Ordering::Relaxed);
            // What was told while the batch was read is written first: those records were
            // read before it, and must not win over it.
            while let Ok(more) = self.rx.try_recv() {
                asked.extend(self.note(more));
            }
            if !self.flush().await {
                return false;
            }
            for ((name, reply), seen) in due.into_iter().zip(replies).zip(seen) {
                if self.tracked.get(name).map_or(0, |t| t.applied) != seen {
                    // Written or taken on since it was read: the read is older than that.
                    continue;
                }
                let answer = self.answered(Ok(reply));
                if matches!(answer, Answer::Done(_)) {
                    self.readable(name);
                }
                if !self.take_read(name, answer).await {
                    return false;
                }
            }
        }
        if beat {
            // No batch was sent (nothing to read, or all left alone): the beat on its own.
            return self.beat_now().await;
        }
        if !self.beats() {
            self.view_alone();
        }
        true
    }

    /// What one read of a pass found, taken on: a record that differs from the one last seen,
    /// a vanished one written again. `false` if the store failed meanwhile.
    async fn take_read(&mut self, name: &str, answer: Answer<Record>) -> bool {
        let record = match answer {
            Answer::Done(record) => {
                if let Some(t) = self.tracked.get_mut(name) {
                    t.read = true;
                }
                record
            }
            Answer::Unreadable(why) => {
                // An unreadable record is skipped: the pass goes on to the others.
                self.troubled(name, &why);
                return true;
            }
            Answer::Failed => return false,
        };
        let applied = self.tracked.get(name).map_or(0, |t| t.applied);
        // The record last taken on: open, and until when.
        let was_open = self
            .tracked
            .get(name)
            .filter(|t| t.seen == State::Open)
            .map(|t| t.open_until);
        if record.epoch == 0 {
            // No record: never written, or flushed. If there was one, a breaker that is not
            // closed here says so again, as a `cas` over "no record", so that of several
            // instances doing it at once one wins and the others take its record on.
            let mut vanished = false;
            if let Some(t) = self.tracked.get_mut(name) {
                vanished = applied != 0 || t.vanished;
                if applied != 0 {
                    *t = Tracked::new(t.breaker.clone());
                    // Until a record is seen or written again: a write below that fails (the
                    // store, a foreign value) is tried again by the next pass.
                    t.vanished = true;
                }
            }
            if split_key(name).is_some() {
                // A family key's record expired, as they do (keys.rs): one closed here has
                // nothing to say again, and is not read again until it changes.
                self.know(name, &record);
                let closed = self
                    .tracked
                    .get(name)
                    .and_then(|t| t.breaker.upgrade())
                    .is_none_or(|b| b.state() == State::Closed);
                if let Some(t) = self.tracked.get_mut(name).filter(|_| closed) {
                    t.vanished = false;
                    t.read = true;
                    return true;
                }
                // One open here only by the open record that expired, its open time long run
                // (the record outlives it by a probe timeout and `key_ttl`), and with no
                // change of its own to write: the fleet has nothing more to say of it. Written
                // again, it would keep the record alive for as long as no call comes to probe
                // it; instead it decides alone, its next call a probe.
                let ran_out =
                    was_open.is_some_and(|until| until.is_none_or(|u| u <= Instant::now()));
                if ran_out
                    && !self.pending.contains_key(name)
                    && let Some(b) = self.tracked.get(name).and_then(|t| t.breaker.upgrade())
                    && b.state() == State::Open
                {
                    if let Some(t) = self.tracked.get_mut(name) {
                        t.vanished = false;
                        t.read = true;
                    }
                    b.set_probe_budget(None);
                    let reopens = b.held_state().reopens;
                    self.import_own(
                        name,
                        &b,
                        &SharedState::new(State::Open, Some(Duration::ZERO), reopens),
                    );
                    return true;
                }
            }
            if !vanished {
                // Never seen one: a change made here is written by its own pending write.
                return true;
            }
            let Some(breaker) = self.breaker(name) else {
                return true;
            };
            const AGAIN: &str = "written again: the record had vanished";
            let pushed = match breaker.state() {
                // Under a quorum, an open breaker reports again (its report vanished too).
                State::Open if self.quorum_of(name).is_some() => {
                    self.push(name, Intent::Report, AGAIN.to_owned(), false)
                        .await
                }
                s @ (State::Open | State::ForcedOpen | State::Disabled) => {
                    self.push(name, Intent::Again(s), AGAIN.to_owned(), false)
                        .await
                }
                _ => Pushed::Done,
            };
            return !matches!(pushed, Pushed::Failed);
        }
        if record.epoch != applied {
            self.apply(name, &record);
        }
        true
    }

    /// Reads every shared family's open keys (keys.rs): one command a family, in one round
    /// trip, whatever the number of keys. A key listed that the fleet's book does not hold (its
    /// message was lost) has its record read and taken on; a key the book holds that is no
    /// longer listed (its record closed or expired, and that message lost) is forgotten. A
    /// key's breaker held here other than closed is re-read by every pass besides
    /// (`pass_names`). `false` if the store failed.
    async fn read_open_keys(&mut self) -> bool {
        let families: Vec<String> = breakerbox_runtime::__integrations::family_names()
            .iter()
            .filter_map(|f| self.shared.shared_family(f).map(str::to_owned))
            .collect();
        if families.is_empty() {
            return true;
        }
        let limit = self.shared.config.timeout * 2;
        let sent = tokio::time::Instant::now();
        let reply = tokio::time::timeout(limit, self.store.open_keys(families.clone())).await;
        let Answer::Done(OpenKeys { now_ms, lists }) = self.answered(reply) else {
            return false;
        };
        let mut unknown = Vec::new();
        let mut stale = Vec::new();
        for (family, listed) in families.iter().zip(lists) {
            // A value of another type there: this family's keys are read as tracked only.
            let Some(listed) = listed else {
                continue;
            };
            let mut open = std::collections::BTreeSet::new();
            for (key, expires) in listed {
                if expires <= now_ms as f64 {
                    stale.push(family.clone());
                    continue;
                }
                open.insert(key_name(family, &key));
            }
            let mut book = self.shared.keyed.lock().unwrap_or_else(|e| e.into_inner());
            book.keep_open(family, &open, sent);
            unknown.extend(open.into_iter().filter(|n| !book.holds(n)));
        }
        stale.dedup();
        if stale.is_empty() && unknown.is_empty() {
            return true;
        }
        // Keys whose record expired are dropped from the list, as the next write would; the
        // records of keys listed that the book does not hold are read.
        let reply =
            tokio::time::timeout(limit, self.store.tidy(stale, now_ms, unknown.clone())).await;
        let records = match reply {
            Ok(Ok(records)) => records,
            Ok(Err(StoreError::Failed(why) | StoreError::Record(why))) => {
                self.failed(&why);
                return false;
            }
            Err(_) => {
                self.failed("timed out");
                return false;
            }
        };
        for (name, record) in unknown.iter().zip(records) {
            if let Ok(record) = record
                && record.epoch > self.tracked.get(name).map_or(0, |t| t.applied)
            {
                self.apply(name, &record);
            }
        }
        true
    }
}
