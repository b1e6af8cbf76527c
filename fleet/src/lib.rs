//! Fleet mode: breakers shared by many processes and hosts through Redis, local first. Use it
//! through the `breakerbox` crate, as `breakerbox::fleet` (feature `redis`). `docs/fleet.md`
//! has the protocol, the guarantees and a three-node demo.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use breakerbox_fleet::{Fleet, FleetConfig};
//!
//! // In a tokio runtime, after `registry().load_toml(…)`:
//! let fleet = Fleet::start(FleetConfig::new("redis://127.0.0.1:6379/").share("payments*"))?;
//! // Every registry breaker named `payments…` now opens, closes, is forced open, disabled or
//! // reset on every instance when it does on one. Keep `fleet` alive as long as the process.
//! # drop(fleet); Ok(()) }
//! ```
//!
//! # How it works
//!
//! - **Local first.** Every call is decided by the local breaker, as without fleet mode: the
//!   call path reads nothing from the network and takes no lock of the fleet's. A shared
//!   breaker has one more state-change listener, which hands the change to a channel (no
//!   waiting) read by the fleet's background task; nothing is added to a call that changes no
//!   state.
//! - **One record per breaker, changed only by a script.** The hash `{<prefix>:<name>}` holds
//!   the state, an epoch, the open-until time in the Redis server's clock, the reopen count,
//!   the reason, the last failure and the instance the change came from. The script
//!   (`record.lua`, sent with `EVALSHA`) compares the caller's last-seen epoch with the record's
//!   and writes only if they match (manual control writes whatever the record holds), then
//!   publishes the new record on `<prefix>:changes`. No lock is held across a call.
//! - **Remote changes arrive asynchronously.** Each instance subscribes (RESP3 push messages on
//!   the connection manager's connection) and takes a newer record on as a transition of its
//!   local breaker ([`Breaker::import_state`](breakerbox_runtime::Breaker::import_state), reason
//!   [`Imported`](breakerbox_runtime::Reason::Imported)). Open times travel as "until T, and it is now N"
//!   on the server's clock, turned into a local remaining time, so host clock skew does not
//!   matter. Imported changes are never pushed back: no echo.
//! - **A failing store.** A store operation only ever delays the fleet's own task, by at most
//!   the [`timeout`](FleetConfig::timeout). While the store is unreachable, hung or
//!   partitioned, every instance keeps deciding alone with its local breaker (by default: see
//!   **Store policy** below); changes it makes meanwhile are kept (the latest per breaker) and
//!   pushed when the store answers again, if they still hold. The connection is retried with backoff; every shared record is read
//!   again after a reconnect and every [`resync_every`](FleetConfig::resync_every), because
//!   pub/sub loses messages. A record that vanished (`FLUSHALL`, a restart without persistence)
//!   is written again by the instances whose breaker is open, forced open or disabled.
//!
//! - **Fleet-wide half-open.** An open record is held one `probe_timeout` past its open time;
//!   then each instance asks `probe.lua` for leases: at most `half_open_calls` exist at once,
//!   one lease is one probe call ([`Breaker::set_probe_budget`](breakerbox_runtime::Breaker::set_probe_budget)),
//!   and the instances without one keep rejecting (see `lease.rs`).
//!
//! - **Store policy.** [`FleetConfig::on_store_error`]: while the store is unreachable, shared
//!   breakers decide locally (the default), or are held forced open, or disabled, and get
//!   their own state back when it answers, or the fleet's record published meanwhile
//!   ([`OnStoreError`]). Dropping the `Fleet`, or the runtime its task runs on, gives them
//!   back at once.
//!
//! - **One record's problem is that record's.** A value of another type under a breaker's key,
//!   or a record this instance cannot read, leaves that breaker alone (tried again with
//!   backoff, its local change kept for when the key is readable or empty); every other
//!   breaker goes on, and nothing is held for it. A foreign message on the channel is skipped.
//!
//! - **Fleet counts.** A failure-rate breaker over a time window also sends its judged calls
//!   and failures every 100 ms; a script sums the fleet's window and trips the record when the
//!   fleet's rate reaches the limit (see `counts.rs`). The counts are those of the current
//!   record: any write of it, a reset on any instance too, starts the window empty.
//!
//! - **Order.** The task reads the local changes queued for it before published records, so a
//!   record written before a local change is not taken on over it; a manual change a record
//!   was taken on over all the same (in the moment before its message) is written, and then
//!   taken on here too.
//!
//! - **Production Redis.** TLS (`rediss://`, feature `tls`), Sentinel (`redis+sentinel://`,
//!   feature `sentinel`), Cluster (`redis+cluster://`, feature `cluster`); [`Fleet::connect`]
//!   checks the connection at start (docs/fleet.md, "Production Redis").
//!
//! The task talks to the store only through one seam (`store.rs`), so a deterministic
//! simulator (`sim/`, tests only) runs several instances of this code against a model store
//! that runs the same Lua scripts, under seeded faults (docs/fleet.md, "What is guaranteed").
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod connect;
mod link;
mod record;
#[cfg(test)]
mod sim;
mod store;
mod task;

