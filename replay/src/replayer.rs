//! [`Replay`]: a breaker with a journal for the calls it rejects, and the task that replays
//! them once it closes.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::Poll;
use core::time::Duration;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, Weak};

use breakerbox_runtime::__private::Guarded;
use breakerbox_runtime::{Breaker, Clock, Error, RejectReason, Rejected, State};
use tokio::sync::Notify;

use crate::config::ReplayConfig;
use crate::disk::DiskJournal;
use crate::disk::Recovery;
use crate::journal::{EntryInfo, Journal, JournalStatus, NotJournaled, Settled, Take, Taken};
use crate::memory::MemoryJournal;

/// The replay of one entry: a future of its outcome, `Err` with the failure's message.
type ReplayFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;
type ReplayFn<A> = Box<dyn Fn(A) -> ReplayFuture + Send + Sync>;
type KeyFn<A> = Box<dyn Fn(&A) -> String + Send + Sync>;

/// The system's wall clock, as the time since the Unix epoch: the default clock of a
/// journal, whose entries' times (and so their TTL) must mean the same after a restart. It
/// may step with the system's time; a step back delays expiry, a step forward hastens it.
#[derive(Clone, Copy, Debug, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Duration {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }
}

/// Why a replayer could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A replayer is a tokio task: it must be started inside a tokio runtime.
    #[error("a replay journal's replayer must be started inside a tokio runtime")]
    NoRuntime,
    /// The disk journal could not be opened.
    #[error("the replay journal could not be opened: {0}")]
    Io(#[from] std::io::Error),
    /// The fleet journal could not be opened: its URL, or Redis's answer.
    #[error("the replay journal could not be opened: {0}")]
    Store(String),
    /// The [`ReplayConfig`] cannot work: what is wrong, and what to set instead.
    #[error("the replay journal's config cannot work: {0}")]
    Config(String),
}

pub(crate) struct Shared<A> {
    pub(crate) breaker: Breaker,
    pub(crate) journal: Arc<dyn Journal<A>>,
    config: ReplayConfig,
    pub(crate) clock: Arc<dyn Clock>,
    replay: ReplayFn<A>,
    key: Option<KeyFn<A>>,
    wake: Arc<Wake>,
    /// The entry the replayer has taken and not settled yet: one its task left unsettled (its
    /// runtime shut down mid-replay) is queued again by the replayer started after it.
    held: Arc<std::sync::Mutex<Held>>,
}

/// Which replayer task is the current one, and the entry it has taken and not settled.
/// A task whose runtime shut down may still have a take or a settle running on a blocking
/// thread: by the task's number, such a late step neither records its entry as held nor clears
/// the current task's, and an entry it takes late goes straight back to the queue.
#[derive(Default)]
struct Held {
    task: u64,
    entry: Option<u64>,
}

/// How the replayer is woken: the breaker's listener counts closings, a journaled call pokes.
#[derive(Default)]
struct Wake {
    closes: AtomicU64,
    closed: Notify,
    pushed: Notify,
}

/// The replayer's task: aborted when the last handle goes, and started again on the caller's
/// runtime if the runtime it ran on shut down (a `Replay` outlives it: the attribute's lives
/// in a static, started by a first call on whatever runtime made it).
pub(crate) struct Task(std::sync::RwLock<tokio::task::JoinHandle<()>>);

impl Task {
    /// Starts the replayer again on the current runtime if its task has ended (its runtime
    /// shut down: a replayer never ends otherwise); outside a runtime, nothing.
    fn revive<A: Send + 'static>(&self, shared: &Arc<Shared<A>>) {
        let ended = |task: &tokio::task::JoinHandle<()>| task.is_finished();
        if !ended(&self.0.read().unwrap_or_else(PoisonError::into_inner)) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut task = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if ended(&task) {
            tracing::info!(target: "breakerbox", breaker = %shared.breaker.name(), "a replayer whose runtime shut down starts again on the caller's runtime");
            *task = runtime.spawn(drive(shared));
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .abort();
    }
}

