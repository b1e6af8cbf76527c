//! The fleet's store, pluggable: [`FleetStore`], the operations of the fleet's protocol that
//! its task asks of a store, the types they take and answer, and [`Feed`], the store's change
//! feed as the task reads it. Redis ([`redis()`]) and PostgreSQL (feature `postgres`, chosen by
//! a `postgres://` URL) implement it; so can a store of your own, as the cloud design
//! pattern's `ICircuitBreakerStateStore`: write it in your crate, check it with the
//! conformance suite ([`conformance`], feature `conformance`), and start a fleet on it with
//! [`Fleet::start_with_store`](crate::Fleet::start_with_store). `docs/fleet.md` in the
//! repository ("Writing a store of your own") walks through one.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use breakerbox_fleet::{Fleet, FleetConfig, store};
//!
//! let config = FleetConfig::new("redis://127.0.0.1:6379/").share("payments*");
//! // Redis's own store: wrap it, or replace it by one of yours.
//! let (redis, feed) = store::redis(&config)?;
//! let fleet = Fleet::start_with_store(config, redis, feed)?;
//! # drop(fleet); Ok(()) }
//! ```
//!
//! Inside the crate, Redis's implementation sends its commands over one seam (`Wire`: the
//! five scripts, plain pipelines, `PING` and the subscription): the connection in production,
//! and the deterministic model store of the simulator (`sim/`) in tests, so the same task and
//! the same Redis store run against both.

use core::future::Future;
use core::pin::Pin;
use core::time::Duration;

use redis::{RedisResult, Value};
use tokio::sync::mpsc;

use crate::config::{FleetConfig, Quorum};
use crate::connect::{Connector, Handle, connector};
use crate::error::FleetError;
use crate::keys::{open_set_key, record_key};
use crate::record::{READ_FIELDS, parse_payload, state_name};

/// A store operation in flight.
pub(crate) type Reply<'a, T> = Pin<Box<dyn Future<Output = RedisResult<T>> + Send + 'a>>;

/// The fleet's Lua scripts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Script {
    /// `record.lua`: read, compare-and-set or force a record.
    Record,
    /// `probe.lua`: half-open probe leases.
    Probe,
    /// `count.lua`: the fleet's counts of a failure-rate breaker.
    Count,
    /// `quorum.lua`: a local trip reported under a quorum, which may open the record.
    Quorum,
    /// `heartbeat.lua`: a heartbeat with the instance's local state, and everyone's.
    Heartbeat,
}

impl Script {
    /// Every script, in `Script as usize` order.
    pub(crate) const ALL: [Script; 5] = [
        Script::Record,
        Script::Probe,
        Script::Count,
        Script::Quorum,
        Script::Heartbeat,
    ];

    /// The script's SHA-1, as `EVALSHA` names it.
    pub(crate) fn sha(self) -> &'static str {
        static SHAS: std::sync::LazyLock<[String; 5]> = std::sync::LazyLock::new(|| {
            Script::ALL.map(|s| redis::Script::new(s.source()).get_hash().to_owned())
        });
        &SHAS[self as usize]
    }

    /// The script's source.
    pub(crate) fn source(self) -> &'static str {
        match self {
            Script::Record => include_str!("record.lua"),
            Script::Probe => include_str!("probe.lua"),
            Script::Count => include_str!("count.lua"),
            Script::Quorum => include_str!("quorum.lua"),
            Script::Heartbeat => include_str!("heartbeat.lua"),
        }
    }
}

/// What the fleet's task asks of Redis's wire. Each operation may fail or never answer; the
/// task bounds each by its own timeout.
pub(crate) trait Wire: Send + 'static {
    /// Runs `script` atomically over `keys` with `args`; its reply as the server sends it.
    fn eval(&mut self, script: Script, keys: Vec<String>, args: Vec<String>) -> Reply<'_, Value>;
    /// Sends `commands` (plain commands, no script) in one round trip, a pipeline: each
    /// one's reply or error, in order. The outer error is the store failing.
    fn pipeline(&mut self, commands: Vec<Vec<String>>) -> Reply<'_, Vec<RedisResult<Value>>>;
    /// `PING`.
    fn ping(&mut self) -> Reply<'_, ()>;
    /// Subscribes to `channel`; published messages arrive on the push channel given with the
    /// store, kept across reconnections.
    fn subscribe(&mut self, channel: String) -> Reply<'_, ()>;
}

pub(crate) use crate::connect::is_record_problem;

pub use crate::keys::{key_name, split_key};
pub use crate::record::Record;
#[doc(no_inline)]
pub use breakerbox_runtime::State;

/// Why a store operation gave no answer the fleet can use. Which of the two it is decides
/// what the fleet does: get it right in a store of your own.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store failed, refused the operation, or its connection was lost: every shared
    /// breaker's problem. The fleet counts it ([`FleetStatus::store_errors`](crate::FleetStatus::store_errors),
    /// the text as [`last_error`](crate::FleetStatus::last_error)), applies
    /// [`on_store_error`](crate::FleetConfig::on_store_error), and reads every record again
    /// once the store answers.
    #[error("the store failed: {0}")]
    Failed(String),
    /// The store answered about this breaker's record with an error, or with what this store
    /// cannot read (another application's value, another version's record): this breaker's
    /// problem only. The fleet leaves that breaker alone, asking again with backoff, while
    /// every other breaker goes on. Only an operation on one record (`read`, `write`,
    /// `lease`, `count`, `report`) answers it so; an operation on several or none
    /// (`read_many`, `open_keys`, `tidy`, `beat`, `ping`, `follow`) that answers it fails as
    /// a whole, as with `Failed`: a batch gives a record's problem in that record's place.
    #[error("a record the store cannot use: {0}")]
    Record(String),
}

/// A store operation in flight: a boxed future, `Send` so the fleet's task can run on any
/// tokio runtime, borrowing the store for `'a`. The task runs one operation at a time, and
/// drops one unfinished once it has waited a small multiple of the
/// [`timeout`](crate::FleetConfig::timeout) for it: a store must cope with an operation
/// dropped at any await (the next operation must not wait for it).
pub type Op<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A change of a breaker's record, as one instance writes it ([`FleetStore::write`]). The fleet
/// builds it; a store reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Change {
    /// Write whatever the record holds (manual control: `force_open`, `disable`, `reset`),
    /// instead of only over `seen`.
    pub force: bool,
    /// The record's epoch the writer last saw (0: no record). A compare-and-set writes only
    /// if the record's epoch is still this one.
    pub seen: u64,
    /// The new state: closed, open, forced open or disabled (a record holds no other).
    pub state: State,
    /// While open: for how long from the store's own clock at the write, in ms (the record's
    /// `open_until_ms` is the store's time plus this).
    pub open_ms: u64,
    /// Re-opens since the last close (the backoff level).
    pub reopens: u32,
    /// Why, as text.
    pub reason: String,
    /// The failure that tripped it (empty for none).
    pub last_failure: String,
    /// The instance the change comes from (the record's `origin`).
    pub instance: String,
    /// A family key's record only: how long it lives in the store from this write
    /// (`Duration::ZERO`: until a later write). The family's open keys
    /// ([`FleetStore::open_keys`]) list it while it is not closed, with this expiry. `None`
    /// for a single breaker's record, which lives until it is written again.
    pub life: Option<Duration>,
}

