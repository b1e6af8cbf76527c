//! [`RedisJournal`]: one journal in Redis for a fleet, each entry replayed by one instance
//! (feature `redis`).

use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use breakerbox_fleet::{FleetConfig, StoreLink};
use redis::{Script, Value};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::{ReplayConfig, WhenFull};
use crate::journal::{
    EntryInfo, Journal, JournalCounts, JournalStatus, NotJournaled, Pushed, Settled, StoreError,
    Take, Taken,
};
use crate::stats::Sink;

/// The script of every operation (`redis.lua`).
static SCRIPT: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(include_str!("redis.lua")));

/// At most this many entries are listed by [`Journal::entries`] and
/// [`Journal::dead_letters`].
const LIST_LIMIT: usize = 10_000;

/// Where a [`RedisJournal`] lives and how it waits: the URL, the key prefix, the timeout of
/// each call to Redis, and when an instance's held entries are taken over.
///
/// ```
/// use breakerbox_replay::RedisOptions;
/// use std::time::Duration;
///
/// let options = RedisOptions::new("redis://127.0.0.1:6379/")
///     .claim_after(Duration::from_secs(60))
///     .timeout(Duration::from_millis(200));
/// assert_eq!(options.get_claim_after(), Duration::from_secs(60));
/// ```
#[derive(Clone, Debug)]
pub struct RedisOptions {
    url: String,
    tls_ca: Option<PathBuf>,
    prefix: String,
    timeout: Duration,
    claim_after: Duration,
    poll: Duration,
    consumer: Option<String>,
}

impl RedisOptions {
    /// Redis at `url`, any URL fleet mode takes: `redis://[user:password@]host:port[/db]`
    /// (or `redis+unix://` or `unix://`, a socket path), `rediss://` (TLS: breakerbox's
    /// feature `redis-tls`), `redis+sentinel://host:port[,…]/<master name>` (`redis-sentinel`)
    /// or `redis+cluster://host:port[,…]` (`redis-cluster`), each with `user:password@` for
    /// an ACL user. The defaults: prefix `breakerbox:replay:`, a timeout of 500 ms, claim
    /// after 30 s, poll every second.
    pub fn new(url: impl Into<String>) -> Self {
        RedisOptions {
            url: url.into(),
            tls_ca: None,
            prefix: "breakerbox:replay:".to_owned(),
            timeout: Duration::from_millis(500),
            claim_after: Duration::from_secs(30),
            poll: Duration::from_secs(1),
            consumer: None,
        }
    }

    /// The Redis of `fleet` (its URL and [`tls_ca`](FleetConfig::tls_ca)), with the prefix
    /// `<the fleet's prefix>:replay:` (`breakerbox:replay:` by default); the journal's own
    /// timeout, `claim_after` and poll keep their defaults.
    pub fn for_fleet(fleet: &FleetConfig) -> Self {
        let mut options =
            RedisOptions::new(fleet.get_url()).prefix(format!("{}:replay:", fleet.get_prefix()));
        options.tls_ca = fleet.get_tls_ca().map(PathBuf::from);
        options
    }

    /// [`for_fleet`](RedisOptions::for_fleet) of the fleet running in this process
    /// ([`Fleet::running`](breakerbox_fleet::Fleet::running)), if one runs.
    pub fn running_fleet() -> Option<Self> {
        breakerbox_fleet::Fleet::running().map(|fleet| RedisOptions::for_fleet(&fleet))
    }

    /// Trusts the certificate authority in the PEM file at `path` for TLS (`rediss://`)
    /// instead of the system's roots, as [`FleetConfig::tls_ca`] does.
    pub fn tls_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls_ca = Some(path.into());
        self
    }

    /// The keys' prefix: a journal's keys are `<prefix>{<breaker name>}:…` (one hash slot).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest a call waits on Redis, a connect included: a call (a push, a status, any
    /// operation) returns within this time, and fails if Redis has not answered by then; once
    /// Redis did not answer, the journal refuses calls without trying Redis until a `PING`,
    /// sent once every timeout, is answered. A push runs on Redis only within half of it
    /// (Redis's clock), so that a push Redis runs later journals nothing, and its answer has
    /// the other half to come back.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// An entry an instance took for a replay and did not settle within this time (on the
    /// journal's clock) goes back to the queue, for any instance to take (`replay_claim_after`):
    /// so an instance that dies mid-replay leaves its entry to the others. Longer than the
    /// longest replay, or a slow replay is run twice.
    pub fn claim_after(mut self, after: Duration) -> Self {
        self.claim_after = after.max(Duration::from_millis(1));
        self
    }

    /// How long the replayer waits before it looks again when the journal has nothing due for
    /// it: entries other instances journal and entries of dead instances are found this way.
    pub fn poll(mut self, every: Duration) -> Self {
        self.poll = every.max(Duration::from_millis(1));
        self
    }

    /// This instance's consumer name in the stream's group (default: `$HOSTNAME`, the process
    /// id and a number unique in the process). Two live journals must never share one.
    pub fn consumer(mut self, name: impl Into<String>) -> Self {
        self.consumer = Some(name.into());
        self
    }

    /// When held entries are taken over.
    pub fn get_claim_after(&self) -> Duration {
        self.claim_after
    }

    /// The keys' prefix.
    pub fn get_prefix(&self) -> &str {
        &self.prefix
    }
}

