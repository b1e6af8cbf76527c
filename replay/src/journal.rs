//! [`Journal`]: where rejected calls wait to be replayed, and the vocabulary it shares with
//! the replayer.

use core::fmt;
use core::time::Duration;

/// What [`Journal::push`] did with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// A new entry, with this id.
    New(u64),
    /// An entry of the same key was queued already (this id): it stands for both calls, and
    /// the new call's arguments are dropped.
    Duplicate(u64),
}

impl Pushed {
    /// The entry's id.
    pub fn id(self) -> u64 {
        match self {
            Pushed::New(id) | Pushed::Duplicate(id) => id,
        }
    }
}

/// Why a call was not journaled; the caller gets a plain rejection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotJournaled {
    /// The journal is at `max_entries` or `max_bytes` and refuses new entries
    /// ([`WhenFull::RefuseNew`](crate::WhenFull::RefuseNew)).
    #[error("the replay journal is full")]
    Full,
    /// The entry alone is larger than `max_bytes`.
    #[error("the call's arguments are larger than the replay journal's max_bytes")]
    TooLarge,
    /// The arguments could not be encoded (the disk journal).
    #[error("the call's arguments could not be encoded: {0}")]
    Encode(String),
    /// The journal could not make the entry durable (the disk journal).
    #[error("the replay journal could not write the entry: {0}")]
    Io(#[from] std::io::Error),
    /// The journal's store failed or did not answer in time (the fleet journal): the reason.
    #[error("{0}")]
    Store(String),
    /// The arguments' `Clone` or `Serialize`, or the key, panicked.
    #[error("the call's arguments or key panicked while being journaled")]
    Panicked,
}

/// Why a journal operation did not complete: the journal's store failed or did not answer in
/// time (the fleet journal's Redis). Its text says which journal, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// An entry as the journal describes it (its arguments aside).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EntryInfo {
    /// Its id: entries are replayed in the order of their ids.
    pub id: u64,
    /// Its `replay_key`, if it has one.
    pub key: Option<String>,
    /// When it was journaled, on the journal's clock.
    pub enqueued: Duration,
    /// How many of its replays failed.
    pub attempts: u32,
    /// When it may be tried next, on the journal's clock.
    pub next_try: Duration,
    /// What it weighs against `max_bytes`.
    pub bytes: usize,
}

/// What happened to entries, counted since the journal was made (a disk journal's counts
/// start over at each start).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalCounts {
    /// Calls journaled as new entries.
    pub queued: u64,
    /// Calls whose key was queued already: one entry stands for them.
    pub deduplicated: u64,
    /// Entries replayed successfully (and removed).
    pub replayed: u64,
    /// Replays that failed (or panicked).
    pub failed: u64,
    /// Entries moved to the dead letters after `attempts` failures.
    pub dead_lettered: u64,
    /// Entries removed unreplayed after `ttl`.
    pub expired: u64,
    /// Entries dropped for room ([`WhenFull::DropOldest`](crate::WhenFull::DropOldest), and
    /// the oldest dead letters beyond `max_entries`).
    pub dropped: u64,
    /// Calls a full journal refused ([`WhenFull::RefuseNew`](crate::WhenFull::RefuseNew)), or
    /// could not take (too large, not encodable, not written).
    pub refused: u64,
}

impl JournalCounts {
    pub(crate) fn add(&mut self, other: &JournalCounts) {
        self.queued += other.queued;
        self.deduplicated += other.deduplicated;
        self.replayed += other.replayed;
        self.failed += other.failed;
        self.dead_lettered += other.dead_lettered;
        self.expired += other.expired;
        self.dropped += other.dropped;
        self.refused += other.refused;
    }

    /// Takes back counts `add` added (never below zero).
    pub(crate) fn sub(&mut self, other: &JournalCounts) {
        self.queued = self.queued.saturating_sub(other.queued);
        self.deduplicated = self.deduplicated.saturating_sub(other.deduplicated);
        self.replayed = self.replayed.saturating_sub(other.replayed);
        self.failed = self.failed.saturating_sub(other.failed);
        self.dead_lettered = self.dead_lettered.saturating_sub(other.dead_lettered);
        self.expired = self.expired.saturating_sub(other.expired);
        self.dropped = self.dropped.saturating_sub(other.dropped);
        self.refused = self.refused.saturating_sub(other.refused);
    }
}

/// A journal's size and counts now.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JournalStatus {
    /// Queued entries.
    pub entries: usize,
    /// Their bytes.
    pub bytes: usize,
    /// When the oldest queued entry was journaled, on the journal's clock.
    pub oldest: Option<Duration>,
    /// Dead letters.
    pub dead_letters: usize,
    /// What happened to entries so far.
    pub counts: JournalCounts,
}