impl Change {
    /// A compare-and-set of the record to `state` over epoch `seen`, by `instance`: not
    /// forced, no open time, no re-opens, no reason or failure, a single breaker's record.
    /// Set the other fields after (`change.open_ms = 60_000`), as the fleet does; for a
    /// store's own tests.
    pub fn new(state: State, seen: u64, instance: impl Into<String>) -> Change {
        Change {
            force: false,
            seen,
            state,
            open_ms: 0,
            reopens: 0,
            reason: String::new(),
            last_failure: String::new(),
            instance: instance.into(),
            life: None,
        }
    }
}

/// A request for half-open probe leases of one open record ([`FleetStore::lease`]). The fleet
/// builds it; a store reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseAsk {
    /// The open record's epoch the asker saw.
    pub epoch: u64,
    /// How many leases may exist at once, fleet-wide (`half_open_calls`).
    pub limit: u32,
    /// A lease's life on the store's clock (`probe_timeout`).
    pub life: Duration,
    /// The process asking: its leases are `<holder>#<n>`, `n` from 1 to `limit`; one asking
    /// again renews the ones it holds.
    pub holder: String,
    /// The fewest leases worth granting (`successes`): fewer could not close a round.
    pub fewest: u32,
}

impl LeaseAsk {
    /// An ask by `holder` for up to `limit` leases of the open record of `epoch`, each for
    /// `life`, worth granting from one lease (`fewest` 1; set it after); for a store's own
    /// tests.
    pub fn new(epoch: u64, limit: u32, life: Duration, holder: impl Into<String>) -> LeaseAsk {
        LeaseAsk {
            epoch,
            limit,
            life,
            holder: holder.into(),
            fewest: 1,
        }
    }
}

/// A lease ask's answer ([`FleetStore::lease`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Leases {
    /// `count` leases granted (every free one, at least `fewest`, or the ones the holder had,
    /// renewed), each for `life` on the store's clock (the ask's life): the holder's breaker
    /// admits one probe call per lease.
    Granted {
        /// How many, at least 1.
        count: u32,
        /// For how long.
        life: Duration,
    },
    /// Not yet: the record's open time has not run out, or too few leases are free; ask
    /// again after this long (at least 1 ms while leases are held).
    Wait(Duration),
    /// The record is no longer the open epoch asked about: the fleet reads it again.
    Gone,
}

impl Leases {
    /// The scripts' and PostgreSQL's reply `(n, ms)`: `n` leases for `ms`, `(0, ms)` wait, a
    /// negative `ms` the record gone.
    pub(crate) fn from_reply(n: i64, ms: i64) -> Leases {
        if n > 0 {
            Leases::Granted {
                count: u32::try_from(n).unwrap_or(u32::MAX),
                life: Duration::from_millis(u64::try_from(ms).unwrap_or(0)),
            }
        } else if ms >= 0 {
            Leases::Wait(Duration::from_millis(ms as u64))
        } else {
            Leases::Gone
        }
    }
}

/// One instance's batch of judged calls of a failure-rate breaker, for the fleet's window
/// ([`FleetStore::count`]). The fleet builds it; a store reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CountBatch {
    /// Calls judged since the instance's last batch.
    pub calls: u64,
    /// Failures among them.
    pub failures: u64,
    /// The window, in ms.
    pub window_ms: u64,
    /// A bucket's length, in ms (the counts' resolution: the window is summed over buckets
    /// of the store's clock, the oldest dropped as it leaves the window).
    pub bucket_ms: u64,
    /// The fewest calls in the window for a trip (`min_calls`).
    pub min_calls: u32,
    /// The failure rate that trips, in percent.
    pub rate: u8,
    /// The open time of a trip, in ms.
    pub open_ms: u64,
    /// The instance sending the batch (the trip's `origin`).
    pub instance: String,
    /// The record's epoch the calls were judged under: a batch of another record is dropped.
    pub epoch: u64,
}

impl CountBatch {
    /// A batch by `instance` of `calls` judged calls, `failures` of them failed, under the
    /// record of `epoch`, for a breaker that trips at 50% failed over a window of 10 s (in
    /// buckets of 1 s) once it holds 10 calls, and opens for 30 s. Set the other fields after
    /// (`batch.rate = 20`), as the fleet does; for a store's own tests.
    pub fn new(calls: u64, failures: u64, instance: impl Into<String>, epoch: u64) -> CountBatch {
        CountBatch {
            calls,
            failures,
            window_ms: 10_000,
            bucket_ms: 1_000,
            min_calls: 10,
            rate: 50,
            open_ms: 30_000,
            instance: instance.into(),
            epoch,
        }
    }
}

/// A count batch's answer ([`FleetStore::count`]): the fleet's window after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counted {
    /// Whether this batch tripped the record (written as open and published).
    pub tripped: bool,
    /// The window's calls, every instance's (0 for a batch of another record).
    pub calls: u64,
    /// The window's failures, every instance's (0 for a batch of another record).
    pub failures: u64,
}

impl Counted {
    /// The window after a batch: `tripped` by it, `calls` and `failures` in it.
    pub fn new(tripped: bool, calls: u64, failures: u64) -> Counted {
        Counted {
            tripped,
            calls,
            failures,
        }
    }

    /// The scripts' and PostgreSQL's reply `(tripped, calls, failures)`.
    pub(crate) fn from_reply(tripped: i64, calls: i64, failures: i64) -> Counted {
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        Counted::new(tripped == 1, count(calls), count(failures))
    }
}

/// One instance's heartbeat, for the fleet's live set (what a quorum is counted over):
/// [`FleetStore::beat`], [`FleetStore::read_many`]. The fleet builds it; a store reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Beat {
    /// The instance.
    pub instance: String,
    /// How long the beat keeps it live, on the store's clock.
    pub life: Duration,
    /// The breakers it holds other than closed, `<len>:<breaker><len>:<state>` each: kept as
    /// given and returned in [`Alive::states`].
    pub states: String,
}

