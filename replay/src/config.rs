//! [`ReplayConfig`]: a journal's bounds, its entries' lives, and the replayer's pace.

use core::time::Duration;

/// What a full journal does with a new entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WhenFull {
    /// Keep what is journaled and refuse the new call: the caller gets a plain rejection (not
    /// [`journaled`](breakerbox_runtime::Rejected::journaled)), counted as `refused`. The
    /// default: an entry a caller was told is journaled is never dropped for room.
    #[default]
    RefuseNew,
    /// Drop the oldest queued entries until the new one fits, each counted as `dropped`. For
    /// calls where the newest matter most (a state to publish, say).
    DropOldest,
}

/// A replay journal's bounds and its replayer's pace.
///
/// ```
/// use breakerbox_replay::{ReplayConfig, WhenFull};
/// use std::time::Duration;
///
/// let config = ReplayConfig::new()
///     .max_entries(50_000)
///     .ttl(Duration::from_secs(15 * 60))
///     .rate(20)
///     .when_full(WhenFull::DropOldest);
/// assert_eq!(config.get_rate(), 20);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayConfig {
    pub(crate) max_entries: usize,
    pub(crate) max_bytes: usize,
    pub(crate) when_full: WhenFull,
    pub(crate) ttl: Duration,
    pub(crate) attempts: u32,
    pub(crate) backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) rate: u32,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig {
            max_entries: 10_000,
            max_bytes: 64 << 20,
            when_full: WhenFull::RefuseNew,
            ttl: Duration::from_secs(3600),
            attempts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            rate: 10,
        }
    }
}

impl ReplayConfig {
    /// The defaults: 10 000 entries, 64 MiB, [`WhenFull::RefuseNew`], a TTL of 1 hour, 5
    /// attempts with a backoff of 1 s doubling up to 60 s, 10 replays a second.
    pub fn new() -> Self {
        Self::default()
    }

    /// At most this many queued entries (`replay_max`); dead letters are bounded by the same
    /// number, apart. At least 1.
    pub fn max_entries(mut self, n: usize) -> Self {
        self.max_entries = n.max(1);
        self
    }

    /// At most this many bytes of queued entries: their arguments and keys (for the memory
    /// journal, each entry weighs `size_of` its arguments, its key's bytes and 64 bytes of
    /// bookkeeping; on disk, its encoded record). An entry larger than this alone is refused.
    pub fn max_bytes(mut self, n: usize) -> Self {
        self.max_bytes = n.max(1);
        self
    }

    /// What a full journal does with a new entry (default [`WhenFull::RefuseNew`]).
    pub fn when_full(mut self, policy: WhenFull) -> Self {
        self.when_full = policy;
        self
    }

    /// How long an entry waits to be replayed before it expires (`replay_ttl`), counted from
    /// when it was journaled, on the journal's clock. Expired entries are removed, counted as
    /// `expired`, never replayed. Not zero: a replay whose ttl is zero does not start
    /// ([`StartError::Config`](crate::StartError::Config)), as every entry would expire as it
    /// is journaled.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How many replays of an entry may fail before it moves to the dead letters
    /// (`replay_attempts`). At least 1.
    pub fn attempts(mut self, n: u32) -> Self {
        self.attempts = n.max(1);
        self
    }

    /// The wait after an entry's first failed replay before it is tried again; it doubles
    /// with each further failure, up to `max`.
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = first;
        self.max_backoff = max.max(first);
        self
    }

    /// At most this many replays a second (`replay_rate`), evenly spaced. At least 1.
    pub fn rate(mut self, per_second: u32) -> Self {
        self.rate = per_second.max(1);
        self
    }

    /// The replay rate, per second.
    pub fn get_rate(&self) -> u32 {
        self.rate
    }

    /// The wait after an entry's `attempts`-th failure.
    pub(crate) fn backoff_after(&self, attempts: u32) -> Duration {
        let doublings = attempts.saturating_sub(1).min(32);
        self.backoff
            .saturating_mul(1u32 << doublings.min(31))
            .min(self.max_backoff)
    }

    /// The time between two replays.
    pub(crate) fn spacing(&self) -> Duration {
        Duration::from_secs(1) / self.rate
    }
}
