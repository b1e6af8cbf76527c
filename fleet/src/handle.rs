//! [`Fleet`], the running fleet: starting it, sharing breakers with it, and what it reports.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::{mpsc, oneshot};

use breakerbox_runtime::{Breaker, registry};

use crate::config::FleetConfig;
use crate::error::{FleetError, redact};
use crate::instances::FleetBreaker;
use crate::keys::key_name;
use crate::shared::{Inner, Message, give_back};
use crate::store::{
    Backend, Feed, FleetStore, Redis, StoreError, Unwinding, Wire, production_store,
};
use crate::task::Task;
use crate::view::FleetView;

/// The fleet started last in this process ([`Fleet::running`]).
static RUNNING: Mutex<std::sync::Weak<Inner>> = Mutex::new(std::sync::Weak::new());

/// The fleets of this process that share the registry's breakers or families. One registry
/// listener and one new-key hook, installed with the first of them, tell each that is alive:
/// a fleet dropped leaves nothing behind in the registry, however many are made.
static SHARING: Mutex<Vec<std::sync::Weak<Inner>>> = Mutex::new(Vec::new());

/// The fleets sharing now (the dropped ones forgotten).
fn sharing() -> Vec<Arc<Inner>> {
    let mut all = SHARING.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|w| w.strong_count() > 0);
    all.iter().filter_map(std::sync::Weak::upgrade).collect()
}

/// `shared`'s fleet is dropped: the registry's changes and new keys are no longer told to it.
/// Its shared state can outlive the fleet a moment (the listener or the new-key hook running
/// on another thread holds every sharing fleet's while it runs), and a key made meanwhile
/// must not take on what the dropped fleet knew of the fleet's keys: a fleet started after
/// it, sharing the same family, holds the fleet's state now.
fn leave_sharing(shared: &Arc<Inner>) {
    let mut all = SHARING.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|w| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), Arc::as_ptr(shared)));
}

/// Tells `shared` the registry's changes of what it shares, and its shared families' new keys.
fn join_sharing(shared: &Arc<Inner>) {
    static HOOKED: std::sync::Once = std::sync::Once::new();
    {
        let mut all = SHARING.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(shared));
    }
    HOOKED.call_once(|| {
        registry().on_state_change(|event| {
            for shared in sharing() {
                match &event.key {
                    // A shared family's key: under the key's own name.
                    Some(key) => {
                        if let Some(family) = shared.shared_family(&event.name) {
                            shared.tell_as(&key_name(family, key), event, None);
                        }
                    }
                    None => {
                        if shared.config.shares(&event.name) {
                            shared.tell(event, None);
                        }
                    }
                }
            }
        });
        // A shared family's new key takes the fleet's state before its first call.
        breakerbox_runtime::__integrations::on_new_key(|family, breaker| {
            for shared in sharing() {
                if let Some(family) = shared.shared_family(family) {
                    shared.born(family, breaker);
                }
            }
            true
        });
    });
}

/// A running fleet: a background task on the tokio runtime that pushes the shared breakers'
/// local changes to the store (Redis, PostgreSQL, or one of your own) and applies the
/// others'. Dropping it stops the task; the breakers go on, unshared (a breaker held for a
/// failing store, `on_store_error`, gets its own state back first).
pub struct Fleet {
    pub(crate) shared: Arc<Inner>,
    pub(crate) task: tokio::task::JoinHandle<()>,
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
    /// Breakers this fleet shares, and the keys of shared families it tracks (those held here
    /// that have changed state, here or in the fleet).
    pub shared: u64,
    /// The last store failure, as the client said it (`None` before the first): a wrong
    /// password shows here when the fleet was started with [`Fleet::start`].
    pub last_error: Option<String>,
}

impl Fleet {
    /// Starts the fleet's task on the current tokio runtime and returns at once: it connects
    /// in the background (with retries), so a store that is down at startup only means the
    /// breakers decide alone until it answers.
    ///
    /// The registry's breakers whose names match the config's [`share`](FleetConfig::share)
    /// patterns are shared as they are created (those created before are found within one
    /// [`resync_every`](FleetConfig::resync_every)); so are the keys of the registry's keyed
    /// families whose names match, each under its own record, a new key taking the fleet's
    /// state before its first call. Start it after `load_toml`: sharing creates
    /// no breaker, but a remote change must find the breaker created.
    ///
    /// The URL's scheme chooses the store: `redis://` and its kin are Redis, `postgres://` or
    /// `postgresql://` PostgreSQL (feature `postgres`; without it, an error naming the feature).
    pub fn start(config: FleetConfig) -> Result<Fleet, FleetError> {
        let handle = runtime_for(&config, true)?;
        let (store, feed) = Fleet::store(&config)?;
        Ok(Fleet::over(config, store, feed, &handle, String::new()))
    }