impl Beat {
    /// `instance`'s beat, live for `life`, holding every breaker closed (no `states`; set
    /// them after); for a store's own tests.
    pub fn new(instance: impl Into<String>, life: Duration) -> Beat {
        Beat {
            instance: instance.into(),
            life,
            states: String::new(),
        }
    }
}

/// A local trip reported under a quorum ([`FleetStore::report`]): the record opens once the
/// open reports of live instances reach the quorum. The fleet builds it; a store reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Report {
    /// The trip, as a compare-and-set over the closed record the instance saw (`force`
    /// unused; `life`: a family key's record once opened).
    pub trip: Change,
    /// The quorum among the live instances.
    pub quorum: Quorum,
    /// The live instances and each one's beat expiry (store ms), as the reporter's own beat
    /// has just read them.
    pub live: Vec<(String, u64)>,
}

impl Report {
    /// A report of `trip` under `quorum`, the live instances and their beats' expiries (store
    /// ms) as `live`; for a store's own tests.
    pub fn new(trip: Change, quorum: Quorum, live: Vec<(String, u64)>) -> Report {
        Report { trip, quorum, live }
    }
}

/// A quorum report's answer ([`FleetStore::report`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reported {
    /// The record after the call (`changed`: this report opened it).
    pub record: Record,
    /// Whether the report was taken (`false`: the record is not the closed epoch the reporter
    /// saw, and the tally is zeros).
    pub taken: bool,
    /// The open reports of live instances, this one's included.
    pub open: u32,
    /// The quorum among the live instances.
    pub needed: u32,
    /// How many instances are live.
    pub live: u32,
}

impl Reported {
    /// A report's answer: the `record` after it, whether it was `taken`, and the tally.
    pub fn new(record: Record, taken: bool, open: u32, needed: u32, live: u32) -> Reported {
        Reported {
            record,
            taken,
            open,
            needed,
            live,
        }
    }
}

/// One live instance, as a heartbeat's answer lists it ([`Live::instances`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Alive {
    /// The instance.
    pub instance: String,
    /// When its last beat expires (store ms since the Unix epoch).
    pub expires_ms: u64,
    /// The breakers it holds other than closed, as its beat gave them ([`Beat::states`]).
    pub states: String,
}

impl Alive {
    /// `instance`, live until `expires_ms` (store ms), holding `states`.
    pub fn new(instance: String, expires_ms: u64, states: String) -> Alive {
        Alive {
            instance,
            expires_ms,
            states,
        }
    }
}

/// A heartbeat's answer: everyone live, the beating instance included ([`FleetStore::beat`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Live {
    /// The store's time of the beat, in ms since the Unix epoch.
    pub now_ms: u64,
    /// The live instances (beats not expired at `now_ms`), in the store's order.
    pub instances: Vec<Alive>,
}

impl Live {
    /// The live set at the store's time `now_ms`.
    pub fn new(now_ms: u64, instances: Vec<Alive>) -> Live {
        Live { now_ms, instances }
    }
}

/// What a store's change feed delivers to the fleet ([`Feed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A record was written: its name and the record as written (`changed` true). Every
    /// write of every instance, through any operation (a trip by counts or by quorum too).
    Written(String, Record),
    /// A record was written that the feed could not carry whole: its name, for the fleet to
    /// read again ([`FleetStore::read`]).
    Stale(String),
    /// A message on the feed that is not a fleet's record (another application's, another
    /// version's, or made up): its bytes, for a warning. The fleet skips it.
    Foreign(Vec<u8>),
    /// The connection to the store was lost: what was written meanwhile is not delivered, so
    /// the fleet reads every record again.
    Lost,
}

/// A store's change feed, as the fleet reads it: what a store gives [`Fleet::start_with_store`](crate::Fleet::start_with_store)
/// with itself. A store of your own makes one from the receiving end of a channel
/// ([`Feed::new`]) and sends an [`Event`] on it for every record written (by any instance,
/// once [`FleetStore::follow`] has been called) and for each loss of its connection.
pub struct Feed(Feeding);

/// Where a feed's events come from.
enum Feeding {
    /// Redis's push messages (its `PUBLISH`ed records and the connection's losses), read as
    /// events.
    Redis(mpsc::UnboundedReceiver<redis::PushInfo>),
    /// Events as a store sends them.
    Events(mpsc::UnboundedReceiver<Event>),
}

impl Feed {
    /// A feed of the events sent on `events`' channel. Keep a sender for as long as the store
    /// lives: once every sender is dropped the fleet counts one store error (`last_error`:
    /// "the store's change feed closed…") and goes on without a feed, other instances'
    /// changes arriving by its re-reads every [`resync_every`](crate::FleetConfig::resync_every)
    /// alone.
    ///
    /// The conformance suite reads records whole from the feed ([`Event::Written`]): a store
    /// whose feed carries only names ([`Event::Stale`]), which the fleet itself accepts, fails
    /// its feed checks.
    pub fn new(events: mpsc::UnboundedReceiver<Event>) -> Feed {
        Feed(Feeding::Events(events))
    }

    /// Redis's push messages, read as events.
    pub(crate) fn redis(pushes: mpsc::UnboundedReceiver<redis::PushInfo>) -> Feed {
        Feed(Feeding::Redis(pushes))
    }

    /// The next event; `None` once the store is gone. Cancel-safe: an event is taken off the
    /// channel only when it is returned.
    pub async fn recv(&mut self) -> Option<Event> {
        match &mut self.0 {
            Feeding::Redis(pushes) => loop {
                if let Some(event) = pushed_event(pushes.recv().await?) {
                    return Some(event);
                }
            },
            Feeding::Events(events) => events.recv().await,
        }
    }

    /// Whether nothing is waiting (what is waiting may be no event).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        match &self.0 {
            Feeding::Redis(pushes) => pushes.is_empty(),
            Feeding::Events(events) => events.is_empty(),
        }
    }

    /// The next event if one is waiting, without waiting.
    pub fn try_recv(&mut self) -> Option<Event> {
        match &mut self.0 {
            Feeding::Redis(pushes) => loop {
                if let Some(event) = pushed_event(pushes.try_recv().ok()?) {
                    return Some(event);
                }
            },
            Feeding::Events(events) => events.try_recv().ok(),
        }
    }
}

impl core::fmt::Debug for Feed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let from = match self.0 {
            Feeding::Redis(_) => "redis",
            Feeding::Events(_) => "events",
        };
        f.debug_struct("Feed").field("from", &from).finish()
    }
}

