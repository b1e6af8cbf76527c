//! What the handle, the listeners and the task share ([`Inner`]): the config, the counts
//! `Fleet::status` reads, the breakers held for a failing store, the heartbeats last read;
//! and the messages the listeners and the handle send the task ([`Message`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};

use tokio::sync::{mpsc, oneshot};

use breakerbox_runtime::__integrations::{BreakerExt, breaker_key};
use breakerbox_runtime::{Breaker, Event, Reason, SharedState, State, WeakBreaker};

use crate::config::FleetConfig;
use crate::instances::{FleetBreaker, LiveInstance, Tally};
use crate::keys::{KeyBook, held, key_name, split_key, told_of};

/// What the handle and the listeners send to the task.
pub(crate) enum Message {
    /// A shared breaker changed state here.
    Changed {
        name: String,
        to: State,
        reason: Reason,
        breaker: Option<WeakBreaker>,
    },
    /// A remote record was taken on here: local changes told before it are outdated.
    Imported { name: String },
    /// `Fleet::share`.
    Track { name: String, breaker: WeakBreaker },
    /// A shared family made a key the fleet holds other than closed (keys.rs): the key, under
    /// its name, took the fleet's state on.
    KeyBorn { name: String, breaker: WeakBreaker },
    /// `Fleet::resync`: answer whether every store operation succeeded.
    Resync(oneshot::Sender<bool>),
}

/// What the listeners and the handle share with the task.
pub(crate) struct Inner {
    pub(crate) config: FleetConfig,
    pub(crate) instance: String,
    /// The name its probe leases go by (`probe.lua`): the instance and a token of this
    /// process, unique among processes.
    pub(crate) holder: String,
    pub(crate) tx: mpsc::UnboundedSender<Message>,
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
    pub(crate) tallies: Mutex<BTreeMap<String, Tally>>,
    /// What the fleet holds of the shared families' keys that are not closed (keys.rs).
    pub(crate) keyed: Mutex<KeyBook>,
    /// The registry's keyed families this fleet shares are named `<family><family_suffix>`:
    /// empty in a service. The simulator runs several instances in one process, each with
    /// families of its own in the one registry, shared under one name.
    pub(crate) family_suffix: String,
    /// The breakers `Fleet::share` was given, by name: sharing one again adds no second
    /// listener (`Inner::listens_to`).
    pub(crate) listened: Mutex<Listened>,
}

/// `at` plus `by`, at most a century: a breaker's own durations (`trip_for(Duration::MAX)`, a
/// huge `open_for` or `probe_timeout`) may be past what an `Instant` can add.
pub(crate) fn later(at: tokio::time::Instant, by: core::time::Duration) -> tokio::time::Instant {
    const CENTURY: core::time::Duration = core::time::Duration::from_secs(100 * 365 * 24 * 3600);
    at + by.min(CENTURY)
}

/// The breakers `Fleet::share` was given (`Inner::listened`).
#[derive(Default)]
pub(crate) struct Listened {
    pub(crate) by_name: BTreeMap<String, WeakBreaker>,
    /// How many entries the last sweep of dropped breakers left.
    swept: usize,
}

/// A breaker held forced open or disabled while the store is unreachable.
pub(crate) struct Held {
    pub(crate) breaker: WeakBreaker,
    /// What it gets back: its state when it was held, or the fleet's record taken on since.
    pub(crate) state: SharedState,
    /// When `state` was taken: its open time runs on from then.
    pub(crate) since: tokio::time::Instant,
    /// How much of `state`'s open time is this instance's hold for the fleet's probe leases
    /// (an open record taken on), not reported: zero for an opening of its own.
    pub(crate) hold: core::time::Duration,
    /// The failure behind an opening of its own: given back with it (a record taken on since
    /// tells its own).
    pub(crate) failure: Option<std::sync::Arc<str>>,
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

impl Inner {
    /// Whether `Fleet::share` has given this fleet `breaker` already; if not, it is noted as
    /// given.
    pub(crate) fn listens_to(&self, breaker: &Breaker) -> bool {
        // The handles upgraded below are dropped after the lock (declared before its guard):
        // the last handle of a breaker dropped meanwhile drops its listeners, the user's code.
        let mut upgraded = Vec::new();
        let mut listened = self.listened.lock().unwrap_or_else(|e| e.into_inner());
        let Listened { by_name, swept } = &mut *listened;
        let name = breaker.name();
        if let Some(given) = by_name.get(name).and_then(WeakBreaker::upgrade) {
            let same = given.ptr_eq(breaker);
            upgraded.push(given);
            if same {
                return true;
            }
        }
        // Dropped breakers' entries go once the map has doubled since the last sweep: each
        // share costs a lookup and, amortized, a constant share of a sweep.
        if by_name.len() >= (2 * *swept).max(64) {
            by_name.retain(|_, w| match w.upgrade() {
                Some(alive) => {
                    upgraded.push(alive);
                    true
                }
                None => false,
            });
            *swept = by_name.len();
        }
        by_name.insert(name.to_owned(), breaker.downgrade());
        false
    }