use core::time::Duration;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use breakerbox_runtime::__edge::BreakerExt;
use breakerbox_runtime::registry;
use breakerbox_runtime::{Breaker, SharedState, State, WeakBreaker};
use breakerbox_runtime::{Event, Reason};

pub use config::{FleetConfig, FleetConfigError, FleetTrip, OnStoreError, Quorum};
pub use link::{StoreConnection, StoreLink};

/// The fleet started last in this process ([`Fleet::running`]).
static RUNNING: Mutex<std::sync::Weak<Inner>> = Mutex::new(std::sync::Weak::new());

/// A running fleet: a background task on the tokio runtime that pushes the shared breakers'
/// local changes to Redis and applies the others'. Dropping it stops the task; the breakers
/// go on, unshared (a breaker held for a failing store, `on_store_error`, gets its own state
/// back first).
pub struct Fleet {
    shared: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

/// Why a fleet could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// The URL is not a Redis URL the client accepts, or needs a feature this build lacks.
    #[error("fleet: bad Redis URL `{url}`: {reason}")]
    Url {
        /// The URL, its password shown as `***`.
        url: String,
        /// Why.
        reason: String,
    },
    /// The [`tls_ca`](FleetConfig::tls_ca) file could not be read.
    #[error("fleet: cannot read the TLS CA file `{}`: {source}", path.display())]
    TlsCa {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// [`Fleet::connect`] could not reach the store, log in or agree on TLS: a wrong password
    /// or user, a certificate it does not trust, nothing listening.
    #[error("fleet: cannot connect to `{url}`: {source}")]
    Connect {
        /// The URL, its password shown as `***`.
        url: String,
        /// Why, as the client says it.
        source: redis::RedisError,
    },
    /// [`Fleet::start`] was called outside a tokio runtime.
    #[error("fleet: Fleet::start must be called inside a tokio runtime (it spawns its task there)")]
    NoRuntime,
}

/// What a fleet has done so far, from [`Fleet::status`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetStatus {
    /// Whether the last store operation succeeded.
    pub connected: bool,
    /// Local changes written to the store.
    pub pushed: u64,
    /// Remote changes taken on by local breakers.
    pub applied: u64,
    /// Store operations that failed or timed out.
    pub store_errors: u64,
    /// Complete re-reads of every shared record.
    pub resyncs: u64,
    /// Local changes waiting to be written (the latest per breaker: at most one manual and one
    /// automatic change per shared breaker, however long the store is down).
    pub pending: u64,
    /// Breakers this fleet shares.
    pub shared: u64,
    /// The last store failure, as the client said it (`None` before the first): a wrong
    /// password shows here when the fleet was started with [`Fleet::start`].
    pub last_error: Option<String>,
}

