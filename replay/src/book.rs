//! The journal's bookkeeping, the same in memory and on disk: entries in the order they were
//! journaled, their keys, their bytes, their attempts, and the dead letters. Pure data, no I/O
//! and no user code: a journal holds it under its lock, and does everything else outside.
//!
//! Every change is also returned as a [`Change`], which the disk journal writes to its
//! database.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use crate::config::{ReplayConfig, WhenFull};
use crate::journal::{EntryInfo, JournalCounts, NotJournaled, Pushed, Settled};

/// One entry.
#[derive(Debug)]
pub(crate) struct Slot<P> {
    pub(crate) key: Option<Box<str>>,
    /// `None` while a replay has taken the memory journal's arguments out to copy them.
    pub(crate) payload: Option<P>,
    pub(crate) bytes: usize,
    pub(crate) enqueued: Duration,
    pub(crate) attempts: u32,
    pub(crate) next_try: Duration,
    pub(crate) in_flight: bool,
}

/// A change to the book, as the disk journal writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// This entry was added (its contents are in the book).
    Put(u64),
    /// This queued entry is gone: replayed, expired or dropped.
    Remove(u64),
    /// This entry's replay failed: its attempts and next try as in the book.
    Retry(u64),
    /// This entry moved to the dead letters.
    Dead(u64),
    /// This dead letter went back to the queue, its attempts at 0.
    Revive(u64),
    /// This dead letter was dropped.
    Forget(u64),
}

/// What [`Book::take`] found.
pub(crate) enum BookTake {
    /// The oldest due entry, now in flight.
    Due(u64),
    /// Nothing due before this time.
    Wait(Duration),
    /// Nothing queued (or all of it in flight).
    Empty,
}

pub(crate) struct Book<P> {
    config: ReplayConfig,
    queue: BTreeMap<u64, Slot<P>>,
    /// The queued entries by when they were journaled (a revived dead letter keeps its id but
    /// is journaled anew, so this order is not the ids').
    by_time: BTreeSet<(Duration, u64)>,
    keys: HashMap<Box<str>, u64>,
    bytes: usize,
    dead: BTreeMap<u64, Slot<P>>,
    next_id: u64,
    pub(crate) counts: JournalCounts,
}

/// What one operation changed, and the payloads it removed: the caller drops those after
/// unlocking (a payload's `Drop` is user code).
pub(crate) struct Done<P> {
    pub(crate) changes: Vec<Change>,
    pub(crate) removed: Vec<P>,
    pub(crate) counts: JournalCounts,
}

impl<P> Default for Done<P> {
    fn default() -> Self {
        Done {
            changes: Vec::new(),
            removed: Vec::new(),
            counts: JournalCounts::default(),
        }
    }
}