/// A breaker whose rejected calls are journaled and replayed once it closes.
///
/// - A call rejected while the breaker is open (or half-open with every probe taken, or
///   forced open) is journaled: its arguments go to the journal, under its key if it has one,
///   and the caller gets the [`Rejected`] marked [`journaled`](Rejected::journaled), which a
///   handler can answer with "accepted" (HTTP 202). A call the journal cannot take (full,
///   too large, not written) gets a plain rejection, counted as `refused`. A call refused at
///   `max_concurrent` (closed) is not journaled.
/// - When the breaker closes (or is disabled by hand), a task replays the entries through it,
///   oldest first, at most `rate` a second. A replay is a call like any other: it needs a
///   permit, and its failure counts (and may re-open the breaker). A failed replay stops the
///   pass: the next one starts when the breaker next closes, or, if it stayed closed, after
///   the failed entry's backoff. An entry that failed `attempts` times is a dead letter.
/// - Replay is for calls that are safe to repeat: an entry may be replayed more than once (a
///   replay that succeeded but whose removal was lost in a crash, with the disk journal).
///
/// ```
/// use breakerbox_replay::{Replay, ReplayConfig};
/// use breakerbox_runtime::{Breaker, Config, Error};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let breaker = Breaker::new("webhooks", Config::builder().failures(3).build()?);
/// let replay = Replay::builder(&breaker)
///     .config(ReplayConfig::new().rate(5))
///     .memory(|url: String| async move { Ok::<_, std::io::Error>(drop(url)) })?;
///
/// breaker.force_open();
/// let answer = replay.call("https://example.test/a".to_string(), |url| Ok::<_, std::io::Error>(url));
/// let Err(Error::Rejected(rejected)) = answer else { panic!() };
/// assert!(rejected.journaled()); // answer 202: it will be delivered
/// assert_eq!(replay.status().entries, 1);
/// # Ok(()) }
/// ```
pub struct Replay<A> {
    shared: Arc<Shared<A>>,
    _task: Arc<Task>,
}

impl<A> Clone for Replay<A> {
    fn clone(&self) -> Self {
        Replay {
            shared: self.shared.clone(),
            _task: self._task.clone(),
        }
    }
}

impl<A: 'static> fmt::Debug for Replay<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Replay")
            .field("breaker", &self.shared.breaker.name())
            .field("status", &self.shared.journal.status())
            .finish()
    }
}

/// Builds a [`Replay`]: [`Replay::builder`].
pub struct ReplayBuilder<A> {
    breaker: Breaker,
    config: ReplayConfig,
    clock: Arc<dyn Clock>,
    key: Option<KeyFn<A>>,
}