/// A Redis push message as an event: a published record, or the connection's loss (`None`
/// for what is neither, such as a subscription's confirmation).
fn pushed_event(push: redis::PushInfo) -> Option<Event> {
    match push.kind {
        redis::PushKind::Disconnection => Some(Event::Lost),
        redis::PushKind::Message => {
            let Some(Value::BulkString(payload)) = push.data.get(1) else {
                return None;
            };
            Some(match parse_payload(payload) {
                Some((name, record)) => Event::Written(name, record),
                None => Event::Foreign(payload.clone()),
            })
        }
        _ => None,
    }
}

/// What a batch of re-reads found ([`FleetStore::read_many`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct Reads {
    /// Each record asked for, in order: as it is, or that record's problem (or the store's
    /// failure on that one read).
    pub records: Vec<Result<Record, StoreError>>,
    /// The heartbeat sent with the batch, if one was: everyone's, as [`FleetStore::beat`]
    /// returns it; an error is the beat's alone (the records' answers say whether the store
    /// fails).
    pub beat: Option<Result<Live, StoreError>>,
}

impl Reads {
    /// A batch's answer: each record's, and the beat's if one was sent.
    pub fn new(
        records: Vec<Result<Record, StoreError>>,
        beat: Option<Result<Live, StoreError>>,
    ) -> Reads {
        Reads { records, beat }
    }
}

/// The keyed families' open keys, as one read found them ([`FleetStore::open_keys`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct OpenKeys {
    /// The store's time of the read, in ms since the Unix epoch.
    pub now_ms: u64,
    /// Each family's keys whose record is not closed (the key's text, as [`split_key`] gives
    /// it), with the expiry of each one's record (store ms; `f64::INFINITY` while it does not
    /// expire), in the order the families were asked for; `None` for a family whose list this
    /// store cannot read (another application's value there).
    pub lists: Vec<Option<Vec<(String, f64)>>>,
}

impl OpenKeys {
    /// The families' lists read at the store's time `now_ms`.
    pub fn new(now_ms: u64, lists: Vec<Option<Vec<(String, f64)>>>) -> OpenKeys {
        OpenKeys { now_ms, lists }
    }
}

/// The operations of the fleet's protocol on one store: what the fleet's task asks of its
/// store, and nothing else. Redis and PostgreSQL implement it ([`redis()`] gives Redis's); a
/// store of your own does too, passes the conformance suite (`store::conformance`, feature
/// `conformance`), and runs a fleet with [`Fleet::start_with_store`](crate::Fleet::start_with_store).
///
/// What every operation relies on:
///
/// - **Names.** A record is named by its breaker's name, or for a key of a keyed family by
///   [`key_name`] (which [`split_key`] reads back). Keep each fleet's records apart by the
///   config's [`prefix`](crate::FleetConfig::prefix): the fleet never passes it, so build the
///   store for it.
/// - **Atomic.** Each operation on a record is atomic with every other on that record: the
///   promises (one write per trip, at most `half_open_calls` leases) rest on it.
/// - **Published.** Every write of a record is delivered on the change feed ([`Feed`]) of every
///   store of the fleet that follows it, as an [`Event::Written`] with the record as written.
/// - **The store's clock.** Open times, lease lives, count buckets and beat lives run on the
///   store's own clock, never a host's; every answer that carries a time gives the store's.
/// - **Failure.** Each operation may fail ([`StoreError`]) or never answer: the fleet bounds
///   each by a small multiple of its [`timeout`](crate::FleetConfig::timeout) and drops it
///   ([`Op`]), so a store must not hold anything across a dropped operation that a later one
///   would wait for.
/// - **Panics.** A store started with `start_with_store` that panics while an operation is
///   made or polled fails that operation (`StoreError::Failed`, "the store panicked: …"),
///   counted and handled as any failure; a panic while an operation or the store is dropped
///   is caught and dropped; the fleet's task goes on with the same store. An operation runs
///   on the fleet's task: one that blocks its thread blocks a worker of the runtime, so make
///   each one asynchronous.
///
/// The fleet runs one operation at a time on its store, from one task. Operations added to
/// the protocol later come with a default body, so a store written against this trait keeps
/// compiling.
pub trait FleetStore: Send + 'static {
    /// `name`'s record as it is (epoch 0 and closed, [`Record::none`], when there is none),
    /// with the store's time; `changed` false.
    fn read(&mut self, name: String) -> Op<'_, Record>;
    /// Writes `change` to `name`'s record: over any record if `change.force`, else only if the
    /// record's epoch is `change.seen` (a compare-and-set). A write gives the record a new
    /// epoch (greater than the last, and at least the store's time in ms: a record written
    /// again after it vanished or expired is newer than any it replaced, which the fleet's
    /// instances rely on to take it on), drops the record's
    /// probe leases and its fleet counts, and is published. Returns the record as it is after
    /// the call, `changed` telling whether this call wrote it.
    fn write(&mut self, name: String, change: Change) -> Op<'_, Record>;
    /// Asks for probe leases of `name`'s open record: at most `ask.limit` leases exist at once,
    /// fleet-wide, each for `ask.life` on the store's clock, none before the record's open
    /// time has run out ([`Leases`]).
    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, Leases>;
    /// Adds `batch` to `name`'s fleet window and trips the record (written and published as
    /// a trip, only over a closed one) once the window's calls reach `min_calls` and its
    /// failure rate `rate`. The window after the batch; all zeros for a batch of another
    /// record (`batch.epoch` not the record's).
    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, Counted>;
    /// Reads the records of `names` at once (one round trip where the store allows), and
    /// beats for the instance with them if `beat` is given.
    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads>;
    /// Reports a local trip of `name` under a quorum: the report lasts the trip's open time
    /// and counts for the record's epoch it was made over; once the open reports of live
    /// instances (those of `report.live` whose beat has not expired, and the reporter) reach
    /// the quorum, the record is opened (written and published as a trip). Only over the
    /// closed record the reporter saw; else the record as it is, not taken.
    fn report(&mut self, name: String, report: Report) -> Op<'_, Reported>;
    /// Puts the instance in the live set for `beat.life`, drops the expired, and returns
    /// everyone's.
    fn beat(&mut self, beat: Beat) -> Op<'_, Live>;
    /// Reads the open keys of each of `families` (one read a family, one round trip where
    /// the store allows, whatever the number of keys).
    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys>;
    /// Drops from the lists of the `stale` families the keys whose record expired by
    /// `before_ms` (store ms), and reads the records of `names` (in one round trip where the
    /// store allows). Each record as it is, or why not.
    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>>;
    /// Whether the store answers (and, where it has any, its schema is the fleet's).
    fn ping(&mut self) -> Op<'_, ()>;
    /// Follows the change feed: every record written from now on arrives on the store's
    /// [`Feed`], and a loss of the connection arrives there too ([`Event::Lost`]; the fleet
    /// reads every record again after one). The fleet calls it once, again until it succeeds;
    /// from then on following is the store's to keep, across its reconnections (Redis
    /// subscribes again, PostgreSQL listens again, on each new connection).
    fn follow(&mut self) -> Op<'_, ()>;
}