/// Why a [`RedisJournal`] could not open.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisJournalError {
    /// The URL is not one fleet mode takes, or needs a feature this build lacks (TLS, Sentinel,
    /// Cluster), or the TLS CA file cannot be read: the URL (its password shown as `***`) and
    /// why.
    #[error("the replay journal's Redis URL is not usable: {0}")]
    Url(String),
    /// Redis did not answer, or answered with an error (a key of another kind under the
    /// journal's keys, a wrong password).
    #[error("{0}")]
    Store(String),
}

/// One journal in Redis, shared by every instance of a fleet: a call rejected on any instance
/// is journaled there, and each entry is replayed by one instance.
///
/// - **Layout.** Entries are a Redis stream (`<prefix>{<name>}:stream`, fields `t`, `b`,
///   `a`, `k`) read through a consumer group: each instance is a consumer, and an entry
///   pending on it is held by its replay. Dead letters are a second stream (`…:dead`);
///   keys, failed attempts, held entries and the fleet's counts are a hash, a hash, a sorted
///   set and a hash beside them. Every operation is one Lua script, atomic on the server.
/// - **Exactly once.** An entry is held by one instance at a time, and removed when its
///   replay succeeds: each entry is replayed once, unless an instance holds it longer than
///   `claim_after` (it died, or its replay is slower than that): then it goes back to the
///   queue and another instance replays it (at least once).
/// - **Bounds, TTL, keys** as the other journals, for the whole fleet: `max_entries` and
///   `max_bytes` bound the stream, a key queued by any instance deduplicates a call on any
///   other. The stream is bounded by the script (it counts what it drops), not by `XADD`'s
///   `MAXLEN` (which would drop entries uncounted, held ones too).
/// - **Times** are on each instance's journal clock ([`WallClock`](crate::WallClock) by
///   default): the instances' clocks must agree to well within `ttl` and `claim_after`.
/// - **Failures.** Each call to Redis is bounded by [`RedisOptions::timeout`]; a call that
///   fails is refused with [`NotJournaled::Store`] and its reason, counted as `refused` (in
///   this instance's counts: the fleet's are in Redis). Once Redis does not answer (a
///   timeout, a connection refused or dropped), every call fails at once with that reason,
///   without trying Redis, until the journal's thread gets an answer again (it asks once
///   every timeout): a hung Redis costs the calls made as it stops answering one wait each,
///   and no more. A key of another kind under the journal's keys is an error of this
///   journal only. A settle that fails leaves the entry held: it goes back to the queue
///   after `claim_after`.
/// - **A push Redis runs too late is refused by Redis.** Each push carries the last moment
///   Redis may run it, half a timeout after the call, on Redis's clock (the offset measured
///   on the connection): a push Redis runs after it (it was stopped, or the command waited in
///   a socket) journals nothing.
/// - **In doubt, and said so.** A push sent to Redis that gets no answer within the timeout
///   (none came, or the connection dropped) is refused with a reason that says "the call may
///   have been journaled all the same": Redis ran it if it got it in time and its answer was
///   lost or late, and then the entry is queued and replayed. Every other refusal journaled
///   nothing (full, too large, not encodable, run too late, an error Redis answered, a
///   connect that failed, a call refused at once while Redis is known not to answer).
/// - [`JournalStatus`] and [`JournalCounts`] are the fleet's (read from Redis), plus this
///   instance's calls refused because Redis failed; metrics count this instance's events.
/// - **Connections** are the fleet's (`breakerbox-fleet`'s `StoreLink`): the URLs fleet mode
///   takes, with TLS, Sentinel and Cluster where breakerbox's `redis-tls`, `redis-sentinel`
///   and `redis-cluster` features are on. A thread of the journal's own holds the connection
///   and sends the calls of every thread on it.
/// - Its calls block the calling thread for at most the timeout (a connect and the operation
///   together), and not at all while Redis is known not to answer. [`Replay`](crate::Replay)
///   runs them off the runtime's threads where it can: its replayer, and
///   [`Replay::call_async`](crate::Replay::call_async), and the `_async` operations of a
///   [`ReplayHandle`](crate::ReplayHandle), which the admin router uses.
pub struct RedisJournal<A> {
    name: String,
    keys: [String; 6],
    consumer: String,
    options: RedisOptions,
    config: ReplayConfig,
    link: Link,
    /// Why Redis is not answering, from the call that found it so until the journal's thread
    /// gets an answer again: every call is refused at once meanwhile.
    down: Down,
    last_error: Mutex<Option<String>>,
    /// The status as last read, for when Redis does not answer.
    last_status: Mutex<JournalStatus>,
    /// Calls refused because Redis failed: not in the fleet's counts.
    refused: AtomicU64,
    /// The highest entry id this instance has seen: new ids are given above it, so that the
    /// end of a replay this instance holds never settles a newer entry of the same id (the
    /// journal's stream and counts lost in Redis meanwhile).
    seen: AtomicU64,
    sink: Sink,
    _args: PhantomData<fn(A) -> A>,
}