impl<A: Send + 'static> ReplayBuilder<A> {
    /// An error for a config that cannot work. A `ttl` of zero expires every entry as it is
    /// journaled: its callers would be told "journaled" for calls that are never replayed.
    fn check(&self) -> Result<(), StartError> {
        if self.config.ttl.is_zero() {
            return Err(StartError::Config(format!(
                "the replay of breaker `{}` has a ttl of 0, so every call it journals would expire unreplayed: set ttl (replay_ttl) to how long a call may wait for its replay, like 1h",
                self.breaker.name()
            )));
        }
        Ok(())
    }

    /// The journal's bounds and the replayer's pace (default [`ReplayConfig::new`]).
    pub fn config(mut self, config: ReplayConfig) -> Self {
        self.config = config;
        self
    }

    /// The journal's clock, for entries' times, TTL and backoff (default [`WallClock`]).
    /// Tests give `TokioClock` on paused time: the replayer's pacing sleeps on tokio's timers.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Names each call's entry by its arguments (`replay_key`): a call whose key is queued
    /// already is not journaled again; the queued entry stands for it. The function is the
    /// caller's code, run on the caller's thread; if it panics, the call is not journaled.
    pub fn key(mut self, key: impl Fn(&A) -> String + Send + Sync + 'static) -> Self {
        self.key = Some(Box::new(key));
        self
    }

    /// Starts the replayer over an in-memory journal ([`MemoryJournal`]). `replay` is called
    /// with each entry's arguments; `Err` is a failure.
    pub fn memory<F, Fut, T, E>(self, replay: F) -> Result<Replay<A>, StartError>
    where
        A: Clone,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        self.check()?;
        let journal = Arc::new(MemoryJournal::new(self.breaker.name(), &self.config));
        self.journal(journal, replay)
    }

    /// Opens (or creates) a [`DiskJournal`] at `path` and starts the replayer over it; the
    /// [`Recovery`] says what the file held and what of it was damaged. `replay` is called
    /// with each entry's arguments; `Err` is a failure.
    pub fn disk<F, Fut, T, E>(
        self,
        path: impl AsRef<std::path::Path>,
        replay: F,
    ) -> Result<(Replay<A>, Recovery), StartError>
    where
        A: serde::Serialize + serde::de::DeserializeOwned,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        self.check()?;
        let (journal, recovery) = DiskJournal::open(self.breaker.name(), path, &self.config)?;
        Ok((self.journal(Arc::new(journal), replay)?, recovery))
    }

    /// Opens breaker's journal in Redis ([`RedisJournal`](crate::RedisJournal), shared by
    /// every instance that opens it with the same name and prefix) and starts the replayer
    /// over it (feature `redis`). `replay` is called with each entry's arguments; `Err` is a
    /// failure.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn redis<F, Fut, T, E>(
        self,
        options: crate::RedisOptions,
        replay: F,
    ) -> Result<Replay<A>, StartError>
    where
        A: serde::Serialize + serde::de::DeserializeOwned,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        self.check()?;
        let journal = crate::RedisJournal::open(self.breaker.name(), options, &self.config)
            .map_err(|e| StartError::Store(e.to_string()))?;
        self.journal(Arc::new(journal), replay)
    }

    /// Opens breaker's journal in the Redis of the fleet running in this process
    /// ([`RedisOptions::running_fleet`](crate::RedisOptions::running_fleet): its URL, TLS CA and
    /// prefix) and starts the replayer over it (feature `redis`): every instance of the fleet
    /// journals there, and each entry is replayed by one of them. An error if no fleet runs
    /// ([`Fleet::start`](breakerbox_fleet::Fleet::start) it first). `replay` is called with each
    /// entry's arguments; `Err` is a failure.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn fleet<F, Fut, T, E>(self, replay: F) -> Result<Replay<A>, StartError>
    where
        A: serde::Serialize + serde::de::DeserializeOwned,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        let options =
            crate::RedisOptions::running_fleet().ok_or_else(|| no_fleet(self.breaker.name()))?;
        self.redis(options, replay)
    }

    /// Starts the replayer over the given journal.
    pub fn journal<F, Fut, T, E>(
        self,
        journal: Arc<dyn Journal<A>>,
        replay: F,
    ) -> Result<Replay<A>, StartError>
    where
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: fmt::Display,
    {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        self.check()?;
        let replay: ReplayFn<A> = Box::new(move |args| {
            let call = replay(args);
            Box::pin(async move {
                call.await
                    .map(drop)
                    .map_err(|e| breakerbox_runtime::__integrations::failure_message(&e))
            })
        });
        let wake = Arc::new(Wake::default());
        let listener = Arc::downgrade(&wake);
        self.breaker.on_state_change(move |event| {
            if lets_calls_through(event.to)
                && let Some(wake) = listener.upgrade()
            {
                wake.closes.fetch_add(1, Ordering::SeqCst);
                wake.closed.notify_one();
            }
        });
        let shared = Arc::new(Shared {
            breaker: self.breaker,
            journal,
            config: self.config,
            clock: self.clock,
            replay,
            key: self.key,
            wake,
            held: Arc::default(),
        });
        let task = Arc::new(Task(std::sync::RwLock::new(runtime.spawn(drive(&shared)))));
        let alive: std::sync::Weak<Task> = Arc::downgrade(&task);
        crate::handle::register(shared.clone(), alive);
        Ok(Replay {
            shared,
            _task: task,
        })
    }
}