    /// Starts the fleet as [`start`](Fleet::start) does, once its store has answered a `PING`
    /// (connected, logged in, TLS agreed): a wrong password or user, a certificate it does not
    /// trust or nothing listening is an error here ([`FleetError::Connect`]), where `start`
    /// would only count store errors. Waits at most eight [`timeout`](FleetConfig::timeout)s
    /// (at least 2 s). After it, the fleet reconnects by itself as `start`'s does.
    ///
    /// On PostgreSQL (`postgres://`, feature `postgres`), once a connection is made and the
    /// fleet's tables are checked (created where missing): nothing listening, a refused login,
    /// or a table of the fleet's name with another shape or schema version is an error here
    /// ([`FleetError::Store`], naming the table and what is wrong).
    ///
    /// `start` stays lazy on purpose: an application that must come up while its Redis is
    /// down uses it and decides locally until Redis answers.
    pub async fn connect(config: FleetConfig) -> Result<Fleet, FleetError> {
        let handle = runtime_for(&config, true)?;
        let limit = connect_limit(&config);
        if Backend::of(&config.url) == Backend::Postgres {
            let (store, feed) = postgres_store(&config)?;
            return Fleet::answered_then_over(config, store, feed, &handle).await;
        }
        let (mut store, pushes) = production_store(&config)?;
        let answer = tokio::time::timeout(limit, Wire::ping(&mut store)).await;
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

    /// The store the config's URL names, as [`start`](Fleet::start) would run on it (Redis,
    /// or PostgreSQL with the feature `postgres`), not connected yet, and its change feed: for
    /// a store of your own that wraps it, started with
    /// [`start_with_store`](Fleet::start_with_store). It connects on its first operation and
    /// again after each loss. An error names a URL it cannot use (a `postgres://` URL without
    /// the feature, an unknown scheme), or a CA file it cannot read.
    pub fn store(config: &FleetConfig) -> Result<(Box<dyn FleetStore>, Feed), FleetError> {
        if Backend::of(&config.url) == Backend::Postgres {
            return postgres_store(config);
        }
        let (store, feed) = crate::store::redis(config)?;
        Ok((Box::new(store), feed))
    }

    /// Starts the fleet as [`start`](Fleet::start) does, on `store` and its change `feed`
    /// instead of the store the config's URL names: a store of your own (one that implements
    /// [`FleetStore`], passing the conformance suite: [`store`](crate::store)), or a built-in
    /// one wrapped ([`store::redis`](crate::store::redis)). Build the store for the config's
    /// [`prefix`](FleetConfig::prefix): the fleet never hands it to the store. Returns at once;
    /// the store's first operations connect it, and a store that fails only means the breakers
    /// decide alone until it answers ([`on_store_error`](FleetConfig::on_store_error)).
    ///
    /// Everything else is as with `start`: the [`share`](FleetConfig::share) patterns are
    /// checked against the registry ([`FleetError::ShareMatchesNothing`]), it must be called
    /// in a tokio runtime ([`FleetError::NoRuntime`]), and the fleet shares, probes, counts,
    /// beats and re-reads through `store` as it does through Redis.
    ///
    /// The config's URL is not connected to: it names the store where the fleet shows one,
    /// in errors ([`connect_with_store`](Fleet::connect_with_store)'s), and in
    /// [`Fleet::running`], where the other parts of breakerbox that keep data in the fleet's
    /// store find it (the replay journal's `replay = "fleet"` connects to it as Redis: give
    /// the Redis URL a wrapped Redis store was built from, or any name, `mystore://orders`,
    /// when there is none).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use breakerbox_fleet::{Fleet, FleetConfig, store};
    ///
    /// let config = FleetConfig::new("redis://127.0.0.1:6379/").share("payments*");
    /// let (redis, feed) = store::redis(&config)?;
    /// let fleet = Fleet::start_with_store(config, redis, feed)?;
    /// # drop(fleet); Ok(()) }
    /// ```
    pub fn start_with_store(
        config: FleetConfig,
        store: impl FleetStore,
        feed: Feed,
    ) -> Result<Fleet, FleetError> {
        let handle = runtime_for(&config, false)?;
        let store = Box::new(Unwinding::new(store));
        Ok(Fleet::over(config, store, feed, &handle, String::new()))
    }

    /// Starts the fleet as [`start_with_store`](Fleet::start_with_store) does, once `store` has
    /// answered a [`ping`](FleetStore::ping), as [`connect`](Fleet::connect) does: a store that
    /// fails or does not answer within eight [`timeout`](FleetConfig::timeout)s (at least 2 s)
    /// is an error here ([`FleetError::Store`], the config's URL and the store's reason).
    pub async fn connect_with_store(
        config: FleetConfig,
        store: impl FleetStore,
        feed: Feed,
    ) -> Result<Fleet, FleetError> {
        let handle = runtime_for(&config, false)?;
        let store = Box::new(Unwinding::new(store));
        Fleet::answered_then_over(config, store, feed, &handle).await
    }

    /// A fleet over `store` once it has answered a ping within eight timeouts (at least 2 s),
    /// its task spawned on `handle`; else why not, as a [`FleetError::Store`].
    async fn answered_then_over(
        config: FleetConfig,
        mut store: Box<dyn FleetStore>,
        feed: Feed,
        handle: &tokio::runtime::Handle,
    ) -> Result<Fleet, FleetError> {
        let limit = connect_limit(&config);
        let reason = match tokio::time::timeout(limit, store.ping()).await {
            Ok(Ok(())) => return Ok(Fleet::over(config, store, feed, handle, String::new())),
            Ok(Err(StoreError::Failed(why) | StoreError::Record(why))) => why,
            Err(_) => format!("nothing within {limit:?}"),
        };
        Err(FleetError::Store {
            url: redact(&config.url),
            reason,
        })
    }

    /// A fleet over Redis's wire (the production connection, or the simulator's model in
    /// tests), its task spawned on `handle`.
    pub(crate) fn with_store(
        config: FleetConfig,
        store: Box<dyn Wire>,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
        handle: &tokio::runtime::Handle,
    ) -> Fleet {
        Fleet::with_families(config, store, pushes, handle, String::new())
    }

    /// As `with_store`, sharing the registry's keyed families named `<family><suffix>` as
    /// `<family>` (see `Inner::family_suffix`).
    pub(crate) fn with_families(
        config: FleetConfig,
        store: Box<dyn Wire>,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
        handle: &tokio::runtime::Handle,
        family_suffix: String,
    ) -> Fleet {
        let store = Box::new(Redis::new(store, &config.prefix));
        Fleet::over(config, store, Feed::redis(pushes), handle, family_suffix)
    }

    /// A fleet over any store and its change feed, its task spawned on `handle`; for
    /// `family_suffix` see `Inner::family_suffix` (empty but in the simulator).
    pub(crate) fn over(
        config: FleetConfig,
        store: Box<dyn FleetStore>,
        feed: Feed,
        handle: &tokio::runtime::Handle,
        family_suffix: String,
    ) -> Fleet {
        let instance = (config.instance.clone())
            .filter(|id| !id.trim().is_empty())
            .unwrap_or_else(default_instance);
        let holder = lease_holder(&instance);
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Inner {
            config,
            instance,
            holder,
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
            keyed: Mutex::new(Default::default()),
            family_suffix,
            listened: Default::default(),
        });
        if !shared.config.share.is_empty() {
            join_sharing(&shared);
        }
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&shared);
        let task = Task::over(store, feed, shared.clone(), rx);
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
    /// holds it weakly: a dropped breaker is no longer shared. Sharing the same breaker again
    /// does nothing.
    pub fn share(&self, breaker: &Breaker) {
        if self.shared.listens_to(breaker) {
            return;
        }
        let weak = Arc::downgrade(&self.shared);
        let own = breaker.downgrade();
        breaker.on_state_change(move |event| {
            if let (Some(shared), Some(breaker)) = (weak.upgrade(), own.upgrade()) {
                shared.tell(event, Some(&breaker));
            }
        });
        let _ = self.shared.tx.send(Message::Track {
            name: breaker.name().to_owned(),
            breaker: breaker.downgrade(),
        });
    }

