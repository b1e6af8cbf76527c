//! [`ReplayHandle`]: a replay without its argument type, and the process's replays by their
//! breaker's name, for the admin router.

use core::fmt;
use core::time::Duration;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::journal::{EntryInfo, JournalStatus, StoreError};

/// What a handle reaches of a replay (`replay.rs` implements it for a replay's shared part).
pub(crate) trait Control: Send + Sync {
    fn name(&self) -> &str;
    fn status(&self) -> JournalStatus;
    fn dead_letters(&self) -> Vec<EntryInfo>;
    fn retry_dead_letters(&self) -> usize;
    fn drop_dead_letters(&self) -> usize;
    fn store_error(&self) -> Option<String>;
    fn now(&self) -> Duration;
    fn may_block(&self) -> bool;
    fn try_status(&self) -> Result<JournalStatus, StoreError>;
    fn try_dead_letters(&self) -> Result<Vec<EntryInfo>, StoreError>;
    fn try_retry_dead_letters(&self) -> Result<usize, StoreError>;
    fn try_drop_dead_letters(&self) -> Result<usize, StoreError>;
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

    /// The journal's size and counts, or why its store could not give them, read off the
    /// runtime's threads (on tokio's blocking threads for a journal that may wait on a disk or
    /// a store): the runtime's other tasks run meanwhile, and the fleet journal answers
    /// within its timeout, at once while its Redis is known not to answer.
    pub async fn status_async(&self) -> Result<JournalStatus, StoreError> {
        self.off_thread(|c| c.try_status()).await
    }

    /// The dead letters, oldest first, or why the journal's store could not list them; off
    /// the runtime's threads, as [`status_async`](ReplayHandle::status_async).
    pub async fn dead_letters_async(&self) -> Result<Vec<EntryInfo>, StoreError> {
        self.off_thread(|c| c.try_dead_letters()).await
    }

    /// [`retry_dead_letters`](ReplayHandle::retry_dead_letters), or why the journal's store
    /// could not; off the runtime's threads, as [`status_async`](ReplayHandle::status_async).
    pub async fn retry_dead_letters_async(&self) -> Result<usize, StoreError> {
        self.off_thread(|c| c.try_retry_dead_letters()).await
    }

    /// [`drop_dead_letters`](ReplayHandle::drop_dead_letters), or why the journal's store
    /// could not; off the runtime's threads, as [`status_async`](ReplayHandle::status_async).
    pub async fn drop_dead_letters_async(&self) -> Result<usize, StoreError> {
        self.off_thread(|c| c.try_drop_dead_letters()).await
    }

    /// Runs `op` on tokio's blocking threads if the journal may block (and a runtime runs),
    /// here otherwise.
    async fn off_thread<T: Send + 'static>(
        &self,
        op: impl FnOnce(&dyn Control) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let control = self.0.clone();
        let runtime = tokio::runtime::Handle::try_current();
        match runtime {
            Ok(runtime) if control.may_block() => runtime
                .spawn_blocking(move || op(&*control))
                .await
                .unwrap_or_else(|e| {
                    Err(StoreError(format!(
                        "the replay journal `{}`'s operation panicked: {e}",
                        self.name()
                    )))
                }),
            _ => op(&*control),
        }
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