impl<A: Send + 'static> Replay<A> {
    /// A builder for `breaker`'s replay.
    pub fn builder(breaker: &Breaker) -> ReplayBuilder<A> {
        ReplayBuilder {
            breaker: breaker.clone(),
            config: ReplayConfig::default(),
            clock: Arc::new(WallClock),
            key: None,
        }
    }

    /// Runs `f(args)` through the breaker, as [`Breaker::call`] does; a rejected call is
    /// journaled on this thread (see [`journal`](Replay::journal): the fleet journal waits at
    /// most its timeout, `RedisOptions::timeout`).
    pub fn call<T, E: fmt::Display>(
        &self,
        args: A,
        f: impl FnOnce(A) -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        self._task.revive(&self.shared);
        match self.shared.breaker.try_acquire() {
            Ok(permit) => {
                let result = f(args);
                match &result {
                    Ok(_) => permit.success(),
                    Err(e) => permit.failure_with(e),
                }
                result.map_err(Error::Inner)
            }
            Err(rejected) => Err(Error::Rejected(self.journal(rejected, args))),
        }
    }

    /// Awaits `f(args)` through the breaker, as [`Breaker::call_async`] does; a rejected call
    /// is journaled off the runtime's threads (see [`journal_async`](Replay::journal_async)).
    pub async fn call_async<T, E: fmt::Display, Fut: Future<Output = Result<T, E>>>(
        &self,
        args: A,
        f: impl FnOnce(A) -> Fut,
    ) -> Result<T, Error<E>> {
        self._task.revive(&self.shared);
        let permit = match self.shared.breaker.try_acquire() {
            Ok(permit) => permit,
            Err(rejected) => return Err(Error::Rejected(self.journal_async(rejected, args).await)),
        };
        let (result, permit) = Guarded::new(permit, f(args)).await;
        match &result {
            Ok(_) => permit.success(),
            Err(e) => permit.failure_with(e),
        }
        result.map_err(Error::Inner)
    }

    /// Journals the arguments of a call `rejected` refused, and returns the rejection marked
    /// [`journaled`](Rejected::journaled) if they were (or if their key was queued already).
    /// A rejection at `max_concurrent`, or one the journal cannot take, comes back as it was.
    /// For a durable journal it returns once the entry is durable; this thread waits for the
    /// journal meanwhile (the fleet journal: at most its timeout, `RedisOptions::timeout`,
    /// even when its Redis stops answering during the call, and not at all while its Redis is
    /// known not to answer). In async code,
    /// [`journal_async`](Replay::journal_async) waits without holding the runtime's thread.
    pub fn journal(&self, rejected: Rejected, args: A) -> Rejected {
        if !journals(rejected.reason()) {
            return rejected;
        }
        match self.key_of(&args) {
            Ok(key) => self.journal_keyed(rejected, key, args),
            Err(why) => self.refused(rejected, why),
        }
    }

    /// As [`journal`](Replay::journal), with the journal's work on tokio's blocking threads
    /// for a journal that may wait on a disk or a store ([`Journal::may_block`]): the
    /// runtime's other tasks run meanwhile. The rejection is marked journaled only once the
    /// journal said so; a journal that cannot take the call in its time (the fleet journal's
    /// timeout) refuses it, counted as `refused`. Dropped before it ends, the journal's work
    /// goes on: the call may still be journaled (and replayed).
    pub async fn journal_async(&self, rejected: Rejected, args: A) -> Rejected {
        if !journals(rejected.reason()) {
            return rejected;
        }
        match self.key_of(&args) {
            Ok(key) => self.journal_keyed_async(rejected, key, args).await,
            Err(why) => self.refused(rejected, why),
        }
    }

    /// The entry's key: the caller's code, run on the caller's thread.
    fn key_of(&self, args: &A) -> Result<Option<String>, NotJournaled> {
        match &self.shared.key {
            None => Ok(None),
            Some(key) => match catch_unwind(AssertUnwindSafe(|| key(args))) {
                Ok(key) => Ok(Some(key)),
                Err(panic) => {
                    core::mem::forget(panic);
                    Err(NotJournaled::Panicked)
                }
            },
        }
    }

    /// As [`journal_async`](Replay::journal_async), with the entry's key given.
    pub async fn journal_keyed_async(
        &self,
        rejected: Rejected,
        key: Option<String>,
        args: A,
    ) -> Rejected {
        if !journals(rejected.reason()) {
            return rejected;
        }
        let journal = self.shared.journal.clone();
        if !journal.may_block() {
            return self.journal_keyed(rejected, key, args);
        }
        let now = self.shared.clock.now();
        // The replayer is woken by the push itself: a caller that gives up meanwhile (a
        // timeout around it) leaves an entry that is still replayed without waiting for the
        // next closing or push.
        let wake = self.shared.wake.clone();
        let push = move || {
            let pushed = journal.push(key, args, now);
            if pushed.is_ok() {
                wake.pushed.notify_one();
            }
            pushed
        };
        let pushed = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime
                .spawn_blocking(push)
                .await
                .unwrap_or(Err(NotJournaled::Panicked)),
            Err(_) => push(),
        };
        self.pushed(rejected, pushed)
    }

    /// As [`journal`](Replay::journal), with the entry's key given.
    pub fn journal_keyed(&self, rejected: Rejected, key: Option<String>, args: A) -> Rejected {
        if !journals(rejected.reason()) {
            return rejected;
        }
        let now = self.shared.clock.now();
        let pushed = self.shared.journal.push(key, args, now);
        self.pushed(rejected, pushed)
    }

    fn pushed(&self, rejected: Rejected, pushed: Result<crate::Pushed, NotJournaled>) -> Rejected {
        match pushed {
            Ok(_) => {
                self._task.revive(&self.shared);
                self.shared.wake.pushed.notify_one();
                rejected.mark_journaled()
            }
            Err(why) => self.refused(rejected, why),
        }
    }

    fn refused(&self, rejected: Rejected, why: NotJournaled) -> Rejected {
        tracing::debug!(target: "breakerbox", breaker = %self.shared.breaker.name(), %why, "a rejected call was not journaled");
        rejected
    }

    /// The breaker.
    pub fn breaker(&self) -> &Breaker {
        &self.shared.breaker
    }

    /// The journal.
    pub fn journal_ref(&self) -> &Arc<dyn Journal<A>> {
        &self.shared.journal
    }

    /// The journal's size and counts: for the fleet journal, the last it read if Redis does
    /// not answer ([`try_status`](Replay::try_status) says so instead). It waits for the
    /// journal on this thread (the fleet journal: at most its timeout,
    /// `RedisOptions::timeout`, and not at all while its Redis is known not to answer);
    /// [`ReplayHandle::status_async`] does not.
    ///
    /// [`ReplayHandle::status_async`]: crate::ReplayHandle::status_async
    pub fn status(&self) -> JournalStatus {
        self.shared.journal.status()
    }

    /// The journal's size and counts, or why its store could not give them
    /// ([`Journal::try_status`]), as soon as the journal's timeout (fleet journal) says so.
    pub fn try_status(&self) -> Result<JournalStatus, crate::StoreError> {
        self.shared.journal.try_status()
    }

    /// The queued entries, oldest first.
    pub fn entries(&self) -> Vec<EntryInfo> {
        self.shared.journal.entries()
    }

    /// The dead letters, oldest first.
    pub fn dead_letters(&self) -> Vec<EntryInfo> {
        self.shared.journal.dead_letters()
    }

    /// Puts every dead letter back in the queue, its attempts at 0, as far as the bounds
    /// allow; how many went back.
    pub fn retry_dead_letters(&self) -> usize {
        self.shared.retry_dead_letters()
    }

    /// This replay without its argument type, as the admin router serves it (also found by
    /// its breaker's name: [`find`](crate::find)).
    pub fn handle(&self) -> crate::ReplayHandle {
        crate::handle::of(self.shared.clone())
    }

    /// Drops every dead letter; how many.
    pub fn drop_dead_letters(&self) -> usize {
        self.shared.journal.drop_dead_letters()
    }
}

