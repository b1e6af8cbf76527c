//! The periodic re-read: pub/sub loses what is published while a connection is down, so after
//! every disconnection or failure (within 100 ms) the task subscribes if it must, writes what
//! is pending and reads every shared record again. Every `resync_every` besides, it reads the
//! records that need it (not closed here or in the fleet, pending, new) and `SWEEP` idle ones
//! in turn, and beats once for the instance if it shares a breaker under a quorum: an idle
//! instance's commands do not grow with the number of breakers it shares.

use std::sync::atomic::Ordering;

use tokio::sync::oneshot;

use super::state::{Answer, Intent, Pushed, READ_BATCH, SWEEP, Task, Tracked};
use crate::keys::{key_name, open_set_key, split_key};
use crate::record::{READ_FIELDS, Record};
use crate::store::{FleetStore, StoreError};
use breakerbox_runtime::State;

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
                Ok(Ok(())) => self.subscribed = true,
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
        while read && !asked.is_empty() {
            self.shared.resyncs.fetch_add(1, Ordering::Relaxed);
            let waiting = std::mem::take(&mut asked);
            read = self.read_all(&mut asked, true).await;
            for done in waiting {
                let _ = done.send(read);
            }
        }
        for done in asked {
            let _ = done.send(read);
        }
        if !read || !self.read_open_keys().await {
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
            while let Ok(push) = self.pushes.try_recv() {
                self.on_push(push);
            }
            if !self.flush().await {
                return false;
            }
            // A record in its backoff (`Task::troubled`) is skipped: the others are read.
            let due: Vec<&String> = batch.iter().filter(|n| !self.left_alone(n)).collect();
            if due.is_empty() {
                continue;
            }
            // `TIME`, then each record's fields: plain commands, one round trip, no script
            // (what `record.lua` does in `read` mode, for a batch).
            let mut commands = vec![vec!["TIME".to_owned()]];
            for name in &due {
                let mut hmget = vec!["HMGET".to_owned(), self.key(name)];
                hmget.extend(READ_FIELDS.iter().map(|f| (*f).to_owned()));
                commands.push(hmget);
            }
            // And the instance's heartbeat (`heartbeat.lua` by its hash, as a plain `EVALSHA`),
            // once a pass, in the same round trip (quorum.rs).
            let beating = core::mem::take(&mut beat);
            if beating {
                commands.push(self.beat_command());
            }
            let seen: Vec<u64> = due
                .iter()
                .map(|n| self.tracked.get(*n).map_or(0, |t| t.applied))
                .collect();
            let limit = self.shared.config.timeout * 2;
            let sent = tokio::time::Instant::now();
            let mut replies = match tokio::time::timeout(limit, self.store.wire.pipeline(commands))
                .await
            {
                Ok(Ok(mut replies)) if replies.len() == due.len() + 1 + usize::from(beating) => {
                    if beating && let Some(reply) = replies.pop() {
                        self.took_beat(reply, sent).await;
                    }
                    replies.into_iter()
                }
                Ok(Ok(_)) => {
                    self.failed("a pipeline's replies do not match its commands");
                    return false;
                }
                Ok(Err(e)) => {
                    self.failed(&e.to_string());
                    return false;
                }
                Err(_) => {
                    self.failed("timed out");
                    return false;
                }
            };
            let now_ms = match replies.next().map(|t| {
                t.and_then(|v| redis::from_redis_value::<(u64, u64)>(v).map_err(Into::into))
            }) {
                Some(Ok((secs, micros))) => secs * 1000 + micros / 1000,
                Some(Err(e)) => {
                    self.failed(&e.to_string());
                    return false;
                }
                None => return false,
            };
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
                let answer = match self.answer_of::<Vec<Option<String>>>(reply) {
                    Answer::Done(fields) => match Record::from_hash(now_ms, &fields) {
                        Some(record) => {
                            self.readable(name);
                            Answer::Done(record)
                        }
                        None => Answer::Unreadable(
                            "a record this instance cannot read (another version's?)".to_owned(),
                        ),
                    },
                    Answer::Unreadable(why) => Answer::Unreadable(why),
                    Answer::Failed => Answer::Failed,
                };
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
            .into_iter()
            .filter(|f| self.shared.config.shares(f))
            .collect();
        if families.is_empty() {
            return true;
        }
        let prefix = self.shared.config.prefix.clone();
        let mut commands = vec![vec!["TIME".to_owned()]];
        for family in &families {
            commands.push(
                [
                    "ZRANGE",
                    &open_set_key(&prefix, family),
                    "0",
                    "-1",
                    "WITHSCORES",
                ]
                .map(str::to_owned)
                .to_vec(),
            );
        }
        let sent = tokio::time::Instant::now();
        let Some(mut replies) = self.round_trip(commands).await else {
            return false;
        };
        let now_ms = match replies
            .remove(0)
            .and_then(|t| redis::from_redis_value::<(u64, u64)>(t).map_err(Into::into))
        {
            Ok((secs, micros)) => secs * 1000 + micros / 1000,
            Err(e) => {
                self.failed(&e.to_string());
                return false;
            }
        };
        let mut unknown = Vec::new();
        let mut stale = Vec::new();
        for (family, reply) in families.iter().zip(replies) {
            // A value of another type there: this family's keys are read as tracked only.
            let Ok(listed) = reply
                .and_then(|v| redis::from_redis_value::<Vec<(String, f64)>>(v).map_err(Into::into))
            else {
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
        let mut commands = vec![vec!["TIME".to_owned()]];
        for family in &stale {
            // Keys whose record expired: dropped from the list, as the next write would.
            commands.push(vec![
                "ZREMRANGEBYSCORE".to_owned(),
                open_set_key(&prefix, family),
                "-inf".to_owned(),
                now_ms.to_string(),
            ]);
        }
        let first = commands.len();
        for name in &unknown {
            let mut hmget = vec!["HMGET".to_owned(), self.key(name)];
            hmget.extend(READ_FIELDS.iter().map(|f| (*f).to_owned()));
            commands.push(hmget);
        }
        if commands.len() == 1 {
            return true;
        }
        let Some(replies) = self.round_trip(commands).await else {
            return false;
        };
        let mut replies = replies.into_iter();
        let now_ms = match replies
            .next()
            .map(|t| t.and_then(|v| redis::from_redis_value::<(u64, u64)>(v).map_err(Into::into)))
        {
            Some(Ok((secs, micros))) => secs * 1000 + micros / 1000,
            _ => return true,
        };
        for (name, reply) in unknown.iter().zip(replies.skip(first - 1)) {
            let Ok(fields) = reply.and_then(|v| {
                redis::from_redis_value::<Vec<Option<String>>>(v).map_err(Into::into)
            }) else {
                continue;
            };
            if let Some(record) = Record::from_hash(now_ms, &fields)
                && record.epoch > self.tracked.get(name).map_or(0, |t| t.applied)
            {
                self.apply(name, &record);
            }
        }
        true
    }

    /// `commands` in one round trip, bounded by the task's limit: each one's reply, or `None`
    /// once the store failed (`failed` has run).
    async fn round_trip(
        &mut self,
        commands: Vec<Vec<String>>,
    ) -> Option<Vec<redis::RedisResult<redis::Value>>> {
        let n = commands.len();
        let limit = self.shared.config.timeout * 2;
        match tokio::time::timeout(limit, self.store.wire.pipeline(commands)).await {
            Ok(Ok(replies)) if replies.len() == n => Some(replies),
            Ok(Ok(_)) => {
                self.failed("a pipeline's replies do not match its commands");
                None
            }
            Ok(Err(e)) => {
                self.failed(&e.to_string());
                None
            }
            Err(_) => {
                self.failed("timed out");
                None
            }
        }
    }
}