    /// Re-reads every shared record now (of a shared family's keys: those not closed here
    /// or in the fleet, and every family's list of open keys) and pushes what is pending;
    /// `true` once every store operation succeeded. Waits for the fleet's task, never for longer than a few of its
    /// timeouts per shared breaker.
    pub async fn resync(&self) -> bool {
        let (done, wait) = oneshot::channel();
        if self.shared.tx.send(Message::Resync(done)).is_err() {
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
        FleetView::of(&self.shared)
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
        leave_sharing(&self.shared);
        give_back(&self.shared);
    }
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

/// Every [`share`](FleetConfig::share) pattern of `config` names at least one single breaker
/// or keyed family of the registry (created, annotated or configured); one that names none is
/// an error naming it.
fn check_share(config: &FleetConfig) -> Result<(), FleetError> {
    if config.share.is_empty() {
        return Ok(());
    }
    let (breakers, families) = breakerbox_runtime::__integrations::shareable_names(registry());
    for pattern in &config.share {
        let named = |name: &String| config.shares(name) && crate::config::glob(pattern, name);
        if !breakers.iter().any(named) && !families.iter().any(named) {
            return Err(FleetError::ShareMatchesNothing {
                pattern: pattern.clone(),
            });
        }
    }
    for pattern in unmatched_trip_for(config, &breakers, &families) {
        tracing::warn!(target: "breakerbox", pattern, "fleet: `fleet_trip_for` (a `[fleet.breakers.\"{pattern}\"]` table) matches no breaker or keyed family that `share` shares; it changes nothing unless a breaker of that name is shared with `Fleet::share`");
    }
    Ok(())
}

/// The [`fleet_trip_for`](FleetConfig::fleet_trip_for) patterns of `config` that match none of
/// `breakers` and `families` that its `share` patterns share: a misspelt name there changes
/// nothing, so the start warns of each. Not an error, as a `share` pattern that matches
/// nothing is: a breaker shared with [`Fleet::share`] alone is not in the registry.
fn unmatched_trip_for<'a>(
    config: &'a FleetConfig,
    breakers: &[String],
    families: &[String],
) -> Vec<&'a str> {
    config
        .trip_for
        .iter()
        .map(|(pattern, _)| pattern.as_str())
        .filter(|pattern| {
            let named = |name: &String| config.shares(name) && crate::config::glob(pattern, name);
            !breakers.iter().any(named) && !families.iter().any(named)
        })
        .collect()
}

