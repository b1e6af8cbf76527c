//! [`ReplayHandle`]: a replay without its argument type, and the process's replays by their
//! breaker's name, for the admin router.

use core::fmt;
use core::time::Duration;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::journal::{EntryInfo, JournalStatus};

/// What a handle reaches of a replay (`replay.rs` implements it for a replay's shared part).
pub(crate) trait Control: Send + Sync {
    fn name(&self) -> &str;
    fn status(&self) -> JournalStatus;
    fn dead_letters(&self) -> Vec<EntryInfo>;
    fn retry_dead_letters(&self) -> usize;
    fn drop_dead_letters(&self) -> usize;
    fn store_error(&self) -> Option<String>;
    fn now(&self) -> Duration;
}

/// A [`Replay`](crate::Replay) without its argument type: its journal's status and dead
/// letters, and their controls. From [`Replay::handle`](crate::Replay::handle), [`find`] or
/// [`replays`]. It keeps the journal alive, not the replayer (which stops when the last
/// `Replay` goes).
#[derive(Clone)]
pub struct ReplayHandle(Arc<dyn Control>);

impl fmt::Debug for ReplayHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayHandle")
            .field("breaker", &self.0.name())
            .finish_non_exhaustive()
    }
}

impl ReplayHandle {
    /// The breaker's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The journal's size and counts.
    pub fn status(&self) -> JournalStatus {
        self.0.status()
    }

    /// How long ago the oldest queued entry was journaled, on the journal's clock.
    pub fn oldest_age(&self, status: &JournalStatus) -> Option<Duration> {
        status.oldest.map(|at| self.0.now().saturating_sub(at))
    }

    /// How long ago `entry` was journaled, on the journal's clock.
    pub fn age(&self, entry: &EntryInfo) -> Duration {
        self.0.now().saturating_sub(entry.enqueued)
    }

    /// The dead letters, oldest first.
    pub fn dead_letters(&self) -> Vec<EntryInfo> {
        self.0.dead_letters()
    }

    /// [`Replay::retry_dead_letters`](crate::Replay::retry_dead_letters).
    pub fn retry_dead_letters(&self) -> usize {
        self.0.retry_dead_letters()
    }

    /// [`Replay::drop_dead_letters`](crate::Replay::drop_dead_letters).
    pub fn drop_dead_letters(&self) -> usize {
        self.0.drop_dead_letters()
    }

    /// [`Journal::store_error`](crate::Journal::store_error).
    pub fn store_error(&self) -> Option<String> {
        self.0.store_error()
    }
}

/// A replay built: alive while a `Replay` holds its task (`alive`).
type Registered = (Weak<dyn Send + Sync>, Weak<dyn Control>);

/// Every replay built in this process.
static REPLAYS: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

pub(crate) fn of(control: Arc<dyn Control>) -> ReplayHandle {
    ReplayHandle(control)
}

/// Lists `control` among the process's replays while `alive` (its replayer's task) lives.
pub(crate) fn register(control: Arc<dyn Control>, alive: Weak<dyn Send + Sync>) {
    let mut replays = REPLAYS.lock().unwrap_or_else(PoisonError::into_inner);
    replays.retain(|(task, _)| task.strong_count() > 0);
    replays.push((alive, Arc::downgrade(&control)));
}

/// The replays of this process whose [`Replay`](crate::Replay) is not dropped yet (some
/// clone of it is alive), oldest first.
pub fn replays() -> Vec<ReplayHandle> {
    let replays = REPLAYS.lock().unwrap_or_else(PoisonError::into_inner);
    replays
        .iter()
        .filter(|(task, _)| task.strong_count() > 0)
        .filter_map(|(_, control)| control.upgrade())
        .map(ReplayHandle)
        .collect()
}

/// The live replay of the breaker named `breaker` (the newest, if there are several).
pub fn find(breaker: &str) -> Option<ReplayHandle> {
    replays().into_iter().rev().find(|h| h.name() == breaker)
}
