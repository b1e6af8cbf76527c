//! Support for `#[circuit_breaker(replay = …)]`, re-exported by the facade's `__private`. Not
//! public API.

use core::time::Duration;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use breakerbox_runtime::{Breaker, Rejected};
use tokio::sync::Notify;

use crate::StartError;
pub use crate::{Replay, ReplayConfig};

/// The attribute's replay of one function, started off the call path: each call asks for the
/// start ([`start`](ReplaySlot::start), which never waits), and it runs on tokio's blocking
/// threads (where a disk journal opens its file, a fleet journal reaches its Redis). A call the
/// breaker admits never waits for it; a rejected call waits for a start under way, bounded by
/// the journal's own timeout: a plain `fn`'s on its thread ([`get`](ReplaySlot::get)), an
/// `async fn`'s without holding its runtime's thread ([`get_async`](ReplaySlot::get_async)). A
/// failed start is tried again at a later call, at most once a second.
pub struct ReplaySlot<A> {
    cell: OnceLock<Replay<A>>,
    state: Mutex<Starting>,
    started: Condvar,
    /// Wakes the `async fn` calls waiting for a start under way when it ends.
    ready: Notify,
}

#[derive(Default)]
struct Starting {
    /// A start runs now.
    running: bool,
    /// When a start failed last.
    failed: Option<Instant>,
}

/// How long after a failed start the next is tried.
const RETRY_START: Duration = Duration::from_secs(1);

impl<A> Default for ReplaySlot<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A> ReplaySlot<A> {
    /// Not started.
    pub const fn new() -> Self {
        ReplaySlot {
            cell: OnceLock::new(),
            state: Mutex::new(Starting {
                running: false,
                failed: None,
            }),
            started: Condvar::new(),
            ready: Notify::const_new(),
        }
    }
}

impl<A: Send + 'static> ReplaySlot<A> {
    /// Starts the replay on a blocking thread of the current tokio runtime, unless it has
    /// started, is starting, or failed less than a second ago; outside a runtime, nothing
    /// (the next call inside one starts it). Never waits.
    #[inline]
    pub fn start(
        &'static self,
        start: impl FnOnce() -> Result<Replay<A>, StartError> + Send + 'static,
    ) {
        if self.cell.get().is_none() {
            self.start_now(start);
        }
    }

    #[cold]
    #[inline(never)]
    fn start_now(
        &'static self,
        start: impl FnOnce() -> Result<Replay<A>, StartError> + Send + 'static,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            let mut state = self.lock();
            if self.cell.get().is_some()
                || state.running
                || state.failed.is_some_and(|at| at.elapsed() < RETRY_START)
            {
                return;
            }
            state.running = true;
        }
        let mut pending = PendingStart {
            slot: self,
            start: Some(start),
        };
        runtime.spawn_blocking(move || {
            let Some(start) = pending.start.take() else {
                return;
            };
            let started = catch_unwind(AssertUnwindSafe(start));
            let mut state = self.lock();
            match started {
                Ok(Ok(replay)) => {
                    let _ = self.cell.set(replay);
                }
                Ok(Err(e)) => {
                    state.failed = Some(Instant::now());
                    tracing::warn!(target: "breakerbox", error = %e, "a #[circuit_breaker(replay = …)] function's replay could not start; its rejected calls are not journaled");
                }
                Err(panic) => {
                    core::mem::forget(panic);
                    state.failed = Some(Instant::now());
                    tracing::error!(target: "breakerbox", "a #[circuit_breaker(replay = …)] function's replay panicked while starting; its rejected calls are not journaled");
                }
            }
            self.ended(state);
        });
    }

    /// Ends the start under way: the calls waiting for it go on.
    fn ended(&self, mut state: MutexGuard<'_, Starting>) {
        state.running = false;
        self.started.notify_all();
        drop(state);
        self.ready.notify_waiters();
    }

    /// The replay, once started; a start under way is waited for.
    pub fn get(&self) -> Option<&Replay<A>> {
        if let Some(replay) = self.cell.get() {
            return Some(replay);
        }
        let mut state = self.lock();
        while state.running {
            state = self
                .started
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(state);
        self.cell.get()
    }

    /// The replay, once started; a start under way is waited for without holding the thread
    /// (an `async fn`'s call: its runtime's other tasks run meanwhile).
    pub async fn get_async(&self) -> Option<&Replay<A>> {
        loop {
            if let Some(replay) = self.cell.get() {
                return Some(replay);
            }
            // Listening before `running` is read: the end of the start is not missed.
            let ended = self.ready.notified();
            let mut ended = core::pin::pin!(ended);
            ended.as_mut().enable();
            if !self.lock().running {
                return self.cell.get();
            }
            ended.await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Starting> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A start handed to tokio's blocking threads. Dropped before it ran (its runtime shut down
/// first), it ends the start all the same, so that the calls waiting for it go on and the next
/// call starts the replay again, rather than every call waiting for it for good.
struct PendingStart<A: Send + 'static, F> {
    slot: &'static ReplaySlot<A>,
    start: Option<F>,
}

impl<A: Send + 'static, F> Drop for PendingStart<A, F> {
    fn drop(&mut self) {
        if self.start.is_some() {
            self.slot.ended(self.slot.lock());
        }
    }
}

/// Journals a rejected call of an `async fn` (the attribute's one call for it): waits for a
/// start under way, then journals `call()`'s key and arguments with
/// [`Replay::journal_keyed_async`], the journal's work on tokio's blocking threads: no runtime
/// thread waits on a disk or a Redis. `call` (the key's expression, and the arguments moved
/// into one tuple) runs only if the replay has started, as the plain `fn`'s path does.
pub async fn journal_async<A: Send + 'static>(
    slot: &'static ReplaySlot<A>,
    rejected: Rejected,
    call: impl FnOnce() -> (Option<String>, A),
) -> Rejected {
    match slot.get_async().await {
        Some(replay) => {
            let (key, args) = call();
            replay.journal_keyed_async(rejected, key, args).await
        }
        None => rejected,
    }
}