impl<A> fmt::Debug for RedisJournal<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisJournal")
            .field("name", &self.name)
            .field("stream", &self.keys[0])
            .field("consumer", &self.consumer)
            .finish_non_exhaustive()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A default consumer name, unique in the process.
fn consumer_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "host".to_owned());
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    format!(
        "{host}-{}-{started:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A script's reply, read leniently: Lua numbers come back as integers, strings as bulk.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        Value::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

fn number(value: Option<&Value>) -> u64 {
    value
        .and_then(text)
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0)
}

fn bytes(value: Option<&Value>) -> Vec<u8> {
    match value {
        Some(Value::BulkString(bytes)) => bytes.clone(),
        Some(other) => text(other).unwrap_or_default().into_bytes(),
        None => Vec::new(),
    }
}

fn array(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => vec![other],
    }
}

/// The counts after a script's result (its last eight values).
fn delta(items: &[Value]) -> JournalCounts {
    let at = |i: usize| number(items.len().checked_sub(8 - i).and_then(|j| items.get(j)));
    JournalCounts {
        queued: at(0),
        deduplicated: at(1),
        replayed: at(2),
        failed: at(3),
        dead_lettered: at(4),
        expired: at(5),
        dropped: at(6),
        refused: at(7),
    }
}

/// An entry as `entries` and `dead` list it: seven values each.
fn infos(items: &[Value]) -> Vec<EntryInfo> {
    items
        .chunks_exact(7)
        .map(|e| EntryInfo {
            id: number(e.first()),
            enqueued: Duration::from_nanos(number(e.get(1))),
            attempts: u32::try_from(number(e.get(2))).unwrap_or(u32::MAX),
            next_try: Duration::from_nanos(number(e.get(3))),
            bytes: usize::try_from(number(e.get(4))).unwrap_or(usize::MAX),
            key: (text(&e[5]).as_deref() == Some("1")).then(|| text(&e[6]).unwrap_or_default()),
        })
        .collect()
}

/// What an entry weighs against `max_bytes`: its encoded arguments and key, and 32 bytes of
/// fields.
fn weight(key: Option<&str>, args: &[u8]) -> usize {
    args.len() + key.map_or(0, str::len) + 32
}