/// Why the fleet journal of breaker `name` cannot open: no fleet runs.
#[cfg(feature = "redis")]
pub(crate) fn no_fleet(name: &str) -> StartError {
    StartError::Store(format!(
        "the replay journal `{name}` is the fleet's, and no fleet runs in this process: start one (breakerbox::fleet::Fleet::start) before the first call"
    ))
}

/// Whether a rejection for this reason is journaled: the breaker is not letting calls
/// through for now. A full bulkhead (closed) is not such a time.
fn journals(reason: RejectReason) -> bool {
    matches!(
        reason,
        RejectReason::Open | RejectReason::HalfOpenFull | RejectReason::ForcedOpen
    )
}

/// Whether the replayer replays in this state: closed, or disabled by hand (every call runs,
/// so the journaled ones do too, rather than wait there until they expire).
fn lets_calls_through(state: State) -> bool {
    matches!(state, State::Closed | State::Disabled)
}

/// How a replay went.
enum Ran {
    Replayed,
    Failed,
    NotRun,
}

impl<A: Send + 'static> Shared<A> {
    pub(crate) fn retry_dead_letters(&self) -> usize {
        let n = self.journal.retry_dead_letters(self.clock.now());
        self.wake.pushed.notify_one();
        n
    }

    /// Replays one entry through the breaker. The replay function is user code: it runs
    /// under no lock of ours, and a panic (calling it, or polling its future) is a failure.
    async fn replay_one(&self, taken: Taken<A>, task: u64) -> Ran {
        let Taken { id, args, .. } = taken;
        let permit = match self.breaker.try_acquire_owned() {
            // The breaker re-opened and half-opened since the pass began: a replay is never
            // its probe. The slot goes back untouched, for a caller's call.
            Ok(permit) if permit.is_probe() => {
                permit.ignore();
                None
            }
            Ok(permit) => Some(permit),
            Err(_) => None,
        };
        let Some(permit) = permit else {
            self.settle(id, Settled::NotRun, task).await;
            return Ran::NotRun;
        };
        let outcome = match catch_unwind(AssertUnwindSafe(|| (self.replay)(args))) {
            Ok(mut future) => {
                core::future::poll_fn(|cx| {
                    match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                        Ok(Poll::Ready(result)) => Poll::Ready(Ok(result)),
                        Ok(Poll::Pending) => Poll::Pending,
                        Err(panic) => Poll::Ready(Err(panic)),
                    }
                })
                .await
            }
            Err(panic) => Err(panic),
        };
        match outcome {
            Ok(Ok(())) => {
                permit.success();
                self.settle(id, Settled::Replayed, task).await;
                Ran::Replayed
            }
            Ok(Err(message)) => {
                permit.failure_with(&message);
                self.settle(id, Settled::Failed, task).await;
                Ran::Failed
            }
            Err(panic) => {
                core::mem::forget(panic);
                tracing::error!(target: "breakerbox", breaker = %self.breaker.name(), id, "a replay panicked; counted as a failed replay");
                permit.failure_with(&"the replay panicked");
                self.settle(id, Settled::Failed, task).await;
                Ran::Failed
            }
        }
    }

    /// Ends entry `id`'s replay by replayer task `task`, off the runtime's threads (a journal
    /// may wait on its store).
    async fn settle(&self, id: u64, how: Settled, task: u64) {
        let journal = self.journal.clone();
        let now = self.clock.now();
        let held = self.held.clone();
        let settle = move || {
            journal.settle(id, how, now);
            let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
            if held.task == task && held.entry == Some(id) {
                held.entry = None;
            }
        };
        if !self.journal.may_block() {
            return settle();
        }
        let settled = tokio::task::spawn_blocking(settle).await;
        if let Err(e) = settled {
            tracing::error!(target: "breakerbox", breaker = %self.breaker.name(), id, error = %e, "a replay journal's settle panicked");
        }
    }

    /// The oldest due entry, taken by replayer task `task` off the runtime's threads (a
    /// journal may wait on its store). If a newer task started meanwhile, the entry goes
    /// straight back to the queue: the newer task has looked for held entries already.
    async fn take(&self, now: Duration, task: u64) -> Take<A> {
        let journal = self.journal.clone();
        let held = self.held.clone();
        let wake = self.wake.clone();
        let take = move || {
            let take = journal.take(now);
            if let Take::Due(taken) = &take {
                let mut held = held.lock().unwrap_or_else(PoisonError::into_inner);
                if held.task == task {
                    held.entry = Some(taken.id);
                } else {
                    drop(held);
                    journal.settle(taken.id, Settled::NotRun, now);
                    wake.pushed.notify_one();
                    return Take::Wait(now);
                }
            }
            take
        };
        if !self.journal.may_block() {
            return take();
        }
        match tokio::task::spawn_blocking(take).await {
            Ok(take) => take,
            Err(e) => {
                tracing::error!(target: "breakerbox", breaker = %self.breaker.name(), error = %e, "a replay journal's take panicked");
                Take::Wait(now.saturating_add(Duration::from_secs(1)))
            }
        }
    }

    fn closes(&self) -> u64 {
        self.wake.closes.load(Ordering::SeqCst)
    }
}