/// This host's name in the fleet: `HOSTNAME`, else `/etc/hostname`, else `host`.
fn default_instance() -> String {
    instance_on(&host_name(std::env::var("HOSTNAME").ok(), || {
        std::fs::read_to_string("/etc/hostname").ok()
    }))
}

/// The first of `env` (`HOSTNAME`) and `file` (`/etc/hostname`'s text) that names a host,
/// trimmed, else `host`: one set but empty or blank names none.
fn host_name(env: Option<String>, file: impl FnOnce() -> Option<String>) -> String {
    let named = |h: Option<String>| h.map(|h| h.trim().to_owned()).filter(|h| !h.is_empty());
    named(env)
        .or_else(|| named(file()))
        .unwrap_or_else(|| "host".to_owned())
}

/// The default name of an instance on `host`: the host's name alone, the same after every
/// restart of the process, so that a restarted process replaces its own heartbeat and open
/// reports instead of adding to them (a quorum counts hosts, never restarts).
pub(crate) fn instance_on(host: &str) -> String {
    host.to_owned()
}

/// The name this process's probe leases go by: its instance and a token of this process
/// alone, so that two processes given one instance name never take each other's leases. The
/// token is the pid and a random number drawn once per process: containers that share a host
/// name (host networking) each run their service as pid 1.
fn lease_holder(instance: &str) -> String {
    static STARTED: AtomicU64 = AtomicU64::new(0);
    static PROCESS: LazyLock<String> = LazyLock::new(process_token);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    format!("{instance}@{}.{n}", *PROCESS)
}