impl<A: Serialize + DeserializeOwned + Send + 'static> RedisJournal<A> {
    /// Opens breaker `name`'s journal in Redis: connects (within the timeout), and makes the
    /// stream and its consumer group if they are missing. An error if Redis does not answer,
    /// or if a key of another kind is under the journal's stream key.
    pub fn open(
        name: &str,
        options: RedisOptions,
        config: &ReplayConfig,
    ) -> Result<RedisJournal<A>, RedisJournalError> {
        // The client's own bound on an answer is the timeout, as each call's (`Serve` bounds a
        // call, its connect included, by the moment its caller gives up).
        let store = StoreLink::new(&options.url, options.tls_ca.as_deref(), options.timeout)
            .map_err(|e| match e {
                breakerbox_fleet::FleetError::Url { url, reason } => {
                    RedisJournalError::Url(format!("`{url}`: {reason}"))
                }
                other => RedisJournalError::Url(other.to_string()),
            })?;
        let base = format!("{}{{{name}}}:", options.prefix);
        let keys =
            ["stream", "dead", "keys", "tries", "held", "counts"].map(|k| format!("{base}{k}"));
        let down = Down::default();
        let link =
            Link::start(store, keys.clone(), options.timeout, down.clone()).map_err(|e| {
                RedisJournalError::Store(format!(
                    "the replay journal `{name}` could not start its Redis thread: {e}"
                ))
            })?;
        let journal = RedisJournal {
            name: name.to_owned(),
            keys,
            consumer: options.consumer.clone().unwrap_or_else(consumer_name),
            options,
            config: config.clone(),
            link,
            down,
            last_error: Mutex::new(None),
            last_status: Mutex::new(empty_status()),
            refused: AtomicU64::new(0),
            seen: AtomicU64::new(0),
            sink: Sink::new(name),
            _args: PhantomData,
        };
        let status = journal.run(&["status"]).map_err(RedisJournalError::Store)?;
        *lock(&journal.last_status) = journal.read_status(status);
        Ok(journal)
    }

    /// This instance's consumer name in the stream's group.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The stream's key.
    pub fn stream_key(&self) -> &str {
        &self.keys[0]
    }

    /// The last failure of a call to Redis, until a call succeeds.
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }

    /// Runs one operation of the script, bounded by the timeout; at once an error while Redis
    /// is known not to answer.
    fn run<T: redis::ToRedisArgs>(&self, args: &[T]) -> Result<Value, String> {
        self.run_until(args, false)
    }

    /// [`run`](RedisJournal::run), for a push if `push`: Redis runs it only within the
    /// timeout (on its own clock), and answers `late` after.
    fn run_until<T: redis::ToRedisArgs>(&self, args: &[T], push: bool) -> Result<Value, String> {
        if let Some(why) = lock(&self.down).as_ref() {
            return Err(why.clone());
        }
        let args: Vec<Vec<u8>> = args.iter().flat_map(|a| a.to_redis_args()).collect();
        match self.link.call(args, push) {
            Ok(value) => {
                *lock(&self.last_error) = None;
                Ok(value)
            }
            Err(e) => {
                let why = self.describe(&e);
                // The store's failure, as `store_error` and the calls refused while Redis is
                // known not to answer (never sent: not in doubt) give it.
                let cause = match &e {
                    Failure::InDoubt(cause) => self.describe(cause),
                    _ => why.clone(),
                };
                // An error Redis answered with (a key of another kind: this journal's data) is
                // not the store down.
                if !matches!(e, Failure::Error(_)) {
                    *lock(&self.down) = Some(cause.clone());
                    self.link.probe();
                }
                *lock(&self.last_error) = Some(cause);
                tracing::warn!(target: "breakerbox", journal = %self.name, error = %why, "a replay journal's call to Redis failed");
                Err(why)
            }
        }
    }

    fn describe(&self, failure: &Failure) -> String {
        match failure {
            Failure::Error(message) if message.contains("WRONGTYPE") => format!(
                "the replay journal `{}` cannot use its keys in Redis: a key under `{}` holds a value of another kind (WRONGTYPE); remove it, or give the journal another prefix",
                self.name, self.keys[0]
            ),
            Failure::Error(message) | Failure::Unreachable(message) => format!(
                "the replay journal `{}`'s Redis failed: {message}",
                self.name
            ),
            Failure::Timeout => format!(
                "the replay journal `{}`'s Redis did not answer within {:?}",
                self.name, self.options.timeout
            ),
            Failure::Gone => format!(
                "the replay journal `{}`'s Redis thread has stopped",
                self.name
            ),
            Failure::InDoubt(failure) => format!(
                "{}; {IN_DOUBT} (Redis ran it if it got it within {:?} of the call, and its answer was lost)",
                self.describe(failure),
                self.options.timeout / 2
            ),
        }
    }

    /// Notes entry id `id` as seen (see `seen`).
    fn saw(&self, id: u64) -> u64 {
        self.seen.fetch_max(id, Ordering::Relaxed);
        id
    }

    fn report(&self, items: &[Value]) {
        self.sink.count(&delta(items));
    }

    /// Counts a call refused before the script ran (not in the fleet's counts).
    fn count_refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        self.sink.count(&JournalCounts {
            refused: 1,
            ..JournalCounts::default()
        });
    }

    fn store_refused(&self, why: String) -> NotJournaled {
        self.count_refused();
        NotJournaled::Store(why)
    }

    fn read_status(&self, value: Value) -> JournalStatus {
        let items = array(value);
        let oldest = items.get(2).and_then(text).filter(|s| !s.is_empty());
        let c = |i: usize| number(items.get(4 + i));
        JournalStatus {
            entries: usize::try_from(number(items.first())).unwrap_or(usize::MAX),
            bytes: usize::try_from(number(items.get(1))).unwrap_or(usize::MAX),
            oldest: oldest
                .and_then(|s| s.parse().ok())
                .map(Duration::from_nanos),
            dead_letters: usize::try_from(number(items.get(3))).unwrap_or(usize::MAX),
            counts: JournalCounts {
                queued: c(0),
                deduplicated: c(1),
                replayed: c(2),
                failed: c(3),
                dead_lettered: c(4),
                expired: c(5),
                dropped: c(6),
                refused: c(7),
            },
        }
    }
}