/// Where `replay = "disk"` keeps its journals: `$BREAKERBOX_REPLAY_DIR`, or
/// `breakerbox-replay` in the working directory.
pub fn dir() -> PathBuf {
    std::env::var_os("BREAKERBOX_REPLAY_DIR")
        .map_or_else(|| PathBuf::from("breakerbox-replay"), PathBuf::from)
}

/// A journal file's name for a breaker: its name with every byte but ASCII letters, digits,
/// `-` and `_` written as `%xx`, so that two names never share a file.
pub fn file_name(breaker: &str) -> String {
    let mut name = String::with_capacity(breaker.len() + 8);
    for byte in breaker.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            name.push(byte as char);
        } else {
            name.push_str(&format!("%{byte:02x}"));
        }
    }
    name.push_str(".journal");
    name
}

/// Starts `replay = "memory"`.
pub fn memory<A, F, Fut>(
    breaker: &Breaker,
    config: ReplayConfig,
    replay: F,
) -> Result<Replay<A>, StartError>
where
    A: MemoryArgs,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    Replay::builder(breaker).config(config).memory(replay)
}

/// Starts `replay = "disk"`: the journal `dir()/file_name(breaker)`, made if missing.
pub fn disk<A, F, Fut>(
    breaker: &Breaker,
    config: ReplayConfig,
    replay: F,
) -> Result<Replay<A>, StartError>
where
    A: DiskArgs,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let dir = dir();
    std::fs::create_dir_all(&dir).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "its folder {} (`BREAKERBOX_REPLAY_DIR`, else `breakerbox-replay` in the \
                 working directory) could not be made: {e}",
                dir.display()
            ),
        )
    })?;
    let path = dir.join(file_name(breaker.name()));
    let (replay, recovery) = Replay::builder(breaker)
        .config(config)
        .disk(&path, replay)?;
    tracing::info!(target: "breakerbox", breaker = %breaker.name(), path = %path.display(), entries = recovery.entries, dead_letters = recovery.dead_letters, damaged = recovery.damaged, "a replay journal was opened");
    Ok(replay)
}

/// Starts `replay = "fleet"`: the journal in the Redis of the fleet running in this process
/// (`Fleet::running`), shared by every instance of the fleet.
/// `replay_claim_after`, if given, replaces the journal's default.
#[cfg(feature = "redis")]
pub fn fleet<A, F, Fut>(
    breaker: &Breaker,
    config: ReplayConfig,
    claim_after: Option<Duration>,
    replay: F,
) -> Result<Replay<A>, StartError>
where
    A: FleetArgs,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let builder = Replay::builder(breaker).config(config);
    let replay = match claim_after {
        None => builder.fleet(replay)?,
        Some(after) => {
            let options = crate::RedisOptions::running_fleet()
                .ok_or_else(|| crate::replayer::no_fleet(breaker.name()))?;
            builder.redis(options.claim_after(after), replay)?
        }
    };
    tracing::info!(target: "breakerbox", breaker = %breaker.name(), "a replay journal in the fleet's Redis was opened");
    Ok(replay)
}

/// Stands in for `fleet` without the feature `redis`: the attribute's `require_replay_fleet!`
/// is the error then, and this never starts.
#[cfg(not(feature = "redis"))]
pub fn fleet<A, F, Fut>(
    _breaker: &Breaker,
    _config: ReplayConfig,
    _claim_after: Option<Duration>,
    _replay: F,
) -> Result<Replay<A>, StartError>
where
    A: FleetArgs,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    Err(StartError::Store(
        "replay = \"fleet\" needs breakerbox's `redis` feature".to_owned(),
    ))
}

/// What `replay = "memory"` journals: each argument must be `Clone + Send + 'static`.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker(replay = \"memory\")]` journals this argument, so it must be `Clone + Send + 'static`, but `{Self}` is not",
    label = "journaled for replay: needs `Clone + Send + 'static`",
    note = "a rejected call's arguments wait in memory until the breaker closes, and each replay gets a copy: derive or implement `Clone`, and own the data (no borrowed arguments)"
)]
pub trait MemoryArg {}