/// The pid and 64 random bits (std's hasher keys, which the operating system seeds).
fn process_token() -> String {
    let random = std::hash::RandomState::new().hash_one(std::process::id());
    format!("{}-{random:016x}", std::process::id())
}

/// The runtime a fleet's task runs on (the current one), once it is found to have timers
/// (and I/O, for a built-in store: `io`) and `config`'s `share` patterns are checked against
/// the registry.
fn runtime_for(config: &FleetConfig, io: bool) -> Result<tokio::runtime::Handle, FleetError> {
    let handle = tokio::runtime::Handle::try_current().map_err(|_| FleetError::NoRuntime)?;
    drivers(io)?;
    check_share(config)?;
    Ok(handle)
}

/// The current runtime's timers, which the fleet's task uses from its first turn, and with
/// `io` its I/O, which the built-in stores' connections use: tokio panics on a timer or a
/// socket made in a runtime without them, here caught (the panic hook still prints tokio's
/// message) and told as [`FleetError::RuntimeWithout`].
fn drivers(io: bool) -> Result<(), FleetError> {
    let timers = std::panic::catch_unwind(|| drop(tokio::time::sleep(core::time::Duration::ZERO)));
    if timers.is_err() {
        return Err(FleetError::RuntimeWithout { what: "timers" });
    }
    if !io {
        return Ok(());
    }
    // A loopback socket, registered with the runtime's I/O driver and closed at once.
    if let Ok(socket) = std::net::UdpSocket::bind(("127.0.0.1", 0))
        && socket.set_nonblocking(true).is_ok()
    {
        let io = std::panic::catch_unwind(move || drop(tokio::net::UdpSocket::from_std(socket)));
        if io.is_err() {
            return Err(FleetError::RuntimeWithout { what: "I/O" });
        }
    }
    Ok(())
}

/// How long a connecting start waits for the store's first answer: eight timeouts, at least
/// 2 s.
fn connect_limit(config: &FleetConfig) -> core::time::Duration {
    (config.timeout * 8).max(core::time::Duration::from_secs(2))
}