fn empty_status() -> JournalStatus {
    JournalStatus {
        entries: 0,
        bytes: 0,
        oldest: None,
        dead_letters: 0,
        counts: JournalCounts::default(),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why Redis does not answer, while it does not (see [`RedisJournal`]'s `down`).
type Down = Arc<Mutex<Option<String>>>;

/// Why a call to Redis failed.
enum Failure {
    /// Redis answered with an error: what it said.
    Error(String),
    /// The connection could not be made, or failed: what the client said.
    Unreachable(String),
    /// No answer within the timeout.
    Timeout,
    /// The journal's thread is gone (its runtime could not be built).
    Gone,
    /// A push sent to Redis got no answer (this failure): Redis may have run it.
    InDoubt(Box<Failure>),
}

/// What the reason of a push refused in doubt says: the push was sent, and no answer came.
/// Every other refusal journaled nothing.
pub(crate) const IN_DOUBT: &str = "the call may have been journaled all the same";

/// How a push's deadline is told to Redis: how long a server-clock reading stays the base
/// of the offset (the two clocks drift apart slowly; a server's clock may be stepped).
const CLOCK_FRESH: Duration = Duration::from_secs(10);

/// What the journal's thread is asked to do.
enum Message {
    /// Run one operation.
    Run(Request),
    /// A call found Redis not answering: ask it, once every timeout, until it answers.
    Probe,
}

/// One operation for the journal's thread: the script's arguments, and where its answer goes.
struct Request {
    args: Vec<Vec<u8>>,
    /// For a push: the last moment Redis may run it, sent on Redis's own clock (the script's
    /// last argument), which refuses to run the push after it. Half the timeout before the
    /// caller gives up, so that an answer has that long to come back.
    until: Option<Instant>,
    /// When the caller stops waiting: the thread answers by then.
    give_up: Instant,
    /// Set once the script is sent to Redis: from then on, Redis may run it.
    sent: Arc<AtomicBool>,
    answer: std::sync::mpsc::SyncSender<Result<Value, Failure>>,
}

/// The journal's way to Redis: a thread of its own runs a tokio runtime with the fleet's
/// connection ([`StoreLink`]: its URLs, TLS, Sentinel, Cluster), so that the journal's
/// synchronous calls work from any thread, in a runtime or not. Calls are sent on one
/// multiplexed connection, concurrently; each caller waits for its answer at most the timeout.
/// The thread ends when the journal is dropped.
struct Link {
    requests: tokio::sync::mpsc::UnboundedSender<Message>,
    timeout: Duration,
}

impl Link {
    fn start(
        store: StoreLink,
        keys: [String; 6],
        timeout: Duration,
        down: Down,
    ) -> std::io::Result<Link> {
        let (requests, incoming) = tokio::sync::mpsc::unbounded_channel();
        // Built and dropped on its thread (a runtime must not be dropped in async code). If it
        // cannot be built, the thread ends, and every call is `Failure::Gone`.
        std::thread::Builder::new()
            .name("breakerbox-replay-redis".to_owned())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => {
                        let serve = Serve {
                            keys: Arc::new(keys),
                            timeout,
                            down,
                            clock: Arc::default(),
                        };
                        runtime.block_on(serve.run(store, incoming));
                    }
                    Err(e) => {
                        tracing::error!(target: "breakerbox", error = %e, "a replay journal's Redis thread could not start its runtime");
                    }
                }
            })?;
        Ok(Link { requests, timeout })
    }

    /// Runs the script with `args`, waiting at most the timeout; a push (`push`) runs on
    /// Redis only within half of it, so that its answer has the other half to come back. A
    /// push sent to Redis that gets no answer (a timeout, a dropped connection) is
    /// [`Failure::InDoubt`]: Redis may have run it.
    fn call(&self, args: Vec<Vec<u8>>, push: bool) -> Result<Value, Failure> {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        let now = Instant::now();
        let give_up = now + self.timeout;
        let sent = Arc::new(AtomicBool::new(false));
        let request = Request {
            args,
            until: push.then(|| now + self.timeout / 2),
            give_up,
            sent: sent.clone(),
            answer,
        };
        if self.requests.send(Message::Run(request)).is_err() {
            return Err(Failure::Gone);
        }
        // The thread gives up by then too; whichever is first, the caller has its answer.
        let result = match answered.recv_timeout(give_up.saturating_duration_since(Instant::now()))
        {
            Ok(result) => result,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(Failure::Timeout),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(Failure::Gone),
        };
        match result {
            Err(failure @ (Failure::Timeout | Failure::Unreachable(_)))
                if push && sent.load(Ordering::SeqCst) =>
            {
                Err(Failure::InDoubt(Box::new(failure)))
            }
            other => other,
        }
    }

    /// Asks the thread to probe Redis until it answers.
    fn probe(&self) {
        let _ = self.requests.send(Message::Probe);
    }
}

