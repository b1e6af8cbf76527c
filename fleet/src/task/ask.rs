//! How the task runs an operation against the store, and what the answer means for one
//! breaker: the store's failure (counted, a re-read owed), or that breaker's own trouble (left
//! alone, with backoff, while the others go on).

use core::time::Duration;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::state::{Answer, TROUBLE_FIRST, TROUBLE_MAX, Task, Trouble};
use breakerbox_runtime::State;

use crate::keys::{shown, split_key};
use crate::record::Record;
use crate::store::{Change, StoreError};

impl Task {
    /// Reads `name`'s record.
    pub(super) async fn read_record(&mut self, name: &str) -> Answer<Record> {
        self.invoke(name, None).await
    }

    /// Writes `change` to `name`'s record (a change as `change_of` makes it). A write of a
    /// family key's record (keys.rs) also gives it its life in the store and keeps the
    /// family's open keys.
    pub(super) async fn write_record(&mut self, name: &str, change: Change) -> Answer<Record> {
        self.invoke(name, Some(change)).await
    }

    async fn invoke(&mut self, name: &str, change: Option<Change>) -> Answer<Record> {
        let limit = self.shared.config.timeout * 2;
        let op = match change {
            Some(change) => self.store.write(name.to_owned(), change),
            None => self.store.read(name.to_owned()),
        };
        let reply = tokio::time::timeout(limit, op).await;
        let answer = self.answered(reply);
        if matches!(answer, Answer::Done(_)) {
            self.readable(name);
        }
        answer
    }

    /// A change of `name`'s record to `state` by this instance: forced (manual control), or
    /// a compare-and-set over the epoch `seen`; open for `open_ms` (an open state only). A
    /// family key's change carries its life in the store (`key_ttl`).
    #[expect(
        clippy::too_many_arguments,
        reason = "a record's fields, each named at the call"
    )]
    pub(super) fn change_of(
        &self,
        name: &str,
        force: bool,
        seen: u64,
        state: State,
        open_ms: u64,
        reopens: u32,
        reason: String,
        last_failure: String,
    ) -> Change {
        Change {
            force,
            seen,
            state,
            open_ms,
            reopens,
            reason,
            last_failure,
            instance: self.shared.instance.clone(),
            life: split_key(name).map(|_| self.key_ttl(name, state, open_ms)),
        }
    }

    /// A store operation's result, bounded by the task's limit, as an answer about its
    /// breaker: the store's failure or timeout (`failed`: it counts, and owes a full
    /// re-read), or an error about this breaker's keys or a reply this instance cannot read
    /// (`Answer::Unreadable`, for the caller to pass to `troubled`).
    pub(super) fn answered<T>(
        &mut self,
        reply: Result<Result<T, StoreError>, tokio::time::error::Elapsed>,
    ) -> Answer<T> {
        match reply {
            Ok(Ok(reply)) => {
                self.shared.connected.store(true, Ordering::Relaxed);
                Answer::Done(reply)
            }
            Ok(Err(StoreError::Record(why))) => {
                self.shared.connected.store(true, Ordering::Relaxed);
                Answer::Unreadable(why)
            }
            Ok(Err(StoreError::Failed(why))) => {
                self.failed(&why);
                Answer::Failed
            }
            Err(_) => {
                self.failed("timed out");
                Answer::Failed
            }
        }
    }

    /// How long a family key's record written as `state` (`open` for `open_ms`) lives in the
    /// store: `key_ttl` after it closes, or after its open time and probe timeout have run;
    /// zero (for ever) while forced open or disabled, until a reset. Never less than three
    /// re-reads: an instance that holds the key open and missed the message of its close
    /// reads the closed record before it expires (a record that vanishes under an open
    /// breaker is written again). At most `LONGEST_LIFE`, a life the store can count.
    pub(super) fn key_ttl(&self, name: &str, state: State, open_ms: u64) -> Duration {
        let config = &self.shared.config;
        let ttl = config.key_ttl.max(config.resync_every * 3);
        let life = match state {
            State::Open => {
                let probe = self
                    .tracked
                    .get(name)
                    .and_then(|t| t.breaker.upgrade())
                    .map_or(Duration::ZERO, |b| b.config().probe_timeout());
                Duration::from_millis(open_ms)
                    .saturating_add(probe)
                    .saturating_add(ttl)
            }
            State::Closed => ttl,
            _ => Duration::ZERO,
        };
        life.min(crate::config::LONGEST_LIFE)
    }

    /// The store answered about `name`'s keys with an error, or with what this instance cannot
    /// read: a value of another type left there by another application or version, a hash
    /// whose fields are not a record's. That is this breaker's problem only: it is left alone
    /// (its pending change kept, its record not read) for a backoff that doubles up to
    /// `TROUBLE_MAX`, then tried again, while every other breaker goes on as before.
    pub(super) fn troubled(&mut self, name: &str, why: &str) {
        let key = self.key(name);
        let Some(t) = self.tracked.get_mut(name) else {
            return;
        };
        let backoff = t
            .trouble
            .map_or(TROUBLE_FIRST, |t| (t.backoff * 2).min(TROUBLE_MAX));
        if t.trouble.is_none() {
            let name = shown(name);
            tracing::warn!(target: "breakerbox", name, key, why, "fleet: the store holds what this instance cannot read under this breaker's key; this breaker is not shared until it can (tried again with backoff), the others go on");
        }
        t.trouble = Some(Trouble {
            retry_at: Instant::now() + backoff,
            backoff,
        });
    }

    /// The store answered about `name` with a record this instance reads.
    pub(super) fn readable(&mut self, name: &str) {
        if let Some(t) = self.tracked.get_mut(name)
            && t.trouble.take().is_some()
        {
            tracing::info!(target: "breakerbox", name, "fleet: this breaker's record reads again; shared as before");
        }
    }

    /// Whether `name` is left alone for now (`troubled`).
    pub(super) fn left_alone(&self, name: &str) -> bool {
        self.tracked
            .get(name)
            .and_then(|t| t.trouble)
            .is_some_and(|t| Instant::now() < t.retry_at)
    }

    /// The store's change feed closed: said once, as a store error; the task goes on, and reads
    /// every record again now and at each `resync_every`, which is how other instances'
    /// changes arrive from now on.
    pub(super) fn on_feed_closed(&mut self) {
        const WHY: &str = "the store's change feed closed: other instances' changes arrive by \
                           the re-reads every resync_every alone";
        tracing::error!(target: "breakerbox", "fleet: {WHY}");
        self.feed_closed = true;
        self.shared.store_errors.fetch_add(1, Ordering::Relaxed);
        *self
            .shared
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(WHY.to_owned());
        self.owed = true;
    }

    pub(super) fn failed(&mut self, why: &str) {
        if self.shared.connected.swap(false, Ordering::Relaxed) {
            tracing::warn!(target: "breakerbox", "fleet: the store failed ({why}); breakers decide locally until it answers");
        }
        self.shared.store_errors.fetch_add(1, Ordering::Relaxed);
        *self
            .shared
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(why.to_owned());
        self.owed = true;
        self.hold();
    }
}
