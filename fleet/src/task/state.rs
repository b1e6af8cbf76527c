//! What the task keeps: the [`Task`] itself (its store, its channels, every shared breaker it
//! tracks and each one's pending change), and the answer of a store operation about one
//! breaker. The loop (`run.rs`) and each part of the protocol (the other files of `task/`) add
//! the task's methods.

use core::time::Duration;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use breakerbox_runtime::__integrations::BreakerExt;
use breakerbox_runtime::{Reason, State, WeakBreaker};

use crate::config::{FleetTrip, Quorum};
use crate::keys::{record_key, split_key};
use crate::record::Record;
use crate::shared::later;
use crate::shared::{Inner, Message};
use crate::store::{Feed, FleetStore};

/// A local change still to be written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Intent {
    /// The breaker opened by itself (a trip, a failed probe, `trip_for`): written only over
    /// the record this instance last saw.
    Trip,
    /// The breaker opened by itself under a quorum (`FleetTrip::Quorum`): over a closed
    /// record, reported (`quorum.lua`), which opens the record once the quorum is open; over an
    /// open one (a fleet's probe failed here), written as a `Trip`.
    Report,
    /// Its probes closed it: likewise.
    Close,
    /// `force_open`, `disable`, `reset`: written over whatever the record holds.
    Manual(State),
    /// A forced-open or disabled breaker whose record vanished: written over no record.
    Again(State),
}

pub(super) struct Tracked {
    pub(super) breaker: WeakBreaker,
    /// The epoch of the record this breaker last matched (0: none).
    pub(super) applied: u64,
    /// That record's state, and while open, until when (here).
    pub(super) seen: State,
    /// Who wrote that record, its reason and the failure behind it ('' where none).
    pub(super) told: (String, String, String),
    pub(super) open_until: Option<Instant>,
    /// While that record is open: when to ask for a probe lease (see lease.rs).
    pub(super) probe_at: Option<Instant>,
    /// The judged calls and failures counted up to the last batch (see counts.rs).
    pub(super) counted: Option<(u64, u64)>,
    /// Its keys hold what this instance cannot read (`Task::troubled`).
    pub(super) trouble: Option<Trouble>,
    /// The probe leases this instance holds for the open record (lease.rs).
    pub(super) lease: Option<Lease>,
    /// The record it had vanished, and none has been seen or written since (resync.rs).
    pub(super) vanished: bool,
    /// `Breaker::manual_changes` as last accounted for: a hand on it that changed no state
    /// (a `reset` of a closed breaker) tells no event, and is found by comparing (counts.rs).
    pub(super) manual: u32,
    /// Its record has been read or written since it was tracked: until then every pass reads
    /// it (resync.rs).
    pub(super) read: bool,
}

impl Tracked {
    pub(super) fn new(breaker: WeakBreaker) -> Tracked {
        let manual = breaker.upgrade().map_or(0, |b| b.manual_changes());
        // Counts are the fleet's from the moment the breaker is shared (counts.rs).
        let counted = breaker.upgrade().map(|b| {
            let m = b.metrics();
            (m.successes + m.failures, m.failures)
        });
        Tracked {
            breaker,
            applied: 0,
            seen: State::Closed,
            told: Default::default(),
            open_until: None,
            probe_at: None,
            counted,
            trouble: None,
            lease: None,
            vanished: false,
            manual,
            read: false,
        }
    }

    pub(super) fn saw(&mut self, record: &Record) {
        self.applied = record.epoch;
        self.seen = record.state;
        self.told = (
            record.origin.clone(),
            record.reason.clone(),
            record.last_failure.clone(),
        );
        self.open_until = record.open_remaining().map(|d| later(Instant::now(), d));
        self.probe_at = self.open_until;
        self.lease = None;
        self.vanished = false;
        self.read = true;
        self.recount();
    }

    /// The breaker's state changed (here, or to a record taken on): the calls judged before
    /// belong to the record that ended, so the next batch counts from now (counts.rs).
    pub(super) fn recount(&mut self) {
        if self.counted.is_some()
            && let Some(b) = self.breaker.upgrade()
        {
            let m = b.metrics();
            self.counted = Some((m.successes + m.failures, m.failures));
        }
    }

    /// Whether the fleet's record already says what `intent` would write, so writing it would
    /// only restart the fleet's open time (a trip made here just before another instance's
    /// record arrived).
    ///
    /// Under a quorum (`quorum`), a close over a closed record, or over none, has nothing to
    /// write either: the breaker opened alone, and closing it tells the fleet nothing (writing
    /// a closed record would close the others that are open alone).
    pub(super) fn holds(&self, intent: Intent, quorum: bool) -> bool {
        match intent {
            Intent::Trip | Intent::Report => {
                self.seen == State::Open && self.open_until.is_some_and(|t| Instant::now() < t)
            }
            Intent::Close => self.seen == State::Closed && (self.applied != 0 || quorum),
            _ => false,
        }
    }
}

#[derive(Default)]
pub(super) struct Pending {
    pub(super) manual: Option<(State, Reason)>,
    pub(super) auto: Option<(Intent, Reason)>,
    /// The breaker took a record on after `manual` was made (the task applied one in the
    /// moment between the change and its message): once `manual` is written, the breaker
    /// takes the written record on, so that it holds what the fleet does.
    pub(super) reimport: bool,
}

#[cfg(test)]
impl<T> Answer<T> {
    /// The answer, if the store gave one this instance reads.
    pub(super) fn done(self) -> Option<T> {
        match self {
            Answer::Done(t) => Some(t),
            _ => None,
        }
    }
}

/// A breaker whose keys hold what this instance cannot read, and when to try them again.
#[derive(Clone, Copy, Debug)]
pub(super) struct Trouble {
    pub(super) retry_at: Instant,
    pub(super) backoff: Duration,
}