/// Whether a client error means Redis is not reachable (rather than an answer of its own).
fn unreachable(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
}

fn failure(e: &redis::RedisError) -> Failure {
    if unreachable(e) {
        Failure::Unreachable(e.to_string())
    } else {
        Failure::Error(e.to_string())
    }
}

/// The journal's thread.
struct Serve {
    keys: Arc<[String; 6]>,
    timeout: Duration,
    down: Down,
    /// A reading of the server's clock (µs since the epoch) and when it was received: the
    /// server's time at an instant is at least the reading plus the time since.
    clock: Arc<Mutex<Option<(Instant, u64)>>>,
}

/// Reads the server's clock on the journal's node (a script on the stream's key, so that a
/// Cluster asks the node that holds it): µs since the epoch, and the instant it came back.
async fn server_clock(
    con: &mut breakerbox_fleet::StoreConnection,
    stream: &str,
) -> redis::RedisResult<(Instant, u64)> {
    static TIME: std::sync::LazyLock<Script> =
        std::sync::LazyLock::new(|| Script::new("return redis.call('TIME')"));
    let (secs, micros): (u64, u64) = TIME.key(stream).invoke_async(con).await?;
    Ok((Instant::now(), secs * 1_000_000 + micros))
}

impl Serve {
    /// Connects (at most the timeout each time) and runs each request on the connection as a
    /// task of its own (at most the timeout each), telling the link of the store's failures
    /// (a Sentinel link then asks for the master again). While Redis is down, it is asked
    /// once every timeout until it answers.
    async fn run(
        self,
        mut store: StoreLink,
        mut incoming: tokio::sync::mpsc::UnboundedReceiver<Message>,
    ) {
        let (failed, mut failures) = tokio::sync::mpsc::unbounded_channel::<redis::RedisError>();
        loop {
            let probing = lock(&self.down).is_some();
            let request = tokio::select! {
                biased;
                Some(error) = failures.recv() => {
                    store.failed(&error);
                    continue;
                }
                message = incoming.recv() => match message {
                    Some(Message::Run(request)) => request,
                    Some(Message::Probe) => continue,
                    None => return,
                },
                () = tokio::time::sleep(self.timeout), if probing => {
                    self.probe(&mut store).await;
                    continue;
                }
            };
            if request.until.is_some_and(|until| Instant::now() >= until) {
                let _ = request.answer.send(Err(Failure::Timeout));
                continue;
            }
            // The connect counts in the caller's wait.
            let give_up = tokio::time::Instant::from_std(request.give_up);
            let connect = tokio::time::timeout_at(give_up, store.connection());
            let con = match connect.await {
                Ok(Ok(con)) => con,
                Ok(Err(e)) => {
                    let _ = request.answer.send(Err(failure(&e)));
                    continue;
                }
                Err(_) => {
                    let _ = request.answer.send(Err(Failure::Timeout));
                    continue;
                }
            };
            tokio::spawn(self.send(con, request, failed.clone()));
        }
    }

    /// Asks Redis whether it answers; clears `down` if it does.
    async fn probe(&self, store: &mut StoreLink) {
        let asked = tokio::time::timeout(self.timeout, async {
            let mut con = store.connection().await?;
            redis::cmd("PING").query_async::<Value>(&mut con).await
        });
        match asked.await {
            Ok(Ok(_)) => *lock(&self.down) = None,
            Ok(Err(e)) => store.failed(&e),
            Err(_) => {}
        }
    }