/// What the listeners and the handle share with the task.
pub(crate) struct Inner {
    pub(crate) config: FleetConfig,
    pub(crate) instance: String,
    tx: mpsc::UnboundedSender<task::Message>,
    pub(crate) connected: AtomicBool,
    pub(crate) pushed: AtomicU64,
    pub(crate) applied: AtomicU64,
    pub(crate) store_errors: AtomicU64,
    pub(crate) resyncs: AtomicU64,
    /// `FleetStatus::pending` and `shared`, as the task last left them.
    pub(crate) pending: AtomicU64,
    pub(crate) shared: AtomicU64,
    /// While the store is unreachable under `on_store_error = "open" | "closed"`: each held
    /// breaker and the state it gets back. Here rather than in the task, so that dropping the
    /// `Fleet` gives them back at once, whatever the task is doing.
    pub(crate) held: Mutex<Option<BTreeMap<String, Held>>>,
    /// `FleetStatus::last_error`.
    pub(crate) last_error: Mutex<Option<String>>,
    /// Every shared breaker's live instances, as the last heartbeat read them (task/quorum.rs).
    pub(crate) live: Mutex<BTreeMap<String, Vec<LiveInstance>>>,
    /// The last quorum tally of each breaker this instance reported a trip of (task/quorum.rs).
    pub(crate) tallies: Mutex<BTreeMap<String, task::Tally>>,
}

/// One instance sharing a breaker, as the fleet's last heartbeat read it: from
/// [`Fleet::instances`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveInstance {
    /// Its name ([`FleetConfig::instance`]).
    pub instance: String,
    /// Its local state of the breaker when it last beat (`None`: a state this version does not
    /// know).
    pub state: Option<State>,
    /// How long its heartbeat had to live when it was read (three
    /// [`resync_every`](FleetConfig::resync_every)s when it beats).
    pub expires_in: Duration,
    /// When it was read, on this process's clock.
    pub read_at: tokio::time::Instant,
    /// Whether it is this process.
    pub this: bool,
}

/// A shared breaker as the fleet sees it: from [`Fleet::instances`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetBreaker {
    /// The breaker's name.
    pub name: String,
    /// What a local trip of it does to the fleet.
    pub trip: FleetTrip,
    /// The instances sharing it whose heartbeat was live when last read, this one included,
    /// each with its local state, by name: the fleet's hosts reporting.
    pub instances: Vec<LiveInstance>,
    /// Under a quorum, the last tally this instance's report of a trip got back: `(open,
    /// needed, live)`, the open reports of live instances, the quorum among them, and how many
    /// were live.
    pub last_tally: Option<(u32, u32, u32)>,
}

/// A breaker held forced open or disabled while the store is unreachable.
pub(crate) struct Held {
    pub(crate) breaker: WeakBreaker,
    /// What it gets back: its state when it was held, or the fleet's record taken on since.
    pub(crate) state: SharedState,
    /// When `state` was taken: its open time runs on from then.
    pub(crate) since: tokio::time::Instant,
    /// `Breaker::manual_changes` when it was held: a hand on it since (a `force_open` of a
    /// breaker held forced open changes no state and tells nothing) stands.
    pub(crate) manual: u32,
}

impl Held {
    /// The state to give back now: the open time that has passed since is counted.
    pub(crate) fn now(&self) -> SharedState {
        let mut state = self.state;
        if let Some(left) = &mut state.open_remaining {
            *left = left.saturating_sub(self.since.elapsed());
        }
        state
    }
}

/// What [`Fleet::view`] gives: the fleet's view of its instances, readable from anywhere while
/// the fleet runs, and empty once it is dropped.
#[derive(Clone, Debug)]
pub struct FleetView {
    shared: std::sync::Weak<Inner>,
    instance: String,
}

impl FleetView {
    /// [`Fleet::instances`], or nothing once the fleet is dropped.
    pub fn instances(&self) -> Vec<FleetBreaker> {
        self.shared
            .upgrade()
            .map_or_else(Vec::new, |s| s.instances())
    }