    /// The fleet's name of the registry's keyed family `registry_name`, if this fleet shares
    /// it (see `family_suffix`).
    pub(crate) fn shared_family<'a>(&self, registry_name: &'a str) -> Option<&'a str> {
        let family = registry_name.strip_suffix(self.family_suffix.as_str())?;
        self.config.shares(family).then_some(family)
    }

    /// The registry's name of the shared family `family`.
    pub(crate) fn registry_family(&self, family: &str) -> String {
        format!("{family}{}", self.family_suffix)
    }

    pub(crate) fn instances(&self) -> Vec<FleetBreaker> {
        let live = self.live.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let tallies = self
            .tallies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        live.into_iter()
            .filter(|(name, _)| split_key(name).is_none())
            .map(|(name, instances)| FleetBreaker {
                trip: self.config.trip_of(&name),
                last_tally: tallies.get(&name).map(|t| (t.open, t.needed, t.live)),
                name,
                instances,
            })
            .collect()
    }

    /// A listener's work: hand a local change to the task. Never waits.
    pub(crate) fn tell(&self, event: &Event, breaker: Option<&Breaker>) {
        self.tell_as(&event.name, event, breaker);
    }

    /// As `tell`, the change told under `name` (a family key's, keys.rs).
    pub(crate) fn tell_as(&self, name: &str, event: &Event, breaker: Option<&Breaker>) {
        if event.reason == Reason::Imported {
            // A remote change applied here: not ours to push. The task is told all the same,
            // in the breaker's order of events, so that it drops a local change made before
            // this one and not yet written (the record it came from is older).
            let _ = self.tx.send(Message::Imported {
                name: name.to_owned(),
            });
            return;
        }
        let _ = self.tx.send(Message::Changed {
            name: name.to_owned(),
            to: event.to,
            reason: event.reason,
            breaker: breaker.map(Breaker::downgrade),
        });
    }
}

/// Gives every held breaker back its state. The task does the same when its future is dropped
/// (its runtime shut down, or `Fleet`'s abort landing after a hold it made meanwhile).
pub(crate) fn give_back(shared: &Inner) -> usize {
    // Taken out of the lock first: taking a state on runs the breaker's listeners.
    let held = shared.held.lock().unwrap_or_else(|e| e.into_inner()).take();
    let mut n = 0;
    for (_, h) in held.into_iter().flatten() {
        if let Some(breaker) = h.breaker.upgrade()
            && breaker.manual_changes() == h.manual
        {
            let failure = h.failure.as_deref();
            breaker.import_reporting(&h.now(), None, None, failure);
            n += 1;
        }
    }
    n
}

impl Inner {
    /// The hook's work, for `breaker`, a key the shared family `family` has just made (not in
    /// the family yet): if the fleet holds the key other than closed, the breaker takes that
    /// state on, and the task is told to track it.
    pub(crate) fn born(&self, family: &str, breaker: &Breaker) {
        let Some(key) = breaker_key(breaker) else {
            return;
        };
        let name = key_name(family, key);
        let now = tokio::time::Instant::now();
        let known = self
            .keyed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .birth(&name, breaker.downgrade());
        let Some((record, at)) = known else {
            return;
        };
        let mut state = record.shared_state();
        if let Some(left) = &mut state.open_remaining {
            *left = left.saturating_sub(now.saturating_duration_since(at));
        }
        let shown = state.open_remaining;
        let told = (
            record.origin.as_str(),
            record.reason.as_str(),
            record.last_failure.as_str(),
        );
        let (told, failure) = told_of(&self.instance, told, record.state);
        breaker.import_reporting(
            &held(breaker, state),
            shown,
            told.as_deref(),
            failure.as_deref(),
        );
        let _ = self.tx.send(Message::KeyBorn {
            name,
            breaker: breaker.downgrade(),
        });
    }
}
