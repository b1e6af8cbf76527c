//! The fleet's background task: the only code that talks to Redis.
//!
//! One loop, so every decision about a breaker is made in order: local changes from the
//! listeners (a channel), remote changes (push messages), and a timer that retries what is
//! pending and re-reads every record.

use core::time::Duration;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use redis::{FromRedisValue, PushInfo, PushKind, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

mod counts;
mod lease;
mod quorum;

pub(crate) use quorum::Tally;
mod push;
mod resync;

use super::record::{Record, parse_payload};
use super::store::{Script, Store, is_record_problem};
use super::{Held, Inner, OnStoreError};
use breakerbox_runtime::__edge::{BreakerExt, RegistryExt};
use breakerbox_runtime::Reason;
use breakerbox_runtime::registry;
use breakerbox_runtime::{Breaker, SharedState, State, WeakBreaker};

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
    /// `Fleet::resync`: answer whether every store operation succeeded.
    Resync(oneshot::Sender<bool>),
}

/// A local change still to be written.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Intent {
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

struct Tracked {
    breaker: WeakBreaker,
    /// The epoch of the record this breaker last matched (0: none).
    applied: u64,
    /// That record's state, and while open, until when (here).
    seen: State,
    open_until: Option<Instant>,
    /// While that record is open: when to ask for a probe lease (see lease.rs).
    probe_at: Option<Instant>,
    /// The judged calls and failures counted up to the last batch (see counts.rs).
    counted: Option<(u64, u64)>,
    /// Its keys hold what this instance cannot read (`Task::troubled`).
    trouble: Option<Trouble>,
    /// The probe leases this instance holds for the open record (lease.rs).
    lease: Option<lease::Lease>,
    /// The record it had vanished, and none has been seen or written since (resync.rs).
    vanished: bool,
    /// `Breaker::manual_changes` as last accounted for: a hand on it that changed no state
    /// (a `reset` of a closed breaker) tells no event, and is found by comparing (counts.rs).
    manual: u32,
}