/// A boxed store is a store: `Box<dyn FleetStore>` too.
impl<S: FleetStore + ?Sized> FleetStore for Box<S> {
    fn read(&mut self, name: String) -> Op<'_, Record> {
        (**self).read(name)
    }
    fn write(&mut self, name: String, change: Change) -> Op<'_, Record> {
        (**self).write(name, change)
    }
    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, Leases> {
        (**self).lease(name, ask)
    }
    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, Counted> {
        (**self).count(name, batch)
    }
    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads> {
        (**self).read_many(names, beat)
    }
    fn report(&mut self, name: String, report: Report) -> Op<'_, Reported> {
        (**self).report(name, report)
    }
    fn beat(&mut self, beat: Beat) -> Op<'_, Live> {
        (**self).beat(beat)
    }
    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys> {
        (**self).open_keys(families)
    }
    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>> {
        (**self).tidy(stale, before_ms, names)
    }
    fn ping(&mut self) -> Op<'_, ()> {
        (**self).ping()
    }
    fn follow(&mut self) -> Op<'_, ()> {
        (**self).follow()
    }
}

/// A store of the application's own, whose panics are its failures: a panic while an operation
/// is made or polled answers [`StoreError::Failed`] ("the store panicked: …"), counted and
/// handled as any failure (`on_store_error`), and the fleet's task goes on; a panic while an
/// operation or the store is dropped is caught and dropped. The built-in stores are not
/// wrapped.
pub(crate) struct Unwinding<S>(Option<S>);

impl<S> Unwinding<S> {
    pub(crate) fn new(store: S) -> Unwinding<S> {
        Unwinding(Some(store))
    }

    fn store(&mut self) -> &mut S {
        self.0
            .as_mut()
            .expect("the store is only taken when dropped")
    }
}

impl<S> Drop for Unwinding<S> {
    fn drop(&mut self) {
        drop_unwinding(self.0.take());
    }
}

/// Drops `value`, a panic of its `Drop` caught and its payload discarded.
fn drop_unwinding<T>(value: T) {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        breakerbox_runtime::__integrations::discard_panic(payload);
    }
}

/// What a panic of the store answers.
fn panicked(payload: Box<dyn core::any::Any + Send>) -> StoreError {
    use breakerbox_runtime::__integrations::{discard_panic, panic_message};
    let failed = StoreError::Failed(format!("the store panicked: {}", panic_message(&*payload)));
    discard_panic(payload);
    failed
}

/// An operation of the application's store, dropped with its panics caught: the fleet drops
/// one at its timeout, or once it has answered.
struct Guarded<'a, T>(Option<Op<'a, T>>);

impl<T> Drop for Guarded<'_, T> {
    fn drop(&mut self) {
        drop_unwinding(self.0.take());
    }
}

/// The operation `make` makes, its panics (making it, in any poll, or dropping it) its failure.
fn unwinding<'a, T: Send + 'a>(make: impl FnOnce() -> Op<'a, T>) -> Op<'a, T> {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let mut op = match catch_unwind(AssertUnwindSafe(make)) {
        Ok(op) => Guarded(Some(op)),
        Err(payload) => return Box::pin(core::future::ready(Err(panicked(payload)))),
    };
    Box::pin(core::future::poll_fn(move |cx| {
        let Some(inner) = op.0.as_mut() else {
            // Answered already (a panic): never polled again by the fleet.
            return core::task::Poll::Pending;
        };
        match catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(polled) => polled,
            Err(payload) => {
                drop_unwinding(op.0.take());
                core::task::Poll::Ready(Err(panicked(payload)))
            }
        }
    }))
}

impl<S: FleetStore> FleetStore for Unwinding<S> {
    fn read(&mut self, name: String) -> Op<'_, Record> {
        unwinding(|| self.store().read(name))
    }
    fn write(&mut self, name: String, change: Change) -> Op<'_, Record> {
        unwinding(|| self.store().write(name, change))
    }
    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, Leases> {
        unwinding(|| self.store().lease(name, ask))
    }
    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, Counted> {
        unwinding(|| self.store().count(name, batch))
    }
    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads> {
        unwinding(|| self.store().read_many(names, beat))
    }
    fn report(&mut self, name: String, report: Report) -> Op<'_, Reported> {
        unwinding(|| self.store().report(name, report))
    }
    fn beat(&mut self, beat: Beat) -> Op<'_, Live> {
        unwinding(|| self.store().beat(beat))
    }
    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys> {
        unwinding(|| self.store().open_keys(families))
    }
    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>> {
        unwinding(|| self.store().tidy(stale, before_ms, names))
    }
    fn ping(&mut self) -> Op<'_, ()> {
        unwinding(|| self.store().ping())
    }
    fn follow(&mut self) -> Op<'_, ()> {
        unwinding(|| self.store().follow())
    }
}

/// The Redis store `config` names (its [`url`](crate::FleetConfig::new),
/// [`prefix`](crate::FleetConfig::prefix), [`tls_ca`](crate::FleetConfig::tls_ca) and
/// [`timeout`](crate::FleetConfig::timeout)), not connected yet, and its change feed: the
/// store [`Fleet::start`](crate::Fleet::start) runs on a `redis://` URL (`rediss://`,
/// Sentinel and Cluster with their features), for a store of your own that wraps it. It
/// connects on its first operation and again after each loss. An error names a URL it
/// cannot use, or a CA file it cannot read.
pub fn redis(config: &FleetConfig) -> Result<(impl FleetStore + use<>, Feed), FleetError> {
    let (wire, pushes) = production_store(config)?;
    Ok((
        Redis::new(Box::new(wire), &config.prefix),
        Feed::redis(pushes),
    ))
}

/// The fleet's protocol over Redis: a hash per record, written by the fleet's Lua scripts,
/// published with `PUBLISH` on `<prefix>:changes`.
pub(crate) struct Redis {
    /// The wire (the production connection, or the simulator's network to its model).
    wire: Box<dyn Wire>,
    prefix: String,
    channel: String,
}