/// What [`Journal::take`] found.
pub enum Take<A> {
    /// The oldest due entry, whose replay must be [settled](Journal::settle).
    Due(Taken<A>),
    /// Nothing is due before this time (on the journal's clock).
    Wait(Duration),
    /// Nothing is queued.
    Empty,
}

impl<A> fmt::Debug for Take<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Take::Due(taken) => f.debug_tuple("Due").field(&taken.id).finish(),
            Take::Wait(at) => f.debug_tuple("Wait").field(at).finish(),
            Take::Empty => f.write_str("Empty"),
        }
    }
}

/// An entry taken for a replay: its id and a copy of its arguments.
pub struct Taken<A> {
    /// The entry's id.
    pub id: u64,
    /// Its `replay_key`, if it has one.
    pub key: Option<String>,
    /// Failed replays so far.
    pub attempts: u32,
    /// The arguments to replay the call with.
    pub args: A,
}

/// How a replay ended, as told to [`Journal::settle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settled {
    /// It ran and succeeded: the entry is removed.
    Replayed,
    /// It ran and failed (or panicked): tried again after a backoff, or dead-lettered.
    Failed,
    /// It did not run (the breaker refused it): the entry is queued as it was.
    NotRun,
}

/// Where rejected calls wait: in memory ([`MemoryJournal`](crate::MemoryJournal)), or a
/// journal of your own.
///
/// Entries are replayed in the order they were journaled (of their ids). A journal runs no
/// user code under its lock: the arguments' `Clone`, `Drop`, `Serialize` and `Deserialize`
/// run outside it, and a panic there fails only the call or replay that ran it.
pub trait Journal<A>: Send + Sync + 'static {
    /// Journals a call's arguments at `now`, under `key` if given. For a durable journal, it
    /// returns once the entry is durable.
    fn push(&self, key: Option<String>, args: A, now: Duration) -> Result<Pushed, NotJournaled>;

    /// The oldest entry due at `now`, marked in flight until it is settled; entries older than
    /// the TTL are removed first.
    fn take(&self, now: Duration) -> Take<A>;

    /// Ends the replay of entry `id`.
    fn settle(&self, id: u64, how: Settled, now: Duration);

    /// Size and counts.
    fn status(&self) -> JournalStatus;

    /// The queued entries, oldest first.
    fn entries(&self) -> Vec<EntryInfo>;

    /// The dead letters, oldest first.
    fn dead_letters(&self) -> Vec<EntryInfo>;

    /// Puts every dead letter back in the queue with its attempts at 0 (as if journaled at
    /// `now`), as far as the bounds allow. How many went back.
    fn retry_dead_letters(&self, now: Duration) -> usize;

    /// Drops every dead letter. How many.
    fn drop_dead_letters(&self) -> usize;

    /// [`status`](Journal::status), or why the journal's store could not give it (where
    /// `status` gives the last one it knows). The default: `status`, which cannot fail.
    fn try_status(&self) -> Result<JournalStatus, StoreError> {
        Ok(self.status())
    }

    /// [`dead_letters`](Journal::dead_letters), or why the journal's store could not list
    /// them (where `dead_letters` lists none). The default: `dead_letters`.
    fn try_dead_letters(&self) -> Result<Vec<EntryInfo>, StoreError> {
        Ok(self.dead_letters())
    }

    /// [`retry_dead_letters`](Journal::retry_dead_letters), or why the journal's store could
    /// not do it (where `retry_dead_letters` says 0). The default: `retry_dead_letters`.
    fn try_retry_dead_letters(&self, now: Duration) -> Result<usize, StoreError> {
        Ok(self.retry_dead_letters(now))
    }

    /// [`drop_dead_letters`](Journal::drop_dead_letters), or why the journal's store could not
    /// do it (where `drop_dead_letters` says 0). The default: `drop_dead_letters`.
    fn try_drop_dead_letters(&self) -> Result<usize, StoreError> {
        Ok(self.drop_dead_letters())
    }

    /// Whether its operations may wait on a disk or a store: the replayer then runs them on
    /// tokio's blocking threads, never on the runtime's own. `true` unless the journal says
    /// otherwise ([`MemoryJournal`](crate::MemoryJournal) does).
    fn may_block(&self) -> bool {
        true
    }

    /// The last failure of the journal's store, while it lasts (the fleet journal's Redis);
    /// `None` for a journal without one.
    fn store_error(&self) -> Option<String> {
        None
    }
}