    /// [`Fleet::instance`]: this process's name in the fleet.
    pub fn instance(&self) -> &str {
        &self.instance
    }
}

impl Inner {
    fn instances(&self) -> Vec<FleetBreaker> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let tallies = self
            .tallies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        live.into_iter()
            .map(|(name, instances)| FleetBreaker {
                trip: self.config.trip_of(&name),
                last_tally: tallies.get(&name).map(|t| (t.open, t.needed, t.live)),
                name,
                instances,
            })
            .collect()
    }

    /// A listener's work: hand a local change to the task. Never waits.
    fn tell(&self, event: &Event, breaker: Option<&Breaker>) {
        if event.reason == Reason::Imported {
            // A remote change applied here: not ours to push. The task is told all the same,
            // in the breaker's order of events, so that it drops a local change made before
            // this one and not yet written (the record it came from is older).
            let _ = self.tx.send(task::Message::Imported {
                name: event.name.clone(),
            });
            return;
        }
        let _ = self.tx.send(task::Message::Changed {
            name: event.name.clone(),
            to: event.to,
            reason: event.reason,
            breaker: breaker.map(Breaker::downgrade),
        });
    }
}

impl Fleet {
    /// Starts the fleet's task on the current tokio runtime and returns at once: it connects
    /// in the background (with retries), so a store that is down at startup only means the
    /// breakers decide alone until it answers.
    ///
    /// The registry's breakers whose names match the config's [`share`](FleetConfig::share)
    /// patterns are shared as they are created (those created before are found within one
    /// [`resync_every`](FleetConfig::resync_every)). Start it after `load_toml`: sharing creates
    /// no breaker, but a remote change must find the breaker created.
    pub fn start(config: FleetConfig) -> Result<Fleet, FleetError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| FleetError::NoRuntime)?;
        let (store, pushes) = production_store(&config)?;
        Ok(Fleet::with_store(config, Box::new(store), pushes, &handle))
    }

    /// Starts the fleet as [`start`](Fleet::start) does, once its store has answered a `PING`
    /// (connected, logged in, TLS agreed): a wrong password or user, a certificate it does not
    /// trust or nothing listening is an error here ([`FleetError::Connect`]), where `start`
    /// would only count store errors. Waits at most eight [`timeout`](FleetConfig::timeout)s
    /// (at least 2 s). After it, the fleet reconnects by itself as `start`'s does.
    ///
    /// `start` stays lazy on purpose: an application that must come up while its Redis is
    /// down uses it and decides locally until Redis answers.
    pub async fn connect(config: FleetConfig) -> Result<Fleet, FleetError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| FleetError::NoRuntime)?;
        let (mut store, pushes) = production_store(&config)?;
        let limit = (config.timeout * 8).max(core::time::Duration::from_secs(2));
        let answer = tokio::time::timeout(limit, store::Store::ping(&mut store)).await;
        let source = match answer {
            Ok(Ok(())) => return Ok(Fleet::with_store(config, Box::new(store), pushes, &handle)),
            Ok(Err(e)) => e,
            Err(_) => redis::RedisError::from((
                redis::ErrorKind::Io,
                "no answer",
                format!("nothing within {limit:?}"),
            )),
        };
        Err(FleetError::Connect {
            url: redact(&config.url),
            source,
        })
    }

    /// A fleet over any store (the simulator's model, in tests), its task spawned on `handle`.
    fn with_store(
        config: FleetConfig,
        store: Box<dyn store::Store>,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
        handle: &tokio::runtime::Handle,
    ) -> Fleet {
        let instance = config.instance.clone().unwrap_or_else(default_instance);
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Inner {
            config,
            instance,
            tx,
            connected: AtomicBool::new(false),
            pushed: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            store_errors: AtomicU64::new(0),
            resyncs: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            shared: AtomicU64::new(0),
            held: Mutex::new(None),
            last_error: Mutex::new(None),
            live: Mutex::new(BTreeMap::new()),
            tallies: Mutex::new(BTreeMap::new()),
        });
        if !shared.config.share.is_empty() {
            let weak = Arc::downgrade(&shared);
            registry().on_state_change(move |event| {
                if let Some(shared) = weak.upgrade()
                    && shared.config.shares(&event.name)
                {
                    shared.tell(event, None);
                }
            });
        }
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&shared);
        let task = task::Task::with_store(store, pushes, shared.clone(), rx);
        let task = handle.spawn(task.run());
        Fleet { shared, task }
    }

    /// The config of the fleet started last in this process, while it runs (`None` before
    /// one starts and once it is dropped): where the other parts of breakerbox that keep data
    /// in the fleet's store find it (`#[circuit_breaker(replay = "fleet")]`).
    pub fn running() -> Option<FleetConfig> {
        let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner()).upgrade();
        running.map(|shared| shared.config.clone())
    }

    /// This fleet's config.
    pub fn config(&self) -> &FleetConfig {
        &self.shared.config
    }

    /// Shares `breaker` (any breaker, [`Breaker::new`] ones too) under its name. The fleet
    /// holds it weakly: a dropped breaker is no longer shared.
    pub fn share(&self, breaker: &Breaker) {
        let weak = Arc::downgrade(&self.shared);
        let own = breaker.downgrade();
        breaker.on_state_change(move |event| {
            if let (Some(shared), Some(breaker)) = (weak.upgrade(), own.upgrade()) {
                shared.tell(event, Some(&breaker));
            }
        });
        let _ = self.shared.tx.send(task::Message::Track {
            name: breaker.name().to_owned(),
            breaker: breaker.downgrade(),
        });
    }

    /// Re-reads every shared record now and pushes what is pending; `true` once every store
    /// operation succeeded. Waits for the fleet's task, never for longer than a few of its
    /// timeouts per shared breaker.
    pub async fn resync(&self) -> bool {
        let (done, wait) = oneshot::channel();
        if self.shared.tx.send(task::Message::Resync(done)).is_err() {
            return false;
        }
        wait.await.unwrap_or(false)
    }

    /// The name this process writes as a record's `origin`.
    pub fn instance(&self) -> &str {
        &self.shared.instance
    }

    /// Every shared breaker with the instances sharing it, each with its local state of it,
    /// as the fleet's task last read them (every [`resync_every`](FleetConfig::resync_every));
    /// no store operation here. A breaker is listed once this instance has beaten for it.
    pub fn instances(&self) -> Vec<FleetBreaker> {
        self.shared.instances()
    }

    /// A handle that reads [`instances`](Fleet::instances) for as long as this fleet runs (an
    /// admin endpoint's, say): cheap to clone, and it keeps nothing alive.
    pub fn view(&self) -> FleetView {
        FleetView {
            shared: Arc::downgrade(&self.shared),
            instance: self.shared.instance.clone(),
        }
    }

    /// What the fleet has done so far.
    pub fn status(&self) -> FleetStatus {
        let s = &self.shared;
        FleetStatus {
            connected: s.connected.load(Ordering::Relaxed),
            pushed: s.pushed.load(Ordering::Relaxed),
            applied: s.applied.load(Ordering::Relaxed),
            store_errors: s.store_errors.load(Ordering::Relaxed),
            resyncs: s.resyncs.load(Ordering::Relaxed),
            pending: s.pending.load(Ordering::Relaxed),
            shared: s.shared.load(Ordering::Relaxed),
            last_error: s
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

impl Drop for Fleet {
    /// Stops the task, and gives every breaker held for a failing store back its own state
    /// (open time counted on): unshared, the breakers decide alone, as they would have.
    fn drop(&mut self) {
        self.task.abort();
        give_back(&self.shared);
    }
}

/// Gives every held breaker back its state. The task does the same when its future is dropped
/// (its runtime shut down, or the abort above landing after a hold it made meanwhile).
pub(crate) fn give_back(shared: &Inner) -> usize {
    // Taken out of the lock first: taking a state on runs the breaker's listeners.
    let held = shared.held.lock().unwrap_or_else(|e| e.into_inner()).take();
    let mut n = 0;
    for (_, h) in held.into_iter().flatten() {
        if let Some(breaker) = h.breaker.upgrade()
            && breaker.manual_changes() == h.manual
        {
            breaker.import_state(&h.now());
            n += 1;
        }
    }
    n
}

impl core::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fleet")
            .field("instance", &self.shared.instance)
            .field("prefix", &self.shared.config.prefix)
            .field("status", &self.status())
            .finish()
    }
}