impl Redis {
    /// The protocol for the records under `prefix`, over `wire`.
    pub(crate) fn new(wire: Box<dyn Wire>, prefix: &str) -> Redis {
        Redis {
            wire,
            prefix: prefix.to_owned(),
            channel: format!("{prefix}:changes"),
        }
    }

    /// `heartbeat.lua`'s keys and arguments: the live set, the instance, a beat's life, its
    /// states.
    fn beat_keys_args(&self, beat: &Beat) -> (Vec<String>, Vec<String>) {
        (
            vec![format!("{{{}:}}:live", self.prefix)],
            vec![
                beat.instance.clone(),
                beat.life.as_millis().max(1).to_string(),
                beat.states.clone(),
            ],
        )
    }

    /// `record.lua` for `name` with `args` (a family key's write given its life).
    fn record(
        &mut self,
        name: String,
        mut args: Vec<String>,
        life: Option<Duration>,
    ) -> Op<'_, Record> {
        let key = record_key(&self.prefix, &name);
        let mut keys = vec![key.clone(), format!("{key}:probes")];
        if let (Some(life), Some((family, key))) = (life, split_key(&name)) {
            keys.push(open_set_key(&self.prefix, family));
            args.push(life.as_millis().to_string());
            args.push(key.to_owned());
        }
        let reply = self.wire.eval(Script::Record, keys, args);
        Box::pin(async move {
            let reply: Vec<String> = typed(reply.await)?;
            Record::from_reply(&reply).ok_or_else(|| {
                StoreError::Record(
                    "a record this instance cannot read (another version's?)".to_owned(),
                )
            })
        })
    }
}

/// `TIME`, then `commands`, in one round trip: the server's time in ms (or why it cannot be
/// read), and each command's reply.
async fn timed(
    wire: &mut dyn Wire,
    commands: Vec<Vec<String>>,
) -> Result<(RedisResult<u64>, Vec<RedisResult<Value>>), StoreError> {
    let n = commands.len() + 1;
    let mut all = vec![vec!["TIME".to_owned()]];
    all.extend(commands);
    let mut replies = wire
        .pipeline(all)
        .await
        .map_err(|e| StoreError::Failed(e.to_string()))?;
    if replies.len() != n {
        return Err(StoreError::Failed(
            "a pipeline's replies do not match its commands".to_owned(),
        ));
    }
    let now = replies
        .remove(0)
        .and_then(|t| redis::from_redis_value::<(u64, u64)>(t).map_err(Into::into))
        .map(|(secs, micros)| secs * 1000 + micros / 1000);
    Ok((now, replies))
}

/// `heartbeat.lua`'s reply, `[now_ms, instance, expires_ms, states, instance, …]`, read.
fn live_of(reply: Vec<String>) -> Result<Live, StoreError> {
    let unreadable =
        || StoreError::Record("a reply of heartbeat.lua this instance cannot read".to_owned());
    let (now, rest) = reply.split_first().ok_or_else(unreadable)?;
    let instances = rest
        .chunks_exact(3)
        .map(|f| {
            Some(Alive {
                instance: f[0].clone(),
                expires_ms: f[1].parse().ok()?,
                states: f[2].clone(),
            })
        })
        .collect::<Option<Vec<Alive>>>()
        .ok_or_else(unreadable)?;
    Ok(Live {
        now_ms: now.parse().map_err(|_| unreadable())?,
        instances,
    })
}

/// `quorum.lua`'s reply, `[changed, epoch, state, open_until_ms, now_ms, reopens, origin,
/// reason, last_failure, reported, open, needed, live]`, read.
fn reported_of(reply: Vec<String>) -> Result<Reported, StoreError> {
    let tally: Vec<u32> = reply
        .get(10..13)
        .map(|t| t.iter().filter_map(|n| n.parse().ok()).collect())
        .unwrap_or_default();
    let (Some(record), &[open, needed, live]) = (
        Record::from_reply(reply.get(..9).unwrap_or_default()),
        &tally[..],
    ) else {
        return Err(StoreError::Record(
            "a reply of quorum.lua this instance cannot read".to_owned(),
        ));
    };
    Ok(Reported {
        record,
        taken: reply[9] == "1",
        open,
        needed,
        live,
    })
}

/// A script's reply as `T`: an error about the record's keys, or a reply this instance cannot
/// read, is that record's problem; any other error is the store's.
pub(crate) fn typed<T: redis::FromRedisValue>(reply: RedisResult<Value>) -> Result<T, StoreError> {
    match reply {
        Ok(value) => redis::from_redis_value::<T>(value)
            .map_err(|e| StoreError::Record(format!("an unexpected reply: {e}"))),
        Err(e) if is_record_problem(&e) => Err(StoreError::Record(e.to_string())),
        Err(e) => Err(StoreError::Failed(e.to_string())),
    }
}