/// The PostgreSQL store `config` names (`postgres://…`), not connected yet, and its feed; an
/// error naming the feature to enable in a build without it.
pub(crate) fn postgres_store(
    config: &FleetConfig,
) -> Result<(Box<dyn FleetStore>, Feed), FleetError> {
    #[cfg(feature = "postgres")]
    {
        let (store, feed) = crate::store::postgres::postgres_store(config)?;
        Ok((Box::new(store), feed))
    }
    #[cfg(not(feature = "postgres"))]
    Err(FleetError::Url {
        url: crate::error::redact(&config.url),
        reason: "PostgreSQL as the fleet's store needs the feature `postgres` (of \
                 `breakerbox`, or `breakerbox-fleet`)"
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A current-thread runtime with timers and I/O, to start fleets in.
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A `HOSTNAME` set but empty (or blank) names no host: the name comes from
    /// `/etc/hostname`, so that instances on hosts of different names count apart under a
    /// quorum instead of all being `host`.
    #[test]
    fn an_empty_hostname_variable_falls_back_to_etc_hostname() {
        let file = || Some("web-7\n".to_owned());
        assert_eq!(host_name(Some("web-3".to_owned()), file), "web-3");
        assert_eq!(host_name(Some(String::new()), file), "web-7");
        assert_eq!(host_name(Some(" \n".to_owned()), file), "web-7");
        assert_eq!(host_name(None, file), "web-7");
        assert_eq!(host_name(Some(String::new()), || None), "host");
    }

    /// An empty instance name is the host's, as no name is: every instance named "" would be
    /// one instance under a quorum, and a record written by any of them would read as this
    /// instance's own (no "web-2 tripped it").
    #[test]
    fn an_empty_instance_name_is_the_hosts() {
        let rt = runtime();
        let _guard = rt.enter();
        let url = "redis://127.0.0.1:1/";
        let host = Fleet::start(FleetConfig::new(url)).unwrap();
        for id in ["", " "] {
            let fleet = Fleet::start(FleetConfig::new(url).instance(id)).unwrap();
            assert_eq!(fleet.instance(), host.instance(), "{id:?}");
        }
        assert!(!host.instance().is_empty());
    }

    /// Two processes with one instance name and one pid (containers on host networking, each
    /// service pid 1) still hold leases under different names: the token carries random bits
    /// drawn at each start, not the pid alone.
    #[test]
    fn processes_with_one_pid_get_different_lease_tokens() {
        let (a, b) = (process_token(), process_token());
        assert_ne!(a, b);
        let pid = format!("{}-", std::process::id());
        assert!(a.starts_with(&pid) && b.starts_with(&pid), "{a} {b}");
        let holder = lease_holder("web-1");
        assert!(holder.starts_with(&format!("web-1@{pid}")), "{holder}");
        assert_ne!(holder, lease_holder("web-1"), "two fleets of one process");
    }

    #[test]
    fn start_outside_a_runtime_says_so() {
        let e = Fleet::start(FleetConfig::new("redis://127.0.0.1:1/")).unwrap_err();
        assert!(matches!(e, FleetError::NoRuntime), "{e}");
    }

    /// A runtime built without timers or without I/O (a `Builder` without `enable_all`)
    /// cannot run the fleet's task: `start` says so instead of returning a fleet whose task
    /// panics at its first turn and never shares anything.
    #[test]
    fn start_on_a_runtime_without_timers_or_io_says_so() {
        use tokio::runtime::Builder;
        for (what, rt, lacks) in [
            ("neither", Builder::new_current_thread().build(), "timers"),
            (
                "I/O only",
                Builder::new_current_thread().enable_io().build(),
                "timers",
            ),
            (
                "timers only",
                Builder::new_current_thread().enable_time().build(),
                "I/O",
            ),
            (
                "I/O only, multi-thread",
                Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_io()
                    .build(),
                "timers",
            ),
        ] {
            let rt = rt.unwrap();
            let started = {
                let _guard = rt.enter();
                Fleet::start(FleetConfig::new("redis://127.0.0.1:1/"))
            };
            let e = started.expect_err(what);
            assert!(
                matches!(e, FleetError::RuntimeWithout { what } if what == lacks),
                "{what}: {e}"
            );
            assert!(e.to_string().contains("enable_all()"), "{what}: {e}");
        }
    }

    #[test]
    fn a_share_entry_naming_no_breaker_and_no_family_is_an_error_naming_it() {
        let rt = runtime();
        let _guard = rt.enter();
        let url = "redis://127.0.0.1:1/";
        let e = Fleet::start(FleetConfig::new(url).share("handle-test-nothing*")).unwrap_err();
        assert!(
            matches!(&e, FleetError::ShareMatchesNothing { pattern } if pattern == "handle-test-nothing*"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "fleet: `share` entry `handle-test-nothing*` matches no breaker and no keyed family: \
             create or configure them (`load_toml`, `configure`, `get_or_create`, `family`) \
             before the fleet starts, or fix the name"
        );
        // A keyed family alone is shareable: its keys are shared.
        let _family = registry()
            .family::<String>("handle-test-hosts", breakerbox_runtime::Config::default)
            .unwrap();
        let fleet = Fleet::start(FleetConfig::new(url).share("handle-test-hosts"));
        assert!(fleet.is_ok(), "{:?}", fleet.err());
        // So is a single breaker made or configured.
        registry().configure("handle-test-single", breakerbox_runtime::Config::default());
        let fleet = Fleet::start(FleetConfig::new(url).share("handle-test-single"));
        assert!(fleet.is_ok(), "{:?}", fleet.err());
    }

    /// Sharing a breaker again adds no second listener to it, and sharing many breakers that
    /// are dropped keeps no entry of each. Each listener holds the fleet's state weakly, so
    /// `Arc::weak_count` of it counts the listeners (and `RUNNING`'s reference, taken out).
    #[test]
    fn sharing_a_breaker_again_adds_nothing_and_dropped_breakers_are_forgotten() {
        let rt = runtime();
        let _guard = rt.enter();
        let fleet = Fleet::start(FleetConfig::new("redis://127.0.0.1:1/")).unwrap();
        // `RUNNING` holds the fleet started last weakly too, and another test may start one
        // meanwhile: read under its lock, its reference taken out.
        let listeners = || {
            let running = RUNNING.lock().unwrap();
            let ours = core::ptr::eq(running.as_ptr(), Arc::as_ptr(&fleet.shared));
            Arc::weak_count(&fleet.shared) - usize::from(ours)
        };
        let entries = || fleet.shared.listened.lock().unwrap().by_name.len();
        let before = listeners();
        let breaker = Breaker::new("handle-test-shared-twice", Default::default());
        for _ in 0..1000 {
            fleet.share(&breaker);
        }
        assert_eq!(listeners(), before + 1);
        // Another breaker of the same name is another breaker: it gets its listener.
        let namesake = Breaker::new("handle-test-shared-twice", Default::default());
        fleet.share(&namesake);
        assert_eq!(listeners(), before + 2);
        assert_eq!(entries(), 1);
        for i in 0..10_000 {
            fleet.share(&Breaker::new(
                format!("handle-test-dropped-{i}"),
                Default::default(),
            ));
        }
        assert!(entries() <= 128, "{} entries kept", entries());
        assert_eq!(
            listeners(),
            before + 2,
            "dropped breakers' listeners are gone"
        );
    }

    /// A `fleet_trip_for` pattern (a `[fleet.breakers."…"]` table) that matches no breaker or
    /// family the fleet shares is found at start (and warned of); one that matches is not.
    #[test]
    fn a_trip_for_pattern_matching_nothing_shared_is_found() {
        let breakers = [
            "trip-test-payments".to_owned(),
            "trip-test-search".to_owned(),
        ];
        let families = ["trip-test-hosts".to_owned()];
        let quorum = crate::FleetTrip::Quorum(crate::Quorum::Instances(2));
        let config = FleetConfig::new("redis://127.0.0.1:1/")
            .share("trip-test-pay*")
            .share("trip-test-hosts")
            .fleet_trip_for("trip-test-paymnts", quorum)
            .fleet_trip_for("trip-test-pay*", quorum)
            .fleet_trip_for("trip-test-hosts", quorum)
            .fleet_trip_for("trip-test-search", quorum);
        assert_eq!(
            unmatched_trip_for(&config, &breakers, &families),
            ["trip-test-paymnts", "trip-test-search"],
            "misspelt, and a breaker that exists but is not shared"
        );
    }

    #[test]
    fn a_bad_url_is_named() {
        let rt = runtime();
        let _guard = rt.enter();
        let e = Fleet::start(FleetConfig::new("http://nowhere")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("fleet: bad store URL `http://nowhere`"),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("or postgres, with the feature `postgres`"),
            "{e}"
        );
    }

    /// The URL's scheme chooses the store: PostgreSQL's needs the feature, and says so.
    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_postgres_url_without_the_feature_names_the_feature() {
        let rt = runtime();
        let _guard = rt.enter();
        for url in [
            "postgres://fleet:s3cret@127.0.0.1:1/db",
            "postgresql://127.0.0.1:1/db",
        ] {
            let e = Fleet::start(FleetConfig::new(url)).unwrap_err();
            let shown = e.to_string();
            assert!(
                shown.contains("needs the feature `postgres`") && !shown.contains("s3cret"),
                "{shown}"
            );
        }
    }

    /// With the feature, a `postgres://` URL starts a fleet on PostgreSQL (connecting in the
    /// background), and one the client cannot parse is named; `sslmode=require` needs `tls`.
    #[cfg(feature = "postgres")]
    #[test]
    fn a_postgres_url_starts_a_fleet_on_postgres() {
        let rt = runtime();
        let _guard = rt.enter();
        let fleet = Fleet::start(FleetConfig::new("postgres://fleet@127.0.0.1:1/db"));
        assert!(fleet.is_ok(), "{:?}", fleet.err());
        let e = Fleet::start(FleetConfig::new("postgres://h:notaport/db")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("fleet: bad store URL `postgres://h:notaport/db`"),
            "{e}"
        );
        // TLS: with the feature `tls` it starts; without, the error names the feature.
        let tls = Fleet::start(FleetConfig::new(
            "postgres://127.0.0.1:1/db?sslmode=require",
        ));
        #[cfg(feature = "tls")]
        assert!(tls.is_ok(), "{:?}", tls.err());
        #[cfg(not(feature = "tls"))]
        {
            let e = tls.unwrap_err();
            assert!(e.to_string().contains("needs the feature `tls`"), "{e}");
        }
    }
}