#[diagnostic::do_not_recommend]
impl<T: Clone + Send + 'static> MemoryArg for T {}

/// Checks one argument of a `replay = "memory"` function (the call is located at it).
#[inline(always)]
pub fn memory_arg<T: MemoryArg>(_: &T) {}

/// What `replay = "disk"` journals: each argument must be `Serialize + DeserializeOwned +
/// Send + 'static`.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker(replay = \"disk\")]` writes this argument to disk, so it must be `Serialize + DeserializeOwned + Send + 'static`, but `{Self}` is not",
    label = "journaled to disk: needs `serde::Serialize + serde::de::DeserializeOwned`",
    note = "derive `serde::Serialize` and `serde::Deserialize` for it (owning its data: no borrowed arguments), or use `replay = \"memory\"`, which needs `Clone` instead"
)]
pub trait DiskArg {}

#[diagnostic::do_not_recommend]
impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> DiskArg for T {}

/// Checks one argument of a `replay = "disk"` function (the call is located at it).
#[inline(always)]
pub fn disk_arg<T: DiskArg>(_: &T) {}

/// What `replay = "fleet"` journals: each argument must be `Serialize + DeserializeOwned +
/// Send + 'static`.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker(replay = \"fleet\")]` writes this argument to the fleet's Redis, so it must be `Serialize + DeserializeOwned + Send + 'static`, but `{Self}` is not",
    label = "journaled in Redis: needs `serde::Serialize + serde::de::DeserializeOwned`",
    note = "derive `serde::Serialize` and `serde::Deserialize` for it (owning its data: no borrowed arguments); every instance of the fleet may replay it"
)]
pub trait FleetArg {}

#[diagnostic::do_not_recommend]
impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> FleetArg for T {}

/// Checks one argument of a `replay = "fleet"` function (the call is located at it).
#[inline(always)]
pub fn fleet_arg<T: FleetArg>(_: &T) {}

/// The arguments of a `replay = "memory"` function, as one tuple: what the journal holds.
/// Each argument is checked on its own first (`memory_arg`), where the error is clearer.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker(replay = \"memory\")]` journals the arguments as one `{Self}`, which is not `Clone + Send + 'static`: see the error at the argument that is not",
    label = "the journaled arguments"
)]
pub trait MemoryArgs: Clone + Send + 'static {}

#[diagnostic::do_not_recommend]
impl<T: Clone + Send + 'static> MemoryArgs for T {}

/// The arguments of a `replay = "disk"` function, as one tuple (see [`MemoryArgs`]).
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker(replay = \"disk\")]` journals the arguments as one `{Self}`, which is not `Serialize + DeserializeOwned + Send + 'static`: see the error at the argument that is not",
    label = "the journaled arguments"
)]
pub trait DiskArgs: serde::Serialize + serde::de::DeserializeOwned + Send + 'static {}

#[diagnostic::do_not_recommend]
impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> DiskArgs for T {}

/// The arguments of a `replay = "fleet"` function, as one tuple (see [`MemoryArgs`]).
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker(replay = \"fleet\")]` journals the arguments as one `{Self}`, which is not `Serialize + DeserializeOwned + Send + 'static`: see the error at the argument that is not",
    label = "the journaled arguments"
)]
pub trait FleetArgs: serde::Serialize + serde::de::DeserializeOwned + Send + 'static {}

#[diagnostic::do_not_recommend]
impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> FleetArgs for T {}

/// A failed replay's message: the error's `Display`, where it has one, cut as a breaker's
/// failure is (at 1 024 bytes, formatting stopped there; a panic in it gives
/// `<Display panicked>`).
pub fn failure_message(cause: Option<&dyn core::fmt::Display>) -> String {
    cause.map_or_else(
        || "the replay failed".to_owned(),
        breakerbox_runtime::__integrations::failure_message,
    )
}

#[cfg(test)]
mod tests {
    use super::{failure_message, file_name};

    #[test]
    fn a_failed_replays_message_is_cut_as_a_breakers_failure_is() {
        struct Body;
        impl core::fmt::Display for Body {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                (0..100_000).try_for_each(|_| f.write_str("0123456789"))
            }
        }
        struct Panics;
        impl core::fmt::Display for Panics {
            fn fmt(&self, _: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                panic!("a Display that panics")
            }
        }
        let cut = failure_message(Some(&Body));
        assert_eq!(
            cut,
            format!("{}… (cut)", "0123456789".repeat(103)[..1024].to_owned())
        );
        assert_eq!(failure_message(Some(&Panics)), "<Display panicked>");
        assert_eq!(failure_message(None), "the replay failed");
    }

    #[test]
    fn journal_file_names_keep_names_apart() {
        assert_eq!(file_name("hooks"), "hooks.journal");
        assert_eq!(file_name("a/b"), "a%2fb.journal");
        assert_eq!(file_name("a%2fb"), "a%252fb.journal");
        assert_eq!(file_name("app::send"), "app%3a%3asend.journal");
    }
}