/// The replayer's task: the replays and, with the `metrics` feature, the journal's gauges.
/// It holds the replay weakly, and strongly only for a step (a take, a replay): when the last
/// `Replay` and handle go, the journal closes at once (a disk journal's file can be opened
/// again straight away), not when the aborted task is next run.
fn drive<A: Send + 'static>(shared: &Arc<Shared<A>>) -> impl Future<Output = ()> + Send + use<A> {
    let weak = Arc::downgrade(shared);
    let wake = shared.wake.clone();
    async move {
        #[cfg(feature = "metrics")]
        tokio::join!(
            replays(weak.clone(), wake),
            gauges_every(weak, GAUGES_EVERY)
        );
        #[cfg(not(feature = "metrics"))]
        replays(weak, wake).await;
    }
}

/// How often the gauges are read from the journal besides after each replay: entries pile up
/// while the breaker is open, and another instance sharing the journal replays them.
#[cfg(feature = "metrics")]
const GAUGES_EVERY: Duration = Duration::from_secs(1);

/// Reports the journal's gauges every `every`, for as long as the replayer runs.
#[cfg(feature = "metrics")]
async fn gauges_every<A: Send + 'static>(shared: Weak<Shared<A>>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        report_gauges(&shared).await;
    }
}

/// Reads the journal's status and reports its gauges, off the runtime's threads for a journal
/// that may block. A status the journal's store cannot give leaves the gauges as they were.
#[cfg(feature = "metrics")]
async fn report_gauges<A: Send + 'static>(shared: &Arc<Shared<A>>) {
    let journal = shared.journal.clone();
    let name = shared.breaker.name().to_owned();
    let status = move || {
        if let Ok(status) = journal.try_status() {
            crate::stats::gauges(&name, &status);
        }
    };
    if shared.journal.may_block() {
        let _ = tokio::task::spawn_blocking(status).await;
    } else {
        status();
    }
}