impl FleetStore for Redis {
    fn read(&mut self, name: String) -> Op<'_, Record> {
        self.record(name, vec!["read".to_owned()], None)
    }

    fn write(&mut self, name: String, change: Change) -> Op<'_, Record> {
        let mode = if change.force { "force" } else { "cas" };
        let args = vec![
            mode.to_owned(),
            change.seen.to_string(),
            state_name(change.state).to_owned(),
            change.open_ms.to_string(),
            change.reopens.to_string(),
            change.reason,
            change.last_failure,
            change.instance,
            self.channel.clone(),
            name.clone(),
        ];
        self.record(name, args, change.life)
    }

    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, Leases> {
        let key = record_key(&self.prefix, &name);
        let keys = vec![key.clone(), format!("{key}:probes")];
        let args = vec![
            ask.epoch.to_string(),
            ask.limit.to_string(),
            ask.life.as_millis().max(1).to_string(),
            ask.holder,
            ask.fewest.to_string(),
        ];
        let reply = self.wire.eval(Script::Probe, keys, args);
        Box::pin(async move {
            let (n, ms): (i64, i64) = typed(reply.await)?;
            Ok(Leases::from_reply(n, ms))
        })
    }

    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, Counted> {
        let keys = vec![record_key(&self.prefix, &name)];
        let args = vec![
            batch.calls.to_string(),
            batch.failures.to_string(),
            batch.window_ms.to_string(),
            batch.bucket_ms.to_string(),
            batch.min_calls.to_string(),
            batch.rate.to_string(),
            batch.open_ms.to_string(),
            batch.instance,
            self.channel.clone(),
            name,
            batch.epoch.to_string(),
        ];
        let reply = self.wire.eval(Script::Count, keys, args);
        Box::pin(async move {
            let (tripped, calls, failures): (i64, i64, i64) = typed(reply.await)?;
            Ok(Counted::from_reply(tripped, calls, failures))
        })
    }

    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads> {
        // `TIME`, then each record's fields: plain commands, one round trip, no script (what
        // `record.lua` does in `read` mode, for a batch); the heartbeat (`heartbeat.lua` by its
        // hash, as a plain `EVALSHA`) in the same round trip.
        let mut commands = vec![vec!["TIME".to_owned()]];
        for name in &names {
            let mut hmget = vec!["HMGET".to_owned(), record_key(&self.prefix, name)];
            hmget.extend(READ_FIELDS.iter().map(|f| (*f).to_owned()));
            commands.push(hmget);
        }
        let beating = beat.as_ref().map(|beat| {
            let (keys, args) = self.beat_keys_args(beat);
            let mut command = vec![
                "EVALSHA".to_owned(),
                Script::Heartbeat.sha().to_owned(),
                "1".to_owned(),
            ];
            command.extend(keys.clone());
            command.extend(args.clone());
            commands.push(command);
            (keys, args)
        });
        let expected = names.len() + 1 + usize::from(beating.is_some());
        Box::pin(async move {
            let replies = self
                .wire
                .pipeline(commands)
                .await
                .map_err(|e| StoreError::Failed(e.to_string()))?;
            if replies.len() != expected {
                return Err(StoreError::Failed(
                    "a pipeline's replies do not match its commands".to_owned(),
                ));
            }
            let mut replies = replies.into_iter();
            let (secs, micros) = replies
                .next()
                .expect("as many as asked")
                .and_then(|v| redis::from_redis_value::<(u64, u64)>(v).map_err(Into::into))
                .map_err(|e| StoreError::Failed(e.to_string()))?;
            let now_ms = secs * 1000 + micros / 1000;
            let records = replies
                .by_ref()
                .take(names.len())
                .map(|reply| {
                    let fields: Vec<Option<String>> = typed(reply)?;
                    Record::from_hash(now_ms, &fields).ok_or_else(|| {
                        StoreError::Record(
                            "a record this instance cannot read (another version's?)".to_owned(),
                        )
                    })
                })
                .collect();
            let beat = match (beating, replies.next()) {
                (Some((keys, args)), Some(Err(e))) if e.code() == Some("NOSCRIPT") => {
                    // The server does not hold the script yet (a restart, a `SCRIPT FLUSH`):
                    // beating again on its own loads it.
                    Some(
                        typed(self.wire.eval(Script::Heartbeat, keys, args).await)
                            .and_then(live_of),
                    )
                }
                (Some(_), Some(Ok(value))) => Some(
                    redis::from_redis_value::<Vec<String>>(value)
                        .map_err(|e| StoreError::Record(e.to_string()))
                        .and_then(live_of),
                ),
                (Some(_), Some(Err(e))) => Some(Err(StoreError::Record(e.to_string()))),
                _ => None,
            };
            Ok(Reads { records, beat })
        })
    }

    fn report(&mut self, name: String, report: Report) -> Op<'_, Reported> {
        let key = record_key(&self.prefix, &name);
        let mut keys = vec![key.clone(), format!("{key}:probes"), format!("{key}:opens")];
        let trip = report.trip;
        let mut args = vec![
            trip.seen.to_string(),
            trip.open_ms.to_string(),
            trip.reopens.to_string(),
            trip.reason,
            trip.last_failure,
            trip.instance,
            self.channel.clone(),
            name.clone(),
            report.quorum.arg(),
            report.live.len().to_string(),
        ];
        for (instance, expiry) in report.live {
            args.push(instance);
            args.push(expiry.to_string());
        }
        if let (Some(life), Some((family, key))) = (trip.life, split_key(&name)) {
            keys.push(open_set_key(&self.prefix, family));
            args.push(life.as_millis().to_string());
            args.push(key.to_owned());
        }
        let reply = self.wire.eval(Script::Quorum, keys, args);
        Box::pin(async move { reported_of(typed(reply.await)?) })
    }

    fn beat(&mut self, beat: Beat) -> Op<'_, Live> {
        let (keys, args) = self.beat_keys_args(&beat);
        let reply = self.wire.eval(Script::Heartbeat, keys, args);
        Box::pin(async move { live_of(typed(reply.await)?) })
    }

    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys> {
        let mut commands = Vec::new();
        for family in &families {
            let key = open_set_key(&self.prefix, family);
            commands.push(
                ["ZRANGE", &key, "0", "-1", "WITHSCORES"]
                    .map(str::to_owned)
                    .to_vec(),
            );
        }
        Box::pin(async move {
            let (now, replies) = timed(&mut *self.wire, commands).await?;
            let now_ms = now.map_err(|e| StoreError::Failed(e.to_string()))?;
            let lists = replies
                .into_iter()
                .map(|reply| {
                    reply
                        .and_then(|v| {
                            redis::from_redis_value::<Vec<(String, f64)>>(v).map_err(Into::into)
                        })
                        .ok()
                })
                .collect();
            Ok(OpenKeys { now_ms, lists })
        })
    }

    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>> {
        let mut commands = Vec::new();
        for family in &stale {
            commands.push(vec![
                "ZREMRANGEBYSCORE".to_owned(),
                open_set_key(&self.prefix, family),
                "-inf".to_owned(),
                before_ms.to_string(),
            ]);
        }
        for name in &names {
            let mut hmget = vec!["HMGET".to_owned(), record_key(&self.prefix, name)];
            hmget.extend(READ_FIELDS.iter().map(|f| (*f).to_owned()));
            commands.push(hmget);
        }
        let skip = stale.len();
        Box::pin(async move {
            let (now, replies) = timed(&mut *self.wire, commands).await?;
            let Ok(now_ms) = now else {
                // No time to read the records at: none is taken.
                let why = "no server time".to_owned();
                return Ok(names
                    .iter()
                    .map(|_| Err(StoreError::Record(why.clone())))
                    .collect());
            };
            Ok(replies
                .into_iter()
                .skip(skip)
                .map(|reply| {
                    let fields: Vec<Option<String>> = typed(reply)?;
                    Record::from_hash(now_ms, &fields).ok_or_else(|| {
                        StoreError::Record(
                            "a record this instance cannot read (another version's?)".to_owned(),
                        )
                    })
                })
                .collect())
        })
    }

    fn ping(&mut self) -> Op<'_, ()> {
        let reply = self.wire.ping();
        Box::pin(async move { reply.await.map_err(|e| StoreError::Failed(e.to_string())) })
    }

    fn follow(&mut self) -> Op<'_, ()> {
        let reply = self.wire.subscribe(self.channel.clone());
        Box::pin(async move { reply.await.map_err(|e| StoreError::Failed(e.to_string())) })
    }
}