/// The store `config` names, not connected yet.
fn production_store(
    config: &FleetConfig,
) -> Result<(store::RedisStore, mpsc::UnboundedReceiver<redis::PushInfo>), FleetError> {
    let (con, pushes) = connector(&config.url, config.tls_ca.as_deref(), config.timeout)?;
    Ok((store::RedisStore::new(con), pushes))
}

/// A connector to the store at `url` (not connected yet), and the receiver of its pushes.
fn connector(
    url: &str,
    tls_ca: Option<&std::path::Path>,
    timeout: Duration,
) -> Result<(connect::Connector, mpsc::UnboundedReceiver<redis::PushInfo>), FleetError> {
    let bad = |reason: String| FleetError::Url {
        url: redact(url),
        reason,
    };
    let target = connect::Target::parse(url).map_err(|e| bad(e.0))?;
    let ca = match tls_ca {
        Some(path) => Some(std::fs::read(path).map_err(|source| FleetError::TlsCa {
            path: path.to_owned(),
            source,
        })?),
        None => None,
    };
    connect::Connector::new(&target, ca.as_deref(), timeout).map_err(bad)
}

/// `url` with its password, if any, shown as `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((info, hosts)) => {
            let user = info.split_once(':').map_or(info, |(u, _)| u);
            let shown = if info.contains(':') {
                format!("{user}:***")
            } else {
                "***".to_owned()
            };
            format!("{scheme}://{shown}@{hosts}{}", &rest[end..])
        }
        None => url.to_owned(),
    }
}