impl<P> Book<P> {
    pub(crate) fn new(config: ReplayConfig) -> Self {
        Book {
            config,
            queue: BTreeMap::new(),
            by_time: BTreeSet::new(),
            keys: HashMap::new(),
            bytes: 0,
            dead: BTreeMap::new(),
            next_id: 1,
            counts: JournalCounts::default(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn dead_len(&self) -> usize {
        self.dead.len()
    }

    pub(crate) fn slot_mut(&mut self, id: u64) -> Option<&mut Slot<P>> {
        self.queue.get_mut(&id)
    }

    /// The oldest queued entry's time of journaling.
    pub(crate) fn oldest(&self) -> Option<Duration> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Queues `slot` as entry `id`.
    fn enqueue(&mut self, id: u64, slot: Slot<P>) {
        if let Some(key) = &slot.key {
            self.keys.insert(key.clone(), id);
        }
        self.bytes += slot.bytes;
        self.by_time.insert((slot.enqueued, id));
        self.queue.insert(id, slot);
    }

    /// Takes entry `id` out of the queue, freeing its key and bytes.
    fn dequeue(&mut self, id: u64) -> Option<Slot<P>> {
        let slot = self.queue.remove(&id)?;
        self.bytes -= slot.bytes;
        self.by_time.remove(&(slot.enqueued, id));
        if let Some(key) = &slot.key
            && self.keys.get(key) == Some(&id)
        {
            self.keys.remove(key);
        }
        Some(slot)
    }

    fn finish(&mut self, done: &mut Done<P>) {
        self.counts.add(&done.counts);
    }

    /// Removes a queued entry, freeing its key and bytes.
    fn remove(&mut self, id: u64, done: &mut Done<P>) -> Option<Slot<P>> {
        let mut slot = self.dequeue(id)?;
        done.changes.push(Change::Remove(id));
        if let Some(payload) = slot.payload.take() {
            done.removed.push(payload);
        }
        Some(slot)
    }

    /// Removes the queued entries older than the TTL, oldest first; entries in flight stay
    /// until their replay ends.
    fn expire(&mut self, now: Duration, done: &mut Done<P>) {
        let ttl = self.config.ttl;
        let expired: Vec<u64> = self
            .by_time
            .iter()
            .take_while(|(at, _)| at.saturating_add(ttl) <= now)
            .map(|(_, id)| *id)
            .filter(|id| self.queue.get(id).is_some_and(|slot| !slot.in_flight))
            .collect();
        for id in expired {
            self.remove(id, done);
            done.counts.expired += 1;
        }
    }

    /// Journals an entry of `bytes` bytes, or finds the queued one of the same key.
    pub(crate) fn push(
        &mut self,
        key: Option<Box<str>>,
        payload: P,
        bytes: usize,
        now: Duration,
    ) -> (Result<Pushed, NotJournaled>, Done<P>) {
        let mut done = Done::default();
        self.expire(now, &mut done);
        let result = self.push_now(key, payload, bytes, now, &mut done);
        self.finish(&mut done);
        (result, done)
    }

    fn push_now(
        &mut self,
        key: Option<Box<str>>,
        payload: P,
        bytes: usize,
        now: Duration,
        done: &mut Done<P>,
    ) -> Result<Pushed, NotJournaled> {
        if let Some(key) = &key
            && let Some(&id) = self.keys.get(key)
        {
            done.counts.deduplicated += 1;
            done.removed.push(payload);
            return Ok(Pushed::Duplicate(id));
        }
        let refuse = |done: &mut Done<P>, payload: P, why: NotJournaled| {
            done.counts.refused += 1;
            done.removed.push(payload);
            Err(why)
        };
        if bytes > self.config.max_bytes {
            return refuse(done, payload, NotJournaled::TooLarge);
        }
        while self.queue.len() >= self.config.max_entries
            || self.bytes + bytes > self.config.max_bytes
        {
            let oldest = self
                .queue
                .iter()
                .find(|(_, slot)| !slot.in_flight)
                .map(|(id, _)| *id);
            match (self.config.when_full, oldest) {
                (WhenFull::DropOldest, Some(id)) => {
                    self.remove(id, done);
                    done.counts.dropped += 1;
                }
                _ => return refuse(done, payload, NotJournaled::Full),
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        self.enqueue(
            id,
            Slot {
                key,
                payload: Some(payload),
                bytes,
                enqueued: now,
                attempts: 0,
                next_try: now,
                in_flight: false,
            },
        );
        done.changes.push(Change::Put(id));
        done.counts.queued += 1;
        Ok(Pushed::New(id))
    }

    /// Marks the oldest due entry in flight.
    pub(crate) fn take(&mut self, now: Duration) -> (BookTake, Done<P>) {
        let mut done = Done::default();
        self.expire(now, &mut done);
        self.finish(&mut done);
        let mut wait: Option<Duration> = None;
        for (id, slot) in &mut self.queue {
            if slot.in_flight {
                continue;
            }
            if slot.next_try <= now {
                slot.in_flight = true;
                return (BookTake::Due(*id), done);
            }
            wait = Some(wait.map_or(slot.next_try, |w| w.min(slot.next_try)));
        }
        (wait.map_or(BookTake::Empty, BookTake::Wait), done)
    }

    /// Ends the replay of entry `id`, taken by [`take`](Book::take).
    pub(crate) fn settle(&mut self, id: u64, how: Settled, now: Duration) -> Done<P> {
        let mut done = Done::default();
        match how {
            Settled::Replayed => {
                if self.remove(id, &mut done).is_some() {
                    done.counts.replayed += 1;
                }
            }
            Settled::NotRun => {
                if let Some(slot) = self.queue.get_mut(&id) {
                    slot.in_flight = false;
                }
            }
            Settled::Failed => {
                let attempts_allowed = self.config.attempts;
                let Some(slot) = self.queue.get_mut(&id) else {
                    return done;
                };
                slot.in_flight = false;
                slot.attempts = slot.attempts.saturating_add(1);
                done.counts.failed += 1;
                if slot.attempts >= attempts_allowed {
                    self.bury(id, &mut done);
                } else {
                    slot.next_try = now.saturating_add(self.config.backoff_after(slot.attempts));
                    done.changes.push(Change::Retry(id));
                }
            }
        }
        self.finish(&mut done);
        done
    }

    /// Moves a queued entry to the dead letters, dropping the oldest dead letter beyond
    /// `max_entries`.
    fn bury(&mut self, id: u64, done: &mut Done<P>) {
        let Some(mut slot) = self.dequeue(id) else {
            return;
        };
        slot.in_flight = false;
        self.dead.insert(id, slot);
        done.changes.push(Change::Dead(id));
        done.counts.dead_lettered += 1;
        while self.dead.len() > self.config.max_entries {
            if let Some((old, mut slot)) = self.dead.pop_first() {
                done.changes.push(Change::Forget(old));
                done.removed.extend(slot.payload.take());
                done.counts.dropped += 1;
            }
        }
    }

    /// Every dead letter back to the queue, its attempts at 0, due now; those that no longer
    /// fit (the queue's bounds, a key queued meanwhile) stay dead. How many went back.
    pub(crate) fn revive_dead(&mut self, now: Duration) -> (usize, Done<P>) {
        let mut done = Done::default();
        let ids: Vec<u64> = self.dead.keys().copied().collect();
        let mut revived = 0;
        for id in ids {
            let fits = {
                let slot = &self.dead[&id];
                self.queue.len() < self.config.max_entries
                    && self.bytes + slot.bytes <= self.config.max_bytes
                    && slot.key.as_ref().is_none_or(|k| !self.keys.contains_key(k))
            };
            if !fits {
                continue;
            }
            let Some(mut slot) = self.dead.remove(&id) else {
                continue;
            };
            slot.attempts = 0;
            slot.next_try = now;
            slot.enqueued = now;
            self.enqueue(id, slot);
            done.changes.push(Change::Revive(id));
            revived += 1;
        }
        (revived, done)
    }

    /// Drops every dead letter. How many.
    pub(crate) fn forget_dead(&mut self) -> (usize, Done<P>) {
        let mut done = Done::default();
        let dead = std::mem::take(&mut self.dead);
        let n = dead.len();
        for (id, mut slot) in dead {
            done.changes.push(Change::Forget(id));
            done.removed.extend(slot.payload.take());
        }
        (n, done)
    }

    pub(crate) fn dead_letters(&self) -> Vec<EntryInfo> {
        self.dead.iter().map(|(id, slot)| info(*id, slot)).collect()
    }

    pub(crate) fn entries(&self) -> Vec<EntryInfo> {
        self.queue
            .iter()
            .map(|(id, slot)| info(*id, slot))
            .collect()
    }
    // For the disk journal.

    /// An entry read back from the database: queued, or a dead letter (`dead`).
    pub(crate) fn restore(&mut self, id: u64, slot: Slot<P>, dead: bool) {
        self.next_id = self.next_id.max(id.saturating_add(1));
        if dead {
            self.dead.insert(id, slot);
        } else {
            self.enqueue(id, slot);
        }
    }

    /// Drops a queued entry that cannot be replayed (damaged on disk), counted `dropped`.
    pub(crate) fn drop_entry(&mut self, id: u64) -> Done<P> {
        let mut done = Done::default();
        if self.remove(id, &mut done).is_some() {
            done.counts.dropped += 1;
        }
        self.finish(&mut done);
        done
    }

    /// Takes back the entry a push just put (its write failed); the caller takes back its
    /// counts.
    pub(crate) fn unput(&mut self, id: u64) {
        self.dequeue(id);
    }

    /// A queued or dead entry.
    pub(crate) fn slot(&self, id: u64) -> Option<&Slot<P>> {
        self.queue.get(&id).or_else(|| self.dead.get(&id))
    }
}

fn info<P>(id: u64, slot: &Slot<P>) -> EntryInfo {
    EntryInfo {
        id,
        key: slot.key.as_deref().map(str::to_owned),
        enqueued: slot.enqueued,
        attempts: slot.attempts,
        next_try: slot.next_try,
        bytes: slot.bytes,
    }
}