/// The production store: one connection at a time (RESP3, pushes on it) to one node, to the
/// master a Sentinel names, or to a Cluster (`connect.rs`).
pub(crate) struct RedisWire {
    con: Connector,
    scripts: [redis::Script; 5],
}

impl RedisWire {
    /// A store that connects on first use and again after each loss.
    pub(crate) fn new(con: Connector) -> RedisWire {
        RedisWire {
            con,
            scripts: Script::ALL.map(|s| redis::Script::new(s.source())),
        }
    }
}

/// `op` on the connector's connection; its end told to the connector.
async fn on<T, F>(con: &mut Connector, op: impl FnOnce(Handle) -> F) -> RedisResult<T>
where
    F: Future<Output = RedisResult<T>>,
{
    let result = match con.handle().await {
        Ok(handle) => op(handle).await,
        Err(e) => Err(e),
    };
    con.done(result.as_ref().err());
    result
}

impl Wire for RedisWire {
    fn eval(&mut self, script: Script, keys: Vec<String>, args: Vec<String>) -> Reply<'_, Value> {
        let script = &self.scripts[script as usize];
        let mut invocation = script.prepare_invoke();
        for k in keys {
            invocation.key(k);
        }
        for a in args {
            invocation.arg(a);
        }
        // `EVALSHA`, loading the script again after `NOSCRIPT` (a restart, `SCRIPT FLUSH`).
        Box::pin(on(&mut self.con, move |mut con| async move {
            invocation.invoke_async::<Value>(&mut con).await
        }))
    }

    fn pipeline(&mut self, commands: Vec<Vec<String>>) -> Reply<'_, Vec<RedisResult<Value>>> {
        Box::pin(on(&mut self.con, move |mut con| async move {
            let cmd = |command: &Vec<String>| {
                let (name, args) = command.split_first().expect("a command has a name");
                let mut cmd = redis::cmd(name);
                cmd.arg(args);
                cmd
            };
            #[cfg(feature = "cluster")]
            if con.one_slot_pipelines() {
                // A Cluster pipeline cannot span slots: each command on its own, all at once.
                let replies = commands.iter().map(|command| {
                    let mut con = con.clone();
                    let cmd = cmd(command);
                    async move { cmd.query_async::<Value>(&mut con).await }
                });
                let replies = futures_util::future::join_all(replies).await;
                if let Some(Err(e)) = replies.iter().find(|r| {
                    r.as_ref().is_err_and(|e| {
                        !matches!(
                            e.kind(),
                            redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
                        )
                    })
                }) {
                    return Err(e.clone());
                }
                return Ok(replies);
            }
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for command in &commands {
                pipe.add_command(cmd(command));
            }
            pipe.query_async(&mut con).await
        }))
    }

    fn ping(&mut self) -> Reply<'_, ()> {
        Box::pin(on(&mut self.con, |mut con| async move {
            redis::cmd("PING").query_async::<String>(&mut con).await?;
            Ok(())
        }))
    }

    fn subscribe(&mut self, channel: String) -> Reply<'_, ()> {
        Box::pin(self.con.subscribe(channel))
    }
}

/// Which store a URL names, by its scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// `redis://` and its kin (`rediss://`, Sentinel, Cluster): an unknown scheme too, which
    /// the Redis connector refuses with the schemes it knows.
    Redis,
    /// `postgres://` or `postgresql://`.
    Postgres,
}

impl Backend {
    /// The backend `url` names.
    pub(crate) fn of(url: &str) -> Backend {
        match url.split_once("://").map(|(scheme, _)| scheme) {
            Some("postgres" | "postgresql") => Backend::Postgres,
            _ => Backend::Redis,
        }
    }
}

/// The Redis store `config` names, not connected yet.
pub(crate) fn production_store(
    config: &FleetConfig,
) -> Result<(RedisWire, mpsc::UnboundedReceiver<redis::PushInfo>), FleetError> {
    let (con, pushes) = connector(&config.url, config.tls_ca.as_deref(), config.timeout)?;
    Ok((RedisWire::new(con), pushes))
}

#[cfg(any(test, feature = "conformance"))]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(all(test, feature = "postgres"))]
mod postgres_edge_cases;
#[cfg(feature = "postgres")]
mod postgres_tls;

#[cfg(test)]
mod tests {
    use super::*;
    use redis::RedisError;

    fn error(resp: &str) -> RedisError {
        let v = redis::parse_redis_value(format!("-{resp}\r\n").as_bytes()).unwrap();
        v.extract_error().unwrap_err()
    }

    #[test]
    fn a_scripts_error_about_its_key_is_the_records_problem() {
        assert!(is_record_problem(&error(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: 3f2a, on @user_script:27."
        )));
        assert!(is_record_problem(&error(
            "ERR user_script:38: attempt to perform arithmetic on a nil value script: 3f2a, on @user_script:38."
        )));
    }

    #[test]
    fn a_lease_reply_reads_as_granted_wait_or_gone() {
        assert_eq!(
            Leases::from_reply(2, 5_000),
            Leases::Granted {
                count: 2,
                life: Duration::from_secs(5)
            }
        );
        assert_eq!(
            Leases::from_reply(0, 1_200),
            Leases::Wait(Duration::from_millis(1_200))
        );
        assert_eq!(Leases::from_reply(0, 0), Leases::Wait(Duration::ZERO));
        assert_eq!(Leases::from_reply(0, -1), Leases::Gone);
        assert_eq!(
            Leases::from_reply(i64::MAX, 10),
            Leases::Granted {
                count: u32::MAX,
                life: Duration::from_millis(10)
            }
        );
    }

    #[test]
    fn a_count_reply_reads_as_the_window_and_whether_it_tripped() {
        assert_eq!(Counted::from_reply(1, 12, 12), Counted::new(true, 12, 12));
        assert_eq!(Counted::from_reply(0, 8, 4), Counted::new(false, 8, 4));
        assert_eq!(Counted::from_reply(0, 0, 0), Counted::new(false, 0, 0));
    }

    #[test]
    fn refusals_and_failures_are_the_stores() {
        assert!(!is_record_problem(&error(
            "NOPERM User fleet has no permissions to run the 'evalsha' command"
        )));
        assert!(!is_record_problem(&error("ERR unknown command 'EVALSHA'")));
        assert!(!is_record_problem(&error(
            "LOADING Redis is loading the dataset in memory"
        )));
        assert!(!is_record_problem(&error(
            "READONLY You can't write against a read only replica."
        )));
        assert!(!is_record_problem(&RedisError::from((
            redis::ErrorKind::Io,
            "connection reset"
        ))));
    }
}