    /// Runs one request on `con`, until its caller gives up.
    fn send(
        &self,
        mut con: breakerbox_fleet::StoreConnection,
        request: Request,
        failed: tokio::sync::mpsc::UnboundedSender<redis::RedisError>,
    ) -> impl Future<Output = ()> + Send + use<> {
        let keys = self.keys.clone();
        let clock = self.clock.clone();
        async move {
            let run = async {
                let mut invocation = SCRIPT.prepare_invoke();
                for key in keys.iter() {
                    invocation.key(key);
                }
                for arg in &request.args {
                    invocation.arg(arg);
                }
                if let Some(until) = request.until {
                    let fresh = *lock(&clock);
                    let (at, micros) = match fresh.filter(|(at, _)| at.elapsed() < CLOCK_FRESH) {
                        Some(reading) => reading,
                        None => {
                            let reading = server_clock(&mut con, &keys[0]).await?;
                            *lock(&clock) = Some(reading);
                            reading
                        }
                    };
                    let left = until.saturating_duration_since(at);
                    let deadline =
                        micros.saturating_add(u64::try_from(left.as_micros()).unwrap_or(u64::MAX));
                    invocation.arg(deadline);
                }
                // `EVALSHA`, loading the script again after `NOSCRIPT` (a restart, `SCRIPT
                // FLUSH`).
                request.sent.store(true, Ordering::SeqCst);
                invocation.invoke_async::<Value>(&mut con).await
            };
            let give_up = tokio::time::Instant::from_std(request.give_up);
            let answer = match tokio::time::timeout_at(give_up, run).await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(e)) => {
                    let answer = failure(&e);
                    let _ = failed.send(e);
                    Err(answer)
                }
                Err(_) => Err(Failure::Timeout),
            };
            let _ = request.answer.send(answer);
        }
    }
}