/// `<host>-<pid>-<random>`.
fn default_instance() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}-{}-{nanos:08x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            redact("rediss://fleet:s3cret@h:1/"),
            "rediss://fleet:***@h:1/"
        );
        assert_eq!(redact("redis://:s3cret@h:1/0"), "redis://:***@h:1/0");
        assert_eq!(redact("redis://token@h:1/"), "redis://***@h:1/");
        assert_eq!(redact("redis://h:1/"), "redis://h:1/");
        assert_eq!(
            redact("redis+sentinel://u:p@a:1,b:2/m"),
            "redis+sentinel://u:***@a:1,b:2/m"
        );
    }

    #[test]
    fn resp3_is_asked_for_once() {
        assert_eq!(
            connect::resp3("redis://h:1/"),
            "redis://h:1/?protocol=resp3"
        );
        assert_eq!(
            connect::resp3("redis://h:1/?db=2"),
            "redis://h:1/?db=2&protocol=resp3"
        );
        assert_eq!(
            connect::resp3("redis://h:1/?protocol=resp3"),
            "redis://h:1/?protocol=resp3"
        );
    }

    #[test]
    fn start_outside_a_runtime_says_so() {
        let e = Fleet::start(FleetConfig::new("redis://127.0.0.1:1/")).unwrap_err();
        assert!(matches!(e, FleetError::NoRuntime), "{e}");
    }

    #[test]
    fn a_bad_url_is_named() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let e = Fleet::start(FleetConfig::new("http://nowhere")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("fleet: bad Redis URL `http://nowhere`"),
            "{e}"
        );
    }
}