/// The replays: passes over the journal while the breaker is closed. The replay is held
/// only for a step; every wait is made without it.
async fn replays<A: Send + 'static>(weak: Weak<Shared<A>>, wake: Arc<Wake>) {
    // After a failed replay: no replay until the breaker closes again (more closings than
    // this count) or, if it stays closed, until this time.
    let mut paused: Option<(u64, Duration)> = None;
    // An entry the task before this one took and never settled (its runtime shut down
    // mid-replay) goes back to the queue as it was: replayed again, at least once.
    let mut task = 0;
    if let Some(shared) = weak.upgrade() {
        let orphan = {
            let mut held = shared.held.lock().unwrap_or_else(PoisonError::into_inner);
            held.task += 1;
            task = held.task;
            held.entry.take()
        };
        if let Some(id) = orphan {
            shared.settle(id, Settled::NotRun, task).await;
        }
    }
    loop {
        let Some(shared) = weak.upgrade() else {
            return;
        };
        if !lets_calls_through(shared.breaker.state()) {
            drop(shared);
            wake.closed.notified().await;
            continue;
        }
        let now = shared.clock.now();
        if let Some((closes, until)) = paused {
            if shared.closes() == closes && now < until {
                drop(shared);
                tokio::select! {
                    () = wake.closed.notified() => {}
                    () = tokio::time::sleep(until - now) => {}
                }
                continue;
            }
            paused = None;
        }
        let took = shared.take(now, task).await;
        match took {
            Take::Empty => {
                drop(shared);
                tokio::select! {
                    () = wake.closed.notified() => {}
                    () = wake.pushed.notified() => {}
                }
            }
            Take::Wait(at) => {
                drop(shared);
                tokio::select! {
                    () = wake.closed.notified() => {}
                    () = wake.pushed.notified() => {}
                    () = tokio::time::sleep(at.saturating_sub(now)) => {}
                }
            }
            Take::Due(taken) => {
                let attempts = taken.attempts;
                let closes = shared.closes();
                let ran = shared.replay_one(taken, task).await;
                #[cfg(feature = "metrics")]
                report_gauges(&shared).await;
                match ran {
                    Ran::Replayed => {}
                    Ran::Failed => {
                        let wait = shared.config.backoff_after(attempts.saturating_add(1));
                        paused = Some((closes, shared.clock.now().saturating_add(wait)));
                    }
                    // Refused: open again (the loop then waits for it to close), or closed with
                    // its `max_concurrent` calls running, tried again after the spacing.
                    Ran::NotRun => {}
                }
                let spacing = shared.config.spacing();
                drop(shared);
                tokio::time::sleep(spacing).await;
            }
        }
    }
}

