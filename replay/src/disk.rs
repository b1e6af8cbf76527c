//! [`DiskJournal`]: entries in a file on local disk, kept across restarts.

use core::marker::PhantomData;
use core::time::Duration;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::book::{Book, BookTake, Change, Done, Slot};
use crate::config::ReplayConfig;
use crate::journal::{
    EntryInfo, Journal, JournalStatus, NotJournaled, Pushed, Settled, Take, Taken,
};
use crate::log::{self, Log, Record, Recovery};
use crate::memory::status;
use crate::stats::Sink;

/// The log is rewritten from the live entries once it is this much larger than they are
/// (and at least [`COMPACT_AT`]).
const COMPACT_RATIO: u64 = 4;
const COMPACT_AT: u64 = 1 << 20;

/// A journal in a file on local disk: it survives a restart, and a call is told it was
/// journaled only once its entry is synced to the disk (`fdatasync`), so `kill -9` (or a power
/// cut, on a disk that honours syncs) loses no entry a caller was told about.
///
/// - **Format.** An append-only log of checksummed frames (CRC-32), each one change: an entry
///   journaled, replayed, failed, dead-lettered. Arguments are encoded with postcard, so they
///   need `Serialize + DeserializeOwned`.
/// - **Group commit.** Calls journaled while a sync is under way share the next one: the cost
///   of a sync is spread over every call waiting for it.
/// - **Damage.** At startup a torn last write loses only the frame being written, and a
///   damaged frame elsewhere only itself; [`Recovery`] says what was skipped. A lost removal
///   replays its entry again.
/// - **Compaction.** At startup, and whenever the log grows to 4× its live entries (and 1
///   MiB), it is rewritten from the live entries (a temporary file, synced, renamed over).
/// - Replays and their outcomes are written without a sync: a crash right after a replay may
///   replay that entry again (at-least-once). An entry in flight at a crash is queued again.
/// - After a write or sync error the journal refuses every new call (the error is the
///   [`NotJournaled::Io`] of each).
pub struct DiskJournal<A> {
    book: Mutex<Book<Vec<u8>>>,
    log: Log,
    sink: Sink,
    _args: PhantomData<fn(A) -> A>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A slot's `Put` record.
fn put(id: u64, slot: &Slot<Vec<u8>>) -> Record {
    Record::Put {
        id,
        key: slot.key.as_deref().map(str::to_owned),
        enqueued_ns: nanos(slot.enqueued),
        attempts: slot.attempts,
        next_try_ns: nanos(slot.next_try),
        args: slot.payload.clone().unwrap_or_default(),
    }
}

/// The frames of every live entry.
fn snapshot(book: &Book<Vec<u8>>) -> Vec<u8> {
    let mut frames = Vec::new();
    for (id, slot, dead) in book.all() {
        log::frame(&put(id, slot), &mut frames);
        if dead {
            log::frame(
                &Record::Dead {
                    id,
                    attempts: slot.attempts,
                },
                &mut frames,
            );
        }
    }
    frames
}

/// What an entry weighs against `max_bytes`: its encoded arguments and key, and 32 bytes of
/// frame and fields.
fn weight(key: Option<&str>, args: &[u8]) -> usize {
    args.len() + key.map_or(0, str::len) + 32
}

impl<A: Serialize + DeserializeOwned + Send + 'static> DiskJournal<A> {
    /// Opens (or creates) the journal at `path`, reading back what it holds, and rewrites it
    /// clean. `name` labels its metrics. Damage in the file is skipped and reported in the
    /// [`Recovery`] (and logged at `warn`), never an error; an error is the file system's.
    pub fn open(
        name: &str,
        path: impl AsRef<Path>,
        config: &ReplayConfig,
    ) -> io::Result<(DiskJournal<A>, Recovery)> {
        let path = path.as_ref();
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let (records, skipped) = log::read(&bytes);
        let mut book = Book::new(config.clone());
        let count = records.len();
        for record in records {
            apply(&mut book, record);
        }
        for skip in &skipped {
            tracing::warn!(target: "breakerbox", journal = %name, path = %path.display(), offset = skip.offset, bytes = skip.bytes, at_end = skip.at_end, "skipped a damaged stretch of a replay journal");
        }
        let recovery = Recovery {
            records: count,
            entries: book.len(),
            dead_letters: book.dead_len(),
            skipped,
        };
        let log = Log::create(path, &snapshot(&book))?;
        Ok((
            DiskJournal {
                book: Mutex::new(book),
                log,
                sink: Sink::new(name),
                _args: PhantomData,
            },
            recovery,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Book<Vec<u8>>> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Logs an operation's changes, in the book's order (so under its lock); their sequence
    /// number.
    fn log(&self, book: &Book<Vec<u8>>, changes: &[Change]) -> u64 {
        let mut frames = Vec::new();
        for &change in changes {
            let record = match change {
                Change::Put(id) => match book.slot(id) {
                    Some(slot) => put(id, slot),
                    None => continue,
                },
                Change::Remove(id) => Record::Remove { id },
                Change::Retry(id) => match book.slot(id) {
                    Some(slot) => Record::Retry {
                        id,
                        attempts: slot.attempts,
                        next_try_ns: nanos(slot.next_try),
                    },
                    None => continue,
                },
                Change::Dead(id) => Record::Dead {
                    id,
                    attempts: book.slot(id).map_or(0, |slot| slot.attempts),
                },
                Change::Revive(id) => Record::Revive {
                    id,
                    at_ns: book.slot(id).map_or(0, |slot| nanos(slot.next_try)),
                },
                Change::Forget(id) => Record::Forget { id },
            };
            log::frame(&record, &mut frames);
        }
        self.log.append(&frames)
    }

    /// Logs an operation that needs no sync (a replay's end, an expiry) and writes it.
    fn write_through(&self, seq: u64) {
        if let Err(e) = self.log.commit(seq, false) {
            tracing::error!(target: "breakerbox", journal = %self.sink.name(), error = %e, "a replay journal could not write to its file");
        }
    }

    /// Rewrites the log from the live entries once it has grown enough.
    fn maybe_compact(&self, book: &Book<Vec<u8>>) {
        let live = book.bytes() as u64 + 64 * book.dead_len() as u64;
        if self.log.size() < COMPACT_AT.max(live.saturating_mul(COMPACT_RATIO)) {
            return;
        }
        if let Err(e) = self.log.compact(&snapshot(book)) {
            tracing::error!(target: "breakerbox", journal = %self.sink.name(), error = %e, "a replay journal could not compact its file");
        }
    }

    /// Counts a call the journal could not take before reaching the book.
    fn refused(&self) {
        let counts = crate::journal::JournalCounts {
            refused: 1,
            ..Default::default()
        };
        self.lock().counts.add(&counts);
        self.sink.count(&counts);
    }

    fn after(&self, done: Done<Vec<u8>>) {
        self.sink.count(&done.counts);
    }
}

/// One logged record, applied to the book being rebuilt.
fn apply(book: &mut Book<Vec<u8>>, record: Record) {
    match record {
        Record::Put {
            id,
            key,
            enqueued_ns,
            attempts,
            next_try_ns,
            args,
        } => {
            let bytes = weight(key.as_deref(), &args);
            book.restore(
                id,
                Slot {
                    key: key.map(String::into_boxed_str),
                    payload: Some(args),
                    bytes,
                    enqueued: Duration::from_nanos(enqueued_ns),
                    attempts,
                    next_try: Duration::from_nanos(next_try_ns),
                    in_flight: false,
                },
            );
        }
        Record::Remove { id } => book.restore_remove(id),
        Record::Retry {
            id,
            attempts,
            next_try_ns,
        } => book.restore_retry(id, attempts, Duration::from_nanos(next_try_ns)),
        Record::Dead { id, attempts } => book.restore_dead(id, attempts),
        Record::Revive { id, at_ns } => book.restore_revive(id, Duration::from_nanos(at_ns)),
        Record::Forget { id } => book.restore_forget(id),
    }
}

impl<A: Serialize + DeserializeOwned + Send + 'static> Journal<A> for DiskJournal<A> {
    fn push(&self, key: Option<String>, args: A, now: Duration) -> Result<Pushed, NotJournaled> {
        if let Some(failed) = self.log.failed() {
            self.refused();
            return Err(NotJournaled::Io(io::Error::other(failed)));
        }
        // The arguments' `Serialize` and `Drop` are user code: outside the lock.
        let encoded = match catch_unwind(AssertUnwindSafe(|| postcard::to_allocvec(&args))) {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => {
                self.refused();
                return Err(NotJournaled::Encode(e.to_string()));
            }
            Err(panic) => {
                core::mem::forget(panic);
                self.refused();
                return Err(NotJournaled::Panicked);
            }
        };
        crate::memory::drop_outside(vec![args]);
        let bytes = weight(key.as_deref(), &encoded);
        let (result, seq, done) = {
            let mut book = self.lock();
            let (result, done) = book.push(key.map(String::into_boxed_str), encoded, bytes, now);
            let seq = self.log(&book, &done.changes);
            (result, seq, done)
        };
        self.after(done);
        let pushed = result?;
        // A duplicate waits too: the entry it found may still be on its way to the disk.
        self.log.commit(seq, true)?;
        Ok(pushed)
    }

    fn take(&self, now: Duration) -> Take<A> {
        loop {
            let (take, seq, done, copy) = {
                let mut book = self.lock();
                let (take, done) = book.take(now);
                let seq = self.log(&book, &done.changes);
                let copy = match &take {
                    BookTake::Due(id) => book.slot(*id).map(|slot| {
                        (
                            slot.payload.clone().unwrap_or_default(),
                            slot.key.as_deref().map(str::to_owned),
                            slot.attempts,
                        )
                    }),
                    _ => None,
                };
                (take, seq, done, copy)
            };
            if !done.changes.is_empty() {
                self.write_through(seq);
            }
            self.after(done);
            let id = match take {
                BookTake::Due(id) => id,
                BookTake::Wait(at) => return Take::Wait(at),
                BookTake::Empty => return Take::Empty,
            };
            let Some((bytes, key, attempts)) = copy else {
                return Take::Empty;
            };
            // `Deserialize` is user code: outside the lock.
            match catch_unwind(AssertUnwindSafe(|| postcard::from_bytes::<A>(&bytes))) {
                Ok(Ok(args)) => {
                    return Take::Due(Taken {
                        id,
                        key,
                        attempts,
                        args,
                    });
                }
                Ok(Err(e)) => {
                    tracing::error!(target: "breakerbox", journal = %self.sink.name(), id, error = %e, "a replay journal entry's arguments do not decode; counted as a failed replay");
                }
                Err(panic) => {
                    core::mem::forget(panic);
                    tracing::error!(target: "breakerbox", journal = %self.sink.name(), id, "a replay journal entry's arguments panicked while decoding; counted as a failed replay");
                }
            }
            self.settle(id, Settled::Failed, now);
        }
    }

    fn settle(&self, id: u64, how: Settled, now: Duration) {
        let (seq, done) = {
            let mut book = self.lock();
            let done = book.settle(id, how, now);
            let seq = self.log(&book, &done.changes);
            if how == Settled::Replayed {
                self.maybe_compact(&book);
            }
            (seq, done)
        };
        self.write_through(seq);
        self.after(done);
    }

    fn status(&self) -> JournalStatus {
        status(&self.lock())
    }

    fn entries(&self) -> Vec<EntryInfo> {
        self.lock().entries()
    }

    fn dead_letters(&self) -> Vec<EntryInfo> {
        self.lock().dead_letters()
    }

    fn retry_dead_letters(&self, now: Duration) -> usize {
        let (n, seq, done) = {
            let mut book = self.lock();
            let (n, done) = book.revive_dead(now);
            let seq = self.log(&book, &done.changes);
            (n, seq, done)
        };
        self.write_through(seq);
        self.after(done);
        n
    }

    fn drop_dead_letters(&self) -> usize {
        let (n, seq, done) = {
            let mut book = self.lock();
            let (n, done) = book.forget_dead();
            let seq = self.log(&book, &done.changes);
            (n, seq, done)
        };
        self.write_through(seq);
        self.after(done);
        n
    }
}