impl Tracked {
    fn new(breaker: WeakBreaker) -> Tracked {
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
            open_until: None,
            probe_at: None,
            counted,
            trouble: None,
            lease: None,
            vanished: false,
            manual,
        }
    }

    fn saw(&mut self, record: &Record) {
        self.applied = record.epoch;
        self.seen = record.state;
        self.open_until = record.open_remaining().map(|d| Instant::now() + d);
        self.probe_at = self.open_until;
        self.lease = None;
        self.vanished = false;
        self.recount();
    }

    /// The breaker's state changed (here, or to a record taken on): the calls judged before
    /// belong to the record that ended, so the next batch counts from now (counts.rs).
    fn recount(&mut self) {
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
    fn holds(&self, intent: Intent, quorum: bool) -> bool {
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
struct Pending {
    manual: Option<(State, Reason)>,
    auto: Option<(Intent, Reason)>,
    /// The breaker took a record on after `manual` was made (the task applied one in the
    /// moment between the change and its message): once `manual` is written, the breaker
    /// takes the written record on, so that it holds what the fleet does.
    reimport: bool,
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
    retry_at: Instant,
    backoff: Duration,
}

/// Records read in one round trip by a re-read pass.
pub(crate) const READ_BATCH: usize = 256;

/// The first and the longest wait before a troubled record is tried again. At most half a
/// second: a foreign value that is removed is then noticed by the next re-read (within
/// `resync_every`), and its breaker shared again within 1 s.
const TROUBLE_FIRST: Duration = Duration::from_millis(100);
const TROUBLE_MAX: Duration = Duration::from_millis(500);

pub(crate) struct Task {
    store: Box<dyn Store>,
    shared: Arc<Inner>,
    rx: mpsc::UnboundedReceiver<Message>,
    pushes: mpsc::UnboundedReceiver<PushInfo>,
    channel: String,
    // Ordered maps: the task visits breakers in the same order in every run, which the
    // simulator's replay of a seed relies on.
    tracked: BTreeMap<String, Tracked>,
    pending: BTreeMap<String, Pending>,
    subscribed: bool,
    /// A full re-read is owed: at start, after a disconnection or a failed operation.
    owed: bool,
    /// Changes of state this task imported itself (to hold or give back a breaker): their
    /// `Imported` messages are not a remote record's, and drop no pending local change.
    own_imports: BTreeMap<String, VecDeque<bool>>,
    /// When a foreign message on the channel was last warned about.
    foreign_warned: Option<Instant>,
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

/// The loop's timers: the next re-read, and the count batches.
struct Timers {
    next: Instant,
    batch: tokio::time::Interval,
}

impl Task {
    #[cfg(test)]
    pub(crate) fn new(shared: Arc<Inner>, rx: mpsc::UnboundedReceiver<Message>) -> Task {
        let (store, pushes) = super::production_store(&shared.config).expect("a good URL");
        Task::with_store(Box::new(store), pushes, shared, rx)
    }

    /// A task over any store, its published messages (and the connection's losses) arriving
    /// on `pushes`.
    pub(crate) fn with_store(
        store: Box<dyn Store>,
        pushes: mpsc::UnboundedReceiver<PushInfo>,
        shared: Arc<Inner>,
        rx: mpsc::UnboundedReceiver<Message>,
    ) -> Task {
        let channel = format!("{}:changes", shared.config.prefix);
        Task {
            store,
            shared,
            rx,
            pushes,
            channel,
            tracked: BTreeMap::new(),
            pending: BTreeMap::new(),
            subscribed: false,
            owed: true,
            own_imports: BTreeMap::new(),
            foreign_warned: None,
        }
    }

    fn key(&self, name: &str) -> String {
        format!("{{{}:{name}}}", self.shared.config.prefix)
    }

    fn probes_key(&self, name: &str) -> String {
        format!("{{{}:{name}}}:probes", self.shared.config.prefix)
    }

    /// `name`'s key `{<prefix>:<name>}:<what>`: beside the record, on its hash slot.
    pub(super) fn key_of(&self, name: &str, what: &str) -> String {
        format!("{{{}:{name}}}:{what}", self.shared.config.prefix)
    }

    /// The breaker's quorum, if its trips wait for one.
    pub(super) fn quorum_of(&self, name: &str) -> Option<crate::Quorum> {
        match self.shared.config.trip_of(name) {
            crate::FleetTrip::Quorum(q) => Some(q),
            _ => None,
        }
    }

    /// A heartbeat's life: three re-reads, so that one lost or late beat leaves no instance
    /// out.
    pub(super) fn live_ttl(&self) -> Duration {
        self.shared.config.resync_every * 3
    }

    pub(crate) async fn run(mut self) {
        let mut timers = Timers {
            next: Instant::now(),
            batch: tokio::time::interval(counts::BATCH),
        };
        timers
            .batch
            .set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while self.step(&mut timers).await {}
    }

    /// One turn of the loop; `false` once the fleet is gone.
    ///
    /// Local changes come before published records: a change this instance made before the
    /// task looks at a record is written (or kept pending, if the store fails) first, so a
    /// record written before that change (by another instance, or by this one's count batch)
    /// is never taken on over it; `apply` then finds it older than the write, or a manual
    /// change pending.
    async fn step(&mut self, timers: &mut Timers) -> bool {
        let probe_at = self.next_probe();
        tokio::select! {
            biased;
            message = self.rx.recv() => match message {
                Some(Message::Changed { name, to, reason, breaker }) => {
                    self.on_change(name, to, reason, breaker);
                    // Everything queued goes in one flush.
                    while let Ok(more) = self.rx.try_recv() {
                        self.on_message(more).await;
                    }
                    self.flush().await;
                }
                Some(other) => self.on_message(other).await,
                None => return false,
            },
            push = self.pushes.recv() => match push {
                Some(push) => self.on_push(push),
                None => return false,
            },
            _ = tokio::time::sleep_until(probe_at.unwrap_or(timers.next)), if probe_at.is_some() => {
                self.probe_due().await;
            }
            _ = timers.batch.tick() => self.send_counts().await,
            _ = tokio::time::sleep_until(timers.next) => {
                self.tick().await;
                timers.next = Instant::now() + self.period();
            }
        }
        self.shared
            .pending
            .store(self.pending.len() as u64, Ordering::Relaxed);
        self.shared
            .shared
            .store(self.tracked.len() as u64, Ordering::Relaxed);
        // A failure or a disconnection in any branch owes a re-read within 100 ms (`period`):
        // the next one comes forward, never later.
        let soon = Instant::now() + self.period();
        if soon < timers.next {
            timers.next = soon;
        }
        true
    }

    /// While the store fails or a re-read is owed: a quarter of `resync_every`, at most 100 ms.
    fn period(&self) -> Duration {
        let every = self.shared.config.resync_every;
        if self.owed || self.pending.keys().any(|name| !self.left_alone(name)) {
            (every / 4).min(Duration::from_millis(100))
        } else {
            every
        }
    }

    async fn on_message(&mut self, message: Message) {
        if let Some(done) = self.note(message) {
            let ok = self.tick().await;
            let _ = done.send(ok);
        }
    }

    /// Takes in a message, except a resync request, which it hands back for the caller to
    /// run (or, during a re-read, to answer with that re-read's result).
    pub(super) fn note(&mut self, message: Message) -> Option<oneshot::Sender<bool>> {
        match message {
            Message::Changed {
                name,
                to,
                reason,
                breaker,
            } => self.on_change(name, to, reason, breaker),
            Message::Imported { name } => {
                // The task's imports, in order: this event is the oldest one not yet read.
                let own = self
                    .own_imports
                    .get_mut(&name)
                    .and_then(VecDeque::pop_front);
                if own == Some(true) {
                    // A hold or a give-back: no record of the fleet's.
                    return None;
                }
                if let Some(pending) = self.pending.get_mut(&name) {
                    pending.auto = None;
                    pending.reimport |= pending.manual.is_some();
                }
            }
            Message::Track { name, breaker } => {
                self.track(&name, breaker);
                self.owed = true;
            }
            Message::Resync(done) => return Some(done),
        }
        None
    }

    fn track(&mut self, name: &str, breaker: WeakBreaker) {
        let same = |t: &Tracked| match (t.breaker.upgrade(), breaker.upgrade()) {
            (Some(a), Some(b)) => a.ptr_eq(&b),
            (None, None) => true,
            _ => false,
        };
        match self.tracked.get(name) {
            Some(t) if same(t) => {}
            // Another breaker under this name (the one before was dropped, or is left to
            // go): the new one is shared from scratch, its record read by the next pass.
            Some(_) => {
                self.tracked.insert(name.to_owned(), Tracked::new(breaker));
                self.owed = true;
            }
            None => {
                self.tracked.insert(name.to_owned(), Tracked::new(breaker));
            }
        }
    }

    fn on_change(&mut self, name: String, to: State, reason: Reason, breaker: Option<WeakBreaker>) {
        if let Some(breaker) = breaker {
            self.track(&name, breaker);
        } else if !self.tracked.contains_key(&name) {
            match registry().existing(&name) {
                Some(b) => self.track(&name, b.downgrade()),
                None => return,
            }
        }
        if to != State::HalfOpen
            && let Some(breaker) = self.breaker(&name)
        {
            // The round the leases were for is over (lease.rs): the breaker decides alone
            // again until it holds leases anew.
            breaker.set_probe_budget(None);
            if let Some(t) = self.tracked.get_mut(&name) {
                t.lease = None;
            }
        }
        let manual = self.breaker(&name).map(|b| b.manual_changes());
        if let Some(held) = self.shared.held.lock().unwrap().as_mut()
            && held.get(&name).is_some_and(|h| Some(h.manual) != manual)
        {
            // Changed here by hand while held: that change stands, nothing is given back. A
            // held breaker changes by no other hand (forced open or disabled, it neither trips
            // nor closes), so a change told with no hand on it since the hold was made before
            // the hold: the state the hold keeps already has it.
            held.remove(&name);
        }
        if let (Some(t), Some(m)) = (self.tracked.get_mut(&name), manual) {
            t.manual = m;
        }
        if let Some(t) = self.tracked.get_mut(&name) {
            t.recount();
        }
        let quorum = self.quorum_of(&name).is_some();
        let pending = self.pending.entry(name).or_default();
        // The breaker's latest state is this local change: it stands (written below).
        pending.reimport = false;
        match (to, reason) {
            (State::ForcedOpen | State::Disabled, _) | (State::Closed, Reason::Reset) => {
                // A manual change supersedes the automatic one before it.
                pending.manual = Some((to, reason));
                pending.auto = None;
            }
            // A trip by hand (`trip_for`) reaches the fleet as manual control does; a trip
            // by the breaker's own calls waits for a quorum, if the breaker has one.
            (State::Open, Reason::TripFor(_)) => pending.auto = Some((Intent::Trip, reason)),
            (State::Open, _) if quorum => pending.auto = Some((Intent::Report, reason)),
            (State::Open, _) => pending.auto = Some((Intent::Trip, reason)),
            (State::Closed, _) => pending.auto = Some((Intent::Close, reason)),
            _ => {}
        }
    }

    /// A push message: a published record, or the connection's loss.
    fn on_push(&mut self, push: PushInfo) {
        match push.kind {
            PushKind::Disconnection => {
                self.owed = true;
                self.shared.connected.store(false, Ordering::Relaxed);
                self.hold();
            }
            PushKind::Message => {
                let Some(Value::BulkString(payload)) = push.data.get(1) else {
                    return;
                };
                let Some((name, record)) = parse_payload(payload) else {
                    self.foreign_message(payload);
                    return;
                };
                // Written by a fleet's script: the key holds a record again.
                self.readable(&name);
                if record.epoch > self.tracked.get(&name).map_or(0, |t| t.applied) {
                    self.apply(&name, &record);
                }
            }
            _ => {}
        }
    }

    /// The local breaker `name`: tracked, or a registry breaker the config shares.
    fn breaker(&mut self, name: &str) -> Option<Breaker> {
        if let Some(b) = self.tracked.get(name).and_then(|t| t.breaker.upgrade()) {
            return Some(b);
        }
        if !self.shared.config.shares(name) {
            return None;
        }
        let b = registry().existing(name)?;
        self.tracked
            .insert(name.to_owned(), Tracked::new(b.downgrade()));
        Some(b)
    }

    /// Takes on the record `record` as the breaker's state, unless it holds it already.
    fn apply(&mut self, name: &str, record: &Record) {
        if record.epoch == 0 {
            return; // no record is no state to take on
        }
        if self.pending.get(name).is_some_and(|p| p.manual.is_some()) {
            // A manual change made here is about to be written over this record (`force`):
            // the breaker keeps it.
            return;
        }
        let Some(breaker) = self.breaker(name) else {
            return;
        };
        // The fleet moved on: whatever leases this instance held are dropped (lease.rs).
        breaker.set_probe_budget(None);
        if let Some(t) = self.tracked.get_mut(name) {
            t.saw(record);
        }
        if let Some(pending) = self.pending.get_mut(name) {
            pending.auto = None;
        }
        if let Some(h) = self
            .shared
            .held
            .lock()
            .unwrap()
            .as_mut()
            .and_then(|held| held.get_mut(name))
        {
            // Held for a failing store: the breaker stays held, and gets this record back
            // when the store answers, instead of the state it had before the hold, which
            // the record is newer than.
            h.state = lease::held(&breaker, record.shared_state());
            h.since = Instant::now();
            self.shared.applied.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let local = breaker.state();
        if local == record.state && record.state != State::Open {
            return;
        }
        // A local change of this breaker not yet written loses to the record: the record is
        // newer than what that change was made from. An open record is held here one
        // `probe_timeout` longer, for the fleet's probe leases (lease.rs).
        self.import(
            name,
            &breaker,
            &lease::held(&breaker, record.shared_state()),
            false,
        );
        self.shared.applied.fetch_add(1, Ordering::Relaxed);
    }

    /// Runs `script` for the breaker `name`, bounded by the task's limit. A failure or a
    /// timeout is the store's (`failed`: it counts, and owes a full re-read); an error the
    /// store gives about this breaker's keys, or a reply this instance cannot read, is that
    /// breaker's only (`Answer::Unreadable`, for the caller to pass to `troubled`).
    pub(super) async fn ask<T: FromRedisValue>(
        &mut self,
        script: Script,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Answer<T> {
        let limit = self.shared.config.timeout * 2;
        let result = tokio::time::timeout(limit, self.store.eval(script, keys, args)).await;
        match result {
            Ok(reply) => self.answer_of(reply),
            Err(_) => {
                self.failed("timed out");
                Answer::Failed
            }
        }
    }

    /// One script call's reply, as an answer about its breaker (see `ask`).
    pub(super) fn answer_of<T: FromRedisValue>(
        &mut self,
        reply: redis::RedisResult<Value>,
    ) -> Answer<T> {
        match reply {
            Ok(value) => {
                self.shared.connected.store(true, Ordering::Relaxed);
                match redis::from_redis_value::<T>(value) {
                    Ok(reply) => Answer::Done(reply),
                    Err(e) => Answer::Unreadable(format!("an unexpected reply: {e}")),
                }
            }
            Err(e) if is_record_problem(&e) => {
                self.shared.connected.store(true, Ordering::Relaxed);
                Answer::Unreadable(e.to_string())
            }
            Err(e) => {
                self.failed(&e.to_string());
                Answer::Failed
            }
        }
    }

    /// Runs `record.lua` for `name`.
    async fn invoke(&mut self, name: &str, args: &[&str]) -> Answer<Record> {
        let keys = vec![self.key(name), self.probes_key(name)];
        let args = args.iter().map(|a| (*a).to_owned()).collect();
        let answer = self.ask::<Vec<String>>(Script::Record, keys, args).await;
        self.record_of(name, answer)
    }

    /// `record.lua`'s reply about `name`, as a record.
    pub(super) fn record_of(&mut self, name: &str, answer: Answer<Vec<String>>) -> Answer<Record> {
        match answer {
            Answer::Done(reply) => match Record::from_reply(&reply) {
                Some(record) => {
                    self.readable(name);
                    Answer::Done(record)
                }
                None => Answer::Unreadable(
                    "a record this instance cannot read (another version's?)".to_owned(),
                ),
            },
            Answer::Unreadable(why) => Answer::Unreadable(why),
            Answer::Failed => Answer::Failed,
        }
    }

    /// The store answered about `name`'s keys with an error, or with what this instance cannot
    /// read: a value of another type left there by another application or version, a hash
    /// whose fields are not a record's. That is this breaker's problem only: it is left alone
    /// (its pending change kept, its record not read) for a backoff that doubles up to
    /// `TROUBLE_MAX`, then tried again, while every other breaker goes on as before.
    pub(super) fn troubled(&mut self, name: &str, why: &str) {
        let key = self.key(name);
        let Some(t) = self.tracked.get_mut(name) else {
            return;
        };
        let backoff = t
            .trouble
            .map_or(TROUBLE_FIRST, |t| (t.backoff * 2).min(TROUBLE_MAX));
        if t.trouble.is_none() {
            tracing::warn!(target: "breakerbox", name, key, why, "fleet: the store holds what this instance cannot read under this breaker's key; this breaker is not shared until it can (tried again with backoff), the others go on");
        }
        t.trouble = Some(Trouble {
            retry_at: Instant::now() + backoff,
            backoff,
        });
    }

    /// The store answered about `name` with a record this instance reads.
    pub(super) fn readable(&mut self, name: &str) {
        if let Some(t) = self.tracked.get_mut(name)
            && t.trouble.take().is_some()
        {
            tracing::info!(target: "breakerbox", name, "fleet: this breaker's record reads again; shared as before");
        }
    }

    /// Whether `name` is left alone for now (`troubled`).
    pub(super) fn left_alone(&self, name: &str) -> bool {
        self.tracked
            .get(name)
            .and_then(|t| t.trouble)
            .is_some_and(|t| Instant::now() < t.retry_at)
    }

    fn failed(&mut self, why: &str) {
        if self.shared.connected.swap(false, Ordering::Relaxed) {
            tracing::warn!(target: "breakerbox", "fleet: the store failed ({why}); breakers decide locally until it answers");
        }
        self.shared.store_errors.fetch_add(1, Ordering::Relaxed);
        *self
            .shared
            .last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(why.to_owned());
        self.owed = true;
        self.hold();
    }

    /// Imports `state` into `breaker`: `own` for a hold or a give-back (see `own_imports`),
    /// else the fleet's record taken on.
    pub(super) fn import(&mut self, name: &str, breaker: &Breaker, state: &SharedState, own: bool) {
        if breaker.state() != state.state {
            // A change of state tells an event: its `Imported` message is matched to this.
            self.own_imports
                .entry(name.to_owned())
                .or_default()
                .push_back(own);
        }
        breaker.import_state(state);
    }

    /// Imports `state` into `breaker` as this task's own change: a hold or a give-back.
    fn import_own(&mut self, name: &str, breaker: &Breaker, state: &SharedState) {
        self.import(name, breaker, state, true);
    }

    /// A message on the channel that is no record of a fleet's (another application's, another
    /// version's, or made up): skipped, with a warning at most once a second.
    fn foreign_message(&mut self, payload: &[u8]) {
        let now = Instant::now();
        if self
            .foreign_warned
            .is_none_or(|at| now >= at + Duration::from_secs(1))
        {
            self.foreign_warned = Some(now);
            let shown = String::from_utf8_lossy(&payload[..payload.len().min(64)]).into_owned();
            tracing::warn!(target: "breakerbox", channel = self.channel, message = shown, bytes = payload.len(), "fleet: a message on the channel is not a fleet record; skipped");
        }
    }

    /// Whether shared breakers are held for a failing store.
    pub(super) fn holding(&self) -> bool {
        self.shared.held.lock().unwrap().is_some()
    }

    /// The store is unreachable: under `on_store_error = "open" | "closed"`, holds every
    /// shared breaker forced open or disabled, keeping the state it had. Once per outage.
    fn hold(&mut self) {
        let to = match self.shared.config.on_store_error {
            OnStoreError::Local => return,
            OnStoreError::Open => State::ForcedOpen,
            OnStoreError::Closed => State::Disabled,
        };
        if self.holding() {
            return;
        }
        self.track_registry();
        let mut held = BTreeMap::new();
        let mut hold = Vec::new();
        let names: Vec<String> = self.tracked.keys().cloned().collect();
        for name in names {
            let Some(breaker) = self.breaker(&name) else {
                continue;
            };
            let was = breaker.export_state();
            if matches!(was.state, State::ForcedOpen | State::Disabled) {
                continue; // set by hand: it stays as it is
            }
            held.insert(
                name.clone(),
                Held {
                    breaker: breaker.downgrade(),
                    state: was,
                    since: Instant::now(),
                    manual: breaker.manual_changes(),
                },
            );
            hold.push((name, breaker, was.reopens));
        }
        tracing::warn!(target: "breakerbox", policy = self.shared.config.on_store_error.as_str(), breakers = held.len(), "fleet: the store is unreachable; shared breakers held {to} until it answers");
        for (name, breaker, reopens) in hold {
            self.import_own(&name, &breaker, &SharedState::new(to, None, reopens));
            if let Some(t) = self.tracked.get_mut(&name) {
                t.recount();
            }
        }
        // Recorded once the breakers are held: a `Fleet` dropped meanwhile (on another thread)
        // found nothing to give back, and the task's own drop, when the abort lands, gives
        // back what is recorded here.
        *self.shared.held.lock().unwrap() = Some(held);
    }

    /// The store answers again: every held breaker gets back the state it had, or the
    /// fleet's record taken on during the hold, its open time counted on; the re-read that
    /// follows takes on the fleet's newer records.
    fn give_back(&mut self) {
        let Some(held) = self.shared.held.lock().unwrap().take() else {
            return;
        };
        let hold = match self.shared.config.on_store_error {
            OnStoreError::Open => State::ForcedOpen,
            _ => State::Disabled,
        };
        for (name, h) in held {
            let Some(breaker) = h.breaker.upgrade() else {
                continue;
            };
            if breaker.state() != hold {
                continue; // changed since by hand: that change stands
            }
            if breaker.manual_changes() != h.manual {
                // Forced open (or disabled) by hand into the state it was held in: no event
                // told it, so it is written here, as any manual change.
                let reason = if hold == State::ForcedOpen {
                    Reason::ForcedOpen
                } else {
                    Reason::Disabled
                };
                let pending = self.pending.entry(name).or_default();
                pending.manual = Some((hold, reason));
                pending.auto = None;
                continue;
            }
            let mut state = h.now();
            if state.state == State::HalfOpen {
                // A round of probes the hold ended: the next one waits for a lease too, held
                // one `probe_timeout` as an open record is.
                state = lease::held(
                    &breaker,
                    SharedState::new(State::Open, Some(Duration::ZERO), state.reopens),
                );
            }
            if let Some(t) = self.tracked.get_mut(&name) {
                // Counts start over (counts.rs): what a disabled breaker admitted meanwhile
                // was judged by none. An open state waits for a lease like any the fleet
                // holds: asked for when the record's open time ends (the state given back is
                // already held past it, as the record was taken on), or its own.
                t.recount();
                t.lease = None;
                t.probe_at = match (t.seen, t.open_until) {
                    (State::Open, Some(until)) if state.state == State::Open => Some(until),
                    _ => state.open_remaining.map(|left| Instant::now() + left),
                };
            }
            breaker.set_probe_budget(None);
            self.import_own(&name, &breaker, &state);
        }
        tracing::info!(target: "breakerbox", "fleet: the store answers again; shared breakers decide as before");
    }
}

impl Drop for Task {
    /// The task is gone (its `Fleet` dropped, or its runtime shut down): no breaker stays held.
    fn drop(&mut self) {
        super::give_back(&self.shared);
        // The probe budgets lease.rs set are the fleet's: unshared, each decides alone.
        for t in self.tracked.values() {
            if let Some(b) = t.breaker.upgrade() {
                b.set_probe_budget(None);
            }
        }
    }
}

#[cfg(test)]
mod tests;