impl<A: Send + 'static> crate::handle::Control for Shared<A> {
    fn name(&self) -> &str {
        self.breaker.name()
    }
    fn status(&self) -> JournalStatus {
        self.journal.status()
    }
    fn dead_letters(&self) -> Vec<EntryInfo> {
        self.journal.dead_letters()
    }
    fn retry_dead_letters(&self) -> usize {
        Shared::retry_dead_letters(self)
    }
    fn drop_dead_letters(&self) -> usize {
        self.journal.drop_dead_letters()
    }
    fn store_error(&self) -> Option<String> {
        self.journal.store_error()
    }
    fn now(&self) -> Duration {
        self.clock.now()
    }
    fn may_block(&self) -> bool {
        self.journal.may_block()
    }
    fn try_status(&self) -> Result<JournalStatus, crate::StoreError> {
        self.journal.try_status()
    }
    fn try_dead_letters(&self) -> Result<Vec<EntryInfo>, crate::StoreError> {
        self.journal.try_dead_letters()
    }
    fn try_retry_dead_letters(&self) -> Result<usize, crate::StoreError> {
        let n = self.journal.try_retry_dead_letters(self.clock.now())?;
        self.wake.pushed.notify_one();
        Ok(n)
    }
    fn try_drop_dead_letters(&self) -> Result<usize, crate::StoreError> {
        self.journal.try_drop_dead_letters()
    }
}