/// Records read in one round trip by a re-read pass.
pub(crate) const READ_BATCH: usize = 256;

/// Records a periodic pass reads besides those that need it (resync.rs): the idle ones, in
/// turn, so that an idle instance's load on the store does not grow with its breakers.
pub(crate) const SWEEP: usize = 16;

/// The first and the longest wait before a troubled record is tried again. At most half a
/// second: a foreign value that is removed is then noticed by the next re-read (within
/// `resync_every`), and its breaker shared again within 1 s.
pub(super) const TROUBLE_FIRST: Duration = Duration::from_millis(100);
pub(super) const TROUBLE_MAX: Duration = Duration::from_millis(500);

pub(crate) struct Task {
    pub(super) store: Box<dyn FleetStore>,
    pub(super) shared: Arc<Inner>,
    pub(super) rx: mpsc::UnboundedReceiver<Message>,
    pub(super) pushes: Feed,
    /// The change feed closed (a store of the application's whose sender is gone): other
    /// instances' changes arrive by the periodic re-reads alone.
    pub(super) feed_closed: bool,
    pub(super) channel: String,
    // Ordered maps: the task visits breakers in the same order in every run, which the
    // simulator's replay of a seed relies on.
    pub(super) tracked: BTreeMap<String, Tracked>,
    pub(super) pending: BTreeMap<String, Pending>,
    pub(super) subscribed: bool,
    /// A full re-read is owed: at start, after a disconnection or a failed operation.
    pub(super) owed: bool,
    /// Changes of state this task imported itself (to hold or give back a breaker): their
    /// `Imported` messages are not a remote record's, and drop no pending local change.
    pub(super) own_imports: BTreeMap<String, VecDeque<bool>>,
    /// When a foreign message on the channel was last warned about.
    pub(super) foreign_warned: Option<Instant>,
    /// Where the next periodic pass's sweep of idle records starts (resync.rs).
    pub(super) sweep: usize,
    /// The live instances and the expiry of each one's heartbeat (server ms), as this
    /// instance's last heartbeat read them: what a quorum is counted over (quorum.rs).
    pub(super) beat: Vec<(String, u64)>,
}

/// How a store operation about one breaker ended.
pub(super) enum Answer<T> {
    /// The store answered.
    Done(T),
    /// The store answered about this breaker's keys with an error or a reply this instance
    /// cannot read: this breaker's problem only (`Task::troubled`).
    Unreadable(String),
    /// The store failed or timed out (`Task::failed` has run).
    Failed,
}

/// How writing one change ended.
pub(super) enum Pushed {
    /// Written, or nothing of it left to write.
    Done,
    /// Kept for later: the key holds what this instance cannot read.
    Kept,
    /// The store failed.
    Failed,
}

/// Probe leases this instance holds for a breaker (`lease.rs` asks for them and keeps them).
#[derive(Clone, Copy, Debug)]
pub(super) struct Lease {
    /// When they end here: their life from the moment the ask was sent, which is before the
    /// store granted them.
    pub(super) until: Instant,
    /// The ask's round trip.
    pub(super) rtt: Duration,
}

impl Task {
    #[cfg(test)]
    pub(crate) fn new(shared: Arc<Inner>, rx: mpsc::UnboundedReceiver<Message>) -> Task {
        let (store, pushes) = crate::store::production_store(&shared.config).expect("a good URL");
        Task::with_store(Box::new(store), pushes, shared, rx)
    }

    /// A task over Redis's wire (the production connection, or the simulator's), its
    /// published messages (and the connection's losses) arriving on `pushes`.
    #[cfg(test)]
    pub(crate) fn with_store(
        store: Box<dyn crate::store::Wire>,
        pushes: mpsc::UnboundedReceiver<redis::PushInfo>,
        shared: Arc<Inner>,
        rx: mpsc::UnboundedReceiver<Message>,
    ) -> Task {
        let store = Box::new(crate::store::Redis::new(store, &shared.config.prefix));
        Task::over(store, Feed::redis(pushes), shared, rx)
    }

    /// A task over any store, its change feed `pushes`.
    pub(crate) fn over(
        store: Box<dyn FleetStore>,
        pushes: Feed,
        shared: Arc<Inner>,
        rx: mpsc::UnboundedReceiver<Message>,
    ) -> Task {
        let channel = format!("{}:changes", shared.config.prefix);
        Task {
            store,
            shared,
            rx,
            pushes,
            feed_closed: false,
            channel,
            tracked: BTreeMap::new(),
            pending: BTreeMap::new(),
            subscribed: false,
            owed: true,
            own_imports: BTreeMap::new(),
            foreign_warned: None,
            sweep: 0,
            beat: Vec::new(),
        }
    }

    /// `name`'s record (a family key's too: keys.rs).
    pub(super) fn key(&self, name: &str) -> String {
        record_key(&self.shared.config.prefix, name)
    }

    /// Whether this instance beats: it shares a breaker under a quorum.
    pub(super) fn beats(&self) -> bool {
        self.tracked
            .keys()
            .any(|name| self.quorum_of(name).is_some())
    }

    /// The breaker's quorum, if its trips wait for one.
    pub(super) fn quorum_of(&self, name: &str) -> Option<Quorum> {
        // A family key's is its family's.
        let name = split_key(name).map_or(name, |(family, _)| family);
        match self.shared.config.trip_of(name) {
            FleetTrip::Quorum(q) => Some(q),
            _ => None,
        }
    }

    /// A heartbeat's life: three re-reads, so that one lost or late beat leaves no instance
    /// out.
    pub(super) fn live_ttl(&self) -> Duration {
        self.shared.config.resync_every * 3
    }
}
