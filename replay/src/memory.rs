//! [`MemoryJournal`]: entries in the process's memory, lost with it.

use core::time::Duration;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::book::{Book, BookTake, Done};
use crate::config::ReplayConfig;
use crate::journal::{
    EntryInfo, Journal, JournalStatus, NotJournaled, Pushed, Settled, StoreError, Take, Taken,
};
use crate::stats::Sink;

/// What an entry weighs beside its arguments and key.
const OVERHEAD: usize = 64;

/// A journal in memory: fast (no I/O), bounded, and lost when the process ends. Its arguments
/// need `Clone + Send + 'static`: a replay gets a copy, and the entry keeps the original until
/// the replay succeeds.
///
/// An entry weighs, against `max_bytes`, `size_of::<A>()` plus its key's bytes plus 64: what
/// the arguments own on the heap is not counted (bound such arguments by `max_entries`).
pub struct MemoryJournal<A> {
    book: Mutex<Book<A>>,
    sink: Sink,
}

impl<A: Clone + Send + 'static> MemoryJournal<A> {
    /// An empty journal; `name` labels its metrics (the breaker's name, typically).
    pub fn new(name: &str, config: &ReplayConfig) -> Self {
        MemoryJournal {
            book: Mutex::new(Book::new(config.clone())),
            sink: Sink::new(name),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Book<A>> {
        // Nothing panics under this lock (no user code runs there), but a poisoned lock must
        // not take the journal down with it.
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the oldest due entry, or `None` if its copy panicked (counted a failed
    /// replay): the caller takes the next.
    fn take_one(&self, now: Duration) -> Option<Take<A>> {
        let (take, done) = self.lock().take(now);
        self.after(done);
        let id = match take {
            BookTake::Due(id) => id,
            BookTake::Wait(at) => return Some(Take::Wait(at)),
            BookTake::Empty => return Some(Take::Empty),
        };
        // The original leaves the book while it is copied (its `Clone` is user code), and
        // goes back whatever the copy does.
        let (original, key, attempts) = {
            let mut book = self.lock();
            let Some(slot) = book.slot_mut(id) else {
                return Some(Take::Empty);
            };
            (
                slot.payload.take(),
                slot.key.as_deref().map(str::to_owned),
                slot.attempts,
            )
        };
        let Some(original) = original else {
            // Another take copies it now: cannot happen while the book marks it in flight.
            self.settle(id, Settled::NotRun, now);
            return Some(Take::Empty);
        };
        let copy = catch_unwind(AssertUnwindSafe(|| original.clone()));
        if let Some(slot) = self.lock().slot_mut(id) {
            slot.payload = Some(original);
        }
        match copy {
            Ok(args) => Some(Take::Due(Taken {
                id,
                key,
                attempts,
                args,
            })),
            Err(panic) => {
                core::mem::forget(panic);
                tracing::error!(target: "breakerbox", journal = %self.sink.name(), id, "a replay journal entry's arguments panicked in Clone; counted as a failed replay");
                self.settle(id, Settled::Failed, now);
                None
            }
        }
    }

    /// Drops what an operation removed, after the lock, and reports its counts.
    fn after(&self, done: Done<A>) {
        self.sink.count(&done.counts);
        drop_outside(done.removed);
    }
}

/// Drops payloads whose `Drop` may panic, without letting the panic out.
pub(crate) fn drop_outside<P>(removed: Vec<P>) {
    for payload in removed {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            core::mem::forget(panic);
        }
    }
}

impl<A: Clone + Send + 'static> Journal<A> for MemoryJournal<A> {
    fn push(&self, key: Option<String>, args: A, now: Duration) -> Result<Pushed, NotJournaled> {
        let bytes = core::mem::size_of::<A>() + key.as_ref().map_or(0, String::len) + OVERHEAD;
        let (result, done) = self
            .lock()
            .push(key.map(String::into_boxed_str), args, bytes, now);
        self.after(done);
        result
    }

    fn take(&self, now: Duration) -> Take<A> {
        // An entry whose copy panics fails, and the next due one is taken: a loop, not a
        // recursion, however many of them panic.
        loop {
            if let Some(take) = self.take_one(now) {
                return take;
            }
        }
    }

    fn settle(&self, id: u64, how: Settled, now: Duration) {
        let done = self.lock().settle(id, how, now);
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
        let (n, done) = self.lock().revive_dead(now);
        self.after(done);
        n
    }

    fn drop_dead_letters(&self) -> usize {
        let (n, done) = self.lock().forget_dead();
        self.after(done);
        n
    }

    fn may_block(&self) -> bool {
        false
    }
}

pub(crate) fn status<P>(book: &Book<P>) -> JournalStatus {
    JournalStatus {
        entries: book.len(),
        bytes: book.bytes(),
        oldest: book.oldest(),
        dead_letters: book.dead_len(),
        counts: book.counts,
    }
}

// `Arc` so a journal can be shared by a replayer and the code that inspects it.
impl<A, J: Journal<A> + ?Sized> Journal<A> for Arc<J> {
    fn push(&self, key: Option<String>, args: A, now: Duration) -> Result<Pushed, NotJournaled> {
        (**self).push(key, args, now)
    }
    fn take(&self, now: Duration) -> Take<A> {
        (**self).take(now)
    }
    fn settle(&self, id: u64, how: Settled, now: Duration) {
        (**self).settle(id, how, now)
    }
    fn status(&self) -> JournalStatus {
        (**self).status()
    }
    fn entries(&self) -> Vec<EntryInfo> {
        (**self).entries()
    }
    fn dead_letters(&self) -> Vec<EntryInfo> {
        (**self).dead_letters()
    }
    fn retry_dead_letters(&self, now: Duration) -> usize {
        (**self).retry_dead_letters(now)
    }
    fn drop_dead_letters(&self) -> usize {
        (**self).drop_dead_letters()
    }
    fn may_block(&self) -> bool {
        (**self).may_block()
    }
    fn store_error(&self) -> Option<String> {
        (**self).store_error()
    }
    fn try_status(&self) -> Result<JournalStatus, StoreError> {
        (**self).try_status()
    }
    fn try_dead_letters(&self) -> Result<Vec<EntryInfo>, StoreError> {
        (**self).try_dead_letters()
    }
    fn try_retry_dead_letters(&self, now: Duration) -> Result<usize, StoreError> {
        (**self).try_retry_dead_letters(now)
    }
    fn try_drop_dead_letters(&self) -> Result<usize, StoreError> {
        (**self).try_drop_dead_letters()
    }
}