impl<A: Serialize + DeserializeOwned + Send + 'static> Journal<A> for RedisJournal<A> {
    fn push(&self, key: Option<String>, args: A, now: Duration) -> Result<Pushed, NotJournaled> {
        // The arguments' `Serialize` and `Drop` are user code: no lock of ours is held.
        let encoded = match catch_unwind(AssertUnwindSafe(|| postcard::to_allocvec(&args))) {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => {
                self.count_refused();
                return Err(NotJournaled::Encode(e.to_string()));
            }
            Err(panic) => {
                core::mem::forget(panic);
                self.count_refused();
                return Err(NotJournaled::Panicked);
            }
        };
        crate::memory::drop_outside(vec![args]);
        let weight = weight(key.as_deref(), &encoded);
        let drop_oldest = self.config.when_full == WhenFull::DropOldest;
        let floor = self.seen.load(Ordering::Relaxed);
        let args: [Vec<u8>; 11] = [
            b"push".to_vec(),
            nanos(now).to_string().into_bytes(),
            nanos(self.config.ttl).to_string().into_bytes(),
            if key.is_some() { b"1" } else { b"0" }.to_vec(),
            key.as_deref().unwrap_or("").as_bytes().to_vec(),
            encoded,
            weight.to_string().into_bytes(),
            self.config.max_entries.to_string().into_bytes(),
            self.config.max_bytes.to_string().into_bytes(),
            if drop_oldest { b"1" } else { b"0" }.to_vec(),
            floor.to_string().into_bytes(),
        ];
        // Redis runs the push only within half the timeout: its caller waits for the answer
        // the other half.
        let items = match self.run_until(&args, true) {
            Ok(value) => array(value),
            Err(why) => return Err(self.store_refused(why)),
        };
        self.report(&items);
        match items.first().and_then(text).as_deref() {
            Some("new") => Ok(Pushed::New(self.saw(number(items.get(1))))),
            Some("late") => Err(self.store_refused(format!(
                "the replay journal `{}`'s Redis ran the call's journaling after its caller had stopped waiting (it did not answer within {:?}); nothing was journaled",
                self.name, self.options.timeout
            ))),
            Some("duplicate") => Ok(Pushed::Duplicate(self.saw(number(items.get(1))))),
            Some("full") => Err(NotJournaled::Full),
            Some("too_large") => Err(NotJournaled::TooLarge),
            other => Err(self.store_refused(format!(
                "the replay journal `{}`'s script answered {other:?}",
                self.name
            ))),
        }
    }

    fn take(&self, now: Duration) -> Take<A> {
        let poll = now.saturating_add(self.options.poll);
        loop {
            let items = match self.run(&[
                "take".to_owned(),
                nanos(now).to_string(),
                nanos(self.config.ttl).to_string(),
                self.consumer.clone(),
                millis(now).to_string(),
                millis(self.options.claim_after).to_string(),
            ]) {
                Ok(value) => array(value),
                Err(_) => return Take::Wait(poll),
            };
            self.report(&items);
            match items.first().and_then(text).as_deref() {
                Some("due") => {}
                Some("wait") => {
                    let at = Duration::from_nanos(number(items.get(1)));
                    return Take::Wait(at.min(poll));
                }
                _ => return Take::Wait(poll),
            }
            let id = self.saw(number(items.get(1)));
            let attempts = u32::try_from(number(items.get(2))).unwrap_or(u32::MAX);
            let encoded = bytes(items.get(3));
            let key = (items.get(4).and_then(text).as_deref() == Some("1"))
                .then(|| items.get(5).and_then(text).unwrap_or_default());
            // `Deserialize` is user code: no lock of ours is held.
            match catch_unwind(AssertUnwindSafe(|| postcard::from_bytes::<A>(&encoded))) {
                Ok(Ok(args)) => {
                    return Take::Due(Taken {
                        id,
                        key,
                        attempts,
                        args,
                    });
                }
                Ok(Err(e)) => {
                    tracing::error!(target: "breakerbox", journal = %self.name, id, error = %e, "a replay journal entry's arguments do not decode; counted as a failed replay");
                }
                Err(panic) => {
                    core::mem::forget(panic);
                    tracing::error!(target: "breakerbox", journal = %self.name, id, "a replay journal entry's arguments panicked while decoding; counted as a failed replay");
                }
            }
            self.settle(id, Settled::Failed, now);
        }
    }

    fn settle(&self, id: u64, how: Settled, now: Duration) {
        let how_name = match how {
            Settled::Replayed => "replayed",
            Settled::Failed => "failed",
            Settled::NotRun => "notrun",
        };
        let result = self.run(&[
            "settle".to_owned(),
            self.consumer.clone(),
            id.to_string(),
            how_name.to_owned(),
            nanos(now).to_string(),
            self.config.attempts.to_string(),
            nanos(self.config.backoff).to_string(),
            nanos(self.config.max_backoff).to_string(),
            self.config.max_entries.to_string(),
        ]);
        match result {
            Ok(value) => {
                let items = array(value);
                self.report(&items);
                if items.first().and_then(text).as_deref() == Some("lost") {
                    tracing::warn!(target: "breakerbox", journal = %self.name, id, outcome = how_name, "a replay journal entry was no longer held by this instance when its replay ended (held longer than claim_after, or dropped)");
                }
            }
            Err(why) => {
                tracing::warn!(target: "breakerbox", journal = %self.name, id, error = %why, "a replay's end was not written; the entry goes back to the queue after claim_after");
            }
        }
    }

    /// The status read from Redis, or the last one read if it does not answer.
    fn status(&self) -> JournalStatus {
        self.try_status().unwrap_or_else(|_| {
            let mut status = lock(&self.last_status).clone();
            status.counts.refused += self.refused.load(Ordering::Relaxed);
            status
        })
    }

    fn try_status(&self) -> Result<JournalStatus, StoreError> {
        let value = self.run(&["status"]).map_err(StoreError)?;
        let mut status = self.read_status(value);
        *lock(&self.last_status) = status.clone();
        status.counts.refused += self.refused.load(Ordering::Relaxed);
        Ok(status)
    }

    /// The entries, or none if Redis does not answer.
    fn entries(&self) -> Vec<EntryInfo> {
        match self.run(&["entries".to_owned(), LIST_LIMIT.to_string()]) {
            Ok(value) => infos(&array(value)),
            Err(_) => Vec::new(),
        }
    }

    /// The dead letters, or none if Redis does not answer.
    fn dead_letters(&self) -> Vec<EntryInfo> {
        self.try_dead_letters().unwrap_or_default()
    }

    fn try_dead_letters(&self) -> Result<Vec<EntryInfo>, StoreError> {
        let value = self
            .run(&["dead".to_owned(), LIST_LIMIT.to_string()])
            .map_err(StoreError)?;
        Ok(infos(&array(value)))
    }

    /// How many went back; 0 if Redis does not answer.
    fn retry_dead_letters(&self, now: Duration) -> usize {
        self.try_retry_dead_letters(now).unwrap_or(0)
    }

    fn try_retry_dead_letters(&self, now: Duration) -> Result<usize, StoreError> {
        let value = self
            .run(&[
                "revive".to_owned(),
                nanos(now).to_string(),
                self.config.max_entries.to_string(),
                self.config.max_bytes.to_string(),
                self.seen.load(Ordering::Relaxed).to_string(),
            ])
            .map_err(StoreError)?;
        let items = array(value);
        self.report(&items);
        Ok(usize::try_from(number(items.get(1))).unwrap_or(0))
    }

    /// How many were dropped; 0 if Redis does not answer.
    fn drop_dead_letters(&self) -> usize {
        self.try_drop_dead_letters().unwrap_or(0)
    }

    fn try_drop_dead_letters(&self) -> Result<usize, StoreError> {
        let value = self.run(&["forget"]).map_err(StoreError)?;
        let items = array(value);
        self.report(&items);
        Ok(usize::try_from(number(items.get(1))).unwrap_or(0))
    }

    fn store_error(&self) -> Option<String> {
        self.last_error()
    }
}
