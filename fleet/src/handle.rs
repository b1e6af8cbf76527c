//! [`Fleet`], the running fleet: starting it, sharing breakers with it, and what it reports.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use breakerbox_runtime::{Breaker, registry};

use crate::config::FleetConfig;
use crate::error::{FleetError, redact};
use crate::instances::FleetBreaker;
use crate::keys::key_name;
use crate::shared::{Inner, Message, give_back};
use crate::store::{Wire, production_store};
use crate::task::Task;
use crate::view::FleetView;

/// The fleet started last in this process ([`Fleet::running`]).
static RUNNING: Mutex<std::sync::Weak<Inner>> = Mutex::new(std::sync::Weak::new());

/// A running fleet: a background task on the tokio runtime that pushes the shared breakers'
/// local changes to Redis and applies the others'. Dropping it stops the task; the breakers
/// go on, unshared (a breaker held for a failing store, `on_store_error`, gets its own state
/// back first).
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
    pub fn start(config: FleetConfig) -> Result<Fleet, FleetError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| FleetError::NoRuntime)?;
        check_share(&config)?;
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
        check_share(&config)?;
        let (mut store, pushes) = production_store(&config)?;
        let limit = (config.timeout * 8).max(core::time::Duration::from_secs(2));
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

    /// A fleet over any store (the simulator's model, in tests), its task spawned on `handle`.
    pub(crate) fn with_store(
        config: FleetConfig,
        store: Box<dyn Wire>,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
        handle: &tokio::runtime::Handle,
    ) -> Fleet {
        let instance = config.instance.clone().unwrap_or_else(default_instance);
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
        });
        if !shared.config.share.is_empty() {
            let weak = Arc::downgrade(&shared);
            registry().on_state_change(move |event| {
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                if !shared.config.shares(&event.name) {
                    return;
                }
                match &event.key {
                    // A shared family's key: under the key's own name.
                    Some(key) => shared.tell_as(&key_name(&event.name, key), event, None),
                    None => shared.tell(event, None),
                }
            });
            // A shared family's new key takes the fleet's state before its first call.
            let weak = Arc::downgrade(&shared);
            breakerbox_runtime::__integrations::on_new_key(move |family, breaker| {
                let Some(shared) = weak.upgrade() else {
                    return false;
                };
                if shared.config.shares(family) {
                    shared.born(family, breaker);
                }
                true
            });
        }
        *RUNNING.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(&shared);
        let task = Task::with_store(store, pushes, shared.clone(), rx);
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
    Ok(())
}

/// This host's name in the fleet: `HOSTNAME`, else `/etc/hostname`, else `host`.
fn default_instance() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    instance_on(&host)
}

/// The default name of an instance on `host`: the host's name alone, the same after every
/// restart of the process, so that a restarted process replaces its own heartbeat and open
/// reports instead of adding to them (a quorum counts hosts, never restarts).
pub(crate) fn instance_on(host: &str) -> String {
    host.to_owned()
}

/// The name this process's probe leases go by: its instance and a token of this process
/// alone, so that two processes given one instance name never take each other's leases.
fn lease_holder(instance: &str) -> String {
    static STARTED: AtomicU64 = AtomicU64::new(0);
    let n = STARTED.fetch_add(1, Ordering::Relaxed);
    format!("{instance}@{}.{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_outside_a_runtime_says_so() {
        let e = Fleet::start(FleetConfig::new("redis://127.0.0.1:1/")).unwrap_err();
        assert!(matches!(e, FleetError::NoRuntime), "{e}");
    }

    #[test]
    fn a_share_entry_naming_no_breaker_and_no_family_is_an_error_naming_it() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
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
