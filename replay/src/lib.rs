//! Calls a [breakerbox](https://docs.rs/breakerbox) circuit breaker rejects while open,
//! journaled and replayed through the breaker once it closes: for writes that must happen
//! eventually (a webhook, an audit record, a notification) and are safe to repeat.
//!
//! - [`Replay`] — a breaker with a journal: [`Replay::call`] journals a rejected call's
//!   arguments and returns the rejection marked
//!   [`journaled`](breakerbox_runtime::Rejected::journaled); a task replays the entries,
//!   oldest first, at most `rate` a second, once the breaker closes.
//! - [`ReplayConfig`] — bounds (`max_entries`, `max_bytes`, [`WhenFull`]), `ttl`,
//!   `attempts` and backoff before a dead letter, `rate`.
//! - [`Journal`] — where entries wait: [`MemoryJournal`] (lost with the process) or
//!   [`DiskJournal`] (an SQLite database on local disk: survives a restart, and a caller is
//!   told its call is journaled once it is committed and synced), or, with
//!   the feature `redis`, `RedisJournal` (one journal in Redis for a fleet: a stream with a
//!   consumer group, each entry replayed by one instance).
//!
//! Replay repeats calls: use it only for calls that are safe to run more than once
//! (idempotent, or deduplicated by the receiver with the entry's key). See `docs/replay.md`.
//!
//! # Where things are
//!
//! - `config` — [`ReplayConfig`], [`WhenFull`].
//! - `journal` — the [`Journal`] trait and what it speaks: [`Pushed`], [`NotJournaled`],
//!   [`Take`], [`Taken`], [`Settled`], [`EntryInfo`], [`JournalStatus`], [`JournalCounts`],
//!   [`StoreError`].
//! - `book` — the bookkeeping every journal shares (order, keys, bounds, TTL, attempts, dead
//!   letters), pure data under the journal's lock.
//! - `memory` — [`MemoryJournal`].
//! - `disk` — [`DiskJournal`] on SQLite, and what opening it found ([`Recovery`]).
//! - `redis` — `RedisJournal` and its script, `redis.lua` (feature `redis`).
//! - `replayer` — [`Replay`], its builder, and the replayer task.
//! - `handle` — [`ReplayHandle`], a replay without its argument type, and the process's live
//!   replays by their breaker's name ([`find`], [`replays`]): what the admin router serves.
//! - `stats` — the counts as `metrics` (feature `metrics`).
//! - `attribute` — what `#[circuit_breaker(replay = …)]`'s generated code calls, re-exported as
//!   the hidden `__private`: no semver promise.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod attribute;
mod book;
mod config;
mod disk;
mod handle;
mod journal;
mod memory;
#[cfg(feature = "redis")]
mod redis;
mod replayer;
mod stats;

pub use config::{ReplayConfig, WhenFull};
pub use disk::{DiskJournal, Recovery};
pub use handle::{ReplayHandle, find, replays};
pub use journal::{
    EntryInfo, Journal, JournalCounts, JournalStatus, NotJournaled, Pushed, Settled, StoreError,
    Take, Taken,
};
pub use memory::MemoryJournal;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis::{RedisJournal, RedisJournalError, RedisOptions};
pub use replayer::{Replay, ReplayBuilder, StartError, WallClock};

/// Support for `#[circuit_breaker(replay = …)]`. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::attribute::*;
}
