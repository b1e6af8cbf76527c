//! The fleet task's door to the store: [`FleetStore`], the operations of the fleet's protocol,
//! and [`Redis`], their implementation over Redis's wire.
//!
//! The wire ([`Wire`]: the five scripts, plain pipelines, `PING` and the subscription) is
//! Redis's: `RedisWire` (a `ConnectionManager`) in production, and the deterministic model
//! store of the simulator (`sim/`) in tests, so the same task and the same [`Redis`] run
//! against both: every reply, error, delay and published message the task sees comes through
//! here or through its push channel.

use core::future::Future;
use core::pin::Pin;
use core::time::Duration;

use redis::{RedisResult, Value};
use tokio::sync::mpsc;

use crate::config::FleetConfig;
use crate::connect::{Connector, Handle, connector};
use crate::error::FleetError;
use crate::keys::{open_set_key, record_key, split_key};
use crate::record::{READ_FIELDS, Record};

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

/// Why a store operation gave no answer the task can use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StoreError {
    /// The store failed, refused the operation, or its connection was lost: every shared
    /// breaker's problem (the task counts it, applies `on_store_error`, and reads every record
    /// again once the store answers).
    Failed(String),
    /// The store answered about this breaker's keys with an error, or with what this instance
    /// cannot read (a value of another type, another version's record): this breaker's
    /// problem only, left alone with backoff while the others go on.
    Record(String),
}

/// A store operation in flight, as the fleet's protocol sees it.
pub(crate) type Op<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A change of a breaker's record, as one instance writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    /// Write whatever the record holds (manual control), instead of only over `seen`.
    pub(crate) force: bool,
    /// The record's epoch the writer last saw (0: no record). A compare-and-set writes only
    /// if the record's epoch is still this one.
    pub(crate) seen: u64,
    /// The new state, as a record names it: `closed`, `open`, `forced_open` or `disabled`.
    pub(crate) state: String,
    /// While open: for how long from the store's own clock, in ms.
    pub(crate) open_ms: u64,
    /// Re-opens since the last close (the backoff level).
    pub(crate) reopens: u32,
    /// Why, as text.
    pub(crate) reason: String,
    /// The failure that tripped it ('' for none).
    pub(crate) last_failure: String,
    /// The instance the change comes from.
    pub(crate) instance: String,
    /// A family key's record only: how long it lives in the store from this write
    /// (`Duration::ZERO`: until a later write). The family's open keys list it while it is
    /// not closed, until then.
    pub(crate) life: Option<Duration>,
}

/// A request for half-open probe leases of one open record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeaseAsk {
    /// The open record's epoch the asker saw.
    pub(crate) epoch: u64,
    /// How many leases may exist at once (`half_open_calls`).
    pub(crate) limit: u32,
    /// A lease's life on the store's clock (`probe_timeout`).
    pub(crate) life: Duration,
    /// The process asking: its leases are `<holder>#<n>`.
    pub(crate) holder: String,
    /// The fewest leases worth granting (`successes`).
    pub(crate) fewest: u32,
}

/// One instance's batch of judged calls of a failure-rate breaker, for the fleet's window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CountBatch {
    /// Calls judged since the instance's last batch.
    pub(crate) calls: u64,
    /// Failures among them.
    pub(crate) failures: u64,
    /// The window, in ms.
    pub(crate) window_ms: u64,
    /// A bucket's length, in ms (the counts' resolution).
    pub(crate) bucket_ms: u64,
    /// The fewest calls in the window for a trip (`min_calls`).
    pub(crate) min_calls: u32,
    /// The failure rate that trips, in percent.
    pub(crate) rate: String,
    /// The open time of a trip, in ms.
    pub(crate) open_ms: u64,
    /// The instance sending the batch.
    pub(crate) instance: String,
    /// The record's epoch the calls were judged under: a batch of another record is dropped.
    pub(crate) epoch: u64,
}

/// One instance's heartbeat, for the fleet's live set (what a quorum is counted over).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Beat {
    /// The instance.
    pub(crate) instance: String,
    /// How long the beat keeps it live, on the store's clock.
    pub(crate) life: Duration,
    /// The breakers it holds other than closed: `<len>:<breaker><len>:<state>` each.
    pub(crate) states: String,
}

/// A local trip reported under a quorum: the record opens once the open reports of live
/// instances reach the quorum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    /// The trip, as a compare-and-set over the closed record the instance saw (`force`
    /// unused; `life`: a family key's record once opened).
    pub(crate) trip: Change,
    /// The quorum: `<n>` instances, or `<p>%` of the live ones.
    pub(crate) quorum: String,
    /// The live instances and each one's beat expiry (store ms), as the reporter's own beat
    /// has just read them.
    pub(crate) live: Vec<(String, String)>,
}

/// What a batch of re-reads found.
#[derive(Debug)]
pub(crate) struct Reads {
    /// Each record asked for, in order: as it is, or that record's problem (or the store's
    /// failure on that one read).
    pub(crate) records: Vec<Result<Record, StoreError>>,
    /// The heartbeat sent with the batch, if one was: everyone's, as `beat` returns it; an
    /// error is the beat's alone (the records' answers say whether the store fails).
    pub(crate) beat: Option<Result<Vec<String>, StoreError>>,
}

/// The keyed families' open keys, as one read found them.
#[derive(Debug)]
pub(crate) struct OpenKeys {
    /// The store's time of the read, in ms.
    pub(crate) now_ms: u64,
    /// Each family's keys whose record is not closed, with the expiry of each one's record
    /// (store ms; infinity while it does not expire); `None` for a family whose list this
    /// instance cannot read (another application's value there).
    pub(crate) lists: Vec<Option<Vec<(String, f64)>>>,
}

/// The operations of the fleet's protocol on one store. Every write of a record is published
/// on the store's change feed (the task's push channel) as the record's new fields, so that
/// every instance takes it on. Times (open time, lease life, count buckets) run on the store's
/// own clock, never a host's. Each operation may fail or never answer; the task bounds each
/// by its own timeout.
pub(crate) trait FleetStore: Send + 'static {
    /// `name`'s record as it is (epoch 0 and closed when there is none), with the store's time.
    fn read(&mut self, name: String) -> Op<'_, Record>;
    /// Writes `change` to `name`'s record: over any record if `force`, else only if the
    /// record's epoch is `seen` (a compare-and-set). A write gives the record a new epoch
    /// (greater than the last, and than the store's time in ms), drops the record's probe
    /// leases and is published. Returns the record as it is after the call, `changed` telling
    /// whether this call wrote it.
    fn write(&mut self, name: String, change: Change) -> Op<'_, Record>;
    /// Asks for probe leases of `name`'s open record. `(n, life_ms)`: `n` leases granted
    /// (every free one, at least `fewest`, or the ones the holder has, renewed) for
    /// `life_ms`; `(0, wait_ms)`: not yet, ask again in `wait_ms`; `(0, -1)`: the record is
    /// no longer that open epoch.
    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, (i64, i64)>;
    /// Adds `batch` to `name`'s fleet window and trips the record (written and published as
    /// a trip, only over a closed one) once the window's rate reaches the limit. `(tripped,
    /// calls, failures)` of the window; `(0, 0, 0)` for a batch of another record.
    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, (i64, i64, i64)>;
    /// Reads the records of `names` at once (one round trip where the store allows), and
    /// beats for the instance with them if `beat` is given.
    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads>;
    /// Reports a local trip of `name` under a quorum: `quorum.lua`'s reply, `[changed,
    /// epoch, state, open_until_ms, now_ms, reopens, origin, reason, last_failure, reported,
    /// open, needed, live]` (the record after the call, whether the report was taken, and the
    /// tally).
    fn report(&mut self, name: String, report: Report) -> Op<'_, Vec<String>>;
    /// Puts the instance in the live set for `beat.life`, drops the expired, and returns
    /// everyone's: `[now_ms, instance, expires_ms, states, instance, …]`.
    fn beat(&mut self, beat: Beat) -> Op<'_, Vec<String>>;
    /// Reads the open keys of each of `families` (one read a family, one round trip where
    /// the store allows, whatever the number of keys).
    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys>;
    /// Drops from the lists of the `stale` families the keys whose record expired by
    /// `before_ms`, and reads the records of `names` (in one round trip where the store
    /// allows). Each record as it is, or why not.
    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>>;
    /// Whether the store answers.
    fn ping(&mut self) -> Op<'_, ()>;
    /// Follows the change feed: every record written from now on arrives on the push channel
    /// given with the store, and a loss of the connection arrives there too (the task reads
    /// every record again after one: what was published meanwhile is lost).
    fn follow(&mut self) -> Op<'_, ()>;
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
            change.state,
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

    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, (i64, i64)> {
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
        Box::pin(async move { typed(reply.await) })
    }

    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, (i64, i64, i64)> {
        let keys = vec![record_key(&self.prefix, &name)];
        let args = vec![
            batch.calls.to_string(),
            batch.failures.to_string(),
            batch.window_ms.to_string(),
            batch.bucket_ms.to_string(),
            batch.min_calls.to_string(),
            batch.rate,
            batch.open_ms.to_string(),
            batch.instance,
            self.channel.clone(),
            name,
            batch.epoch.to_string(),
        ];
        let reply = self.wire.eval(Script::Count, keys, args);
        Box::pin(async move { typed(reply.await) })
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
                    Some(typed(self.wire.eval(Script::Heartbeat, keys, args).await))
                }
                (Some(_), Some(Ok(value))) => Some(
                    redis::from_redis_value::<Vec<String>>(value)
                        .map_err(|e| StoreError::Record(e.to_string())),
                ),
                (Some(_), Some(Err(e))) => Some(Err(StoreError::Record(e.to_string()))),
                _ => None,
            };
            Ok(Reads { records, beat })
        })
    }

    fn report(&mut self, name: String, report: Report) -> Op<'_, Vec<String>> {
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
            report.quorum,
            report.live.len().to_string(),
        ];
        for (instance, expiry) in report.live {
            args.push(instance);
            args.push(expiry);
        }
        if let (Some(life), Some((family, key))) = (trip.life, split_key(&name)) {
            keys.push(open_set_key(&self.prefix, family));
            args.push(life.as_millis().to_string());
            args.push(key.to_owned());
        }
        let reply = self.wire.eval(Script::Quorum, keys, args);
        Box::pin(async move { typed(reply.await) })
    }

    fn beat(&mut self, beat: Beat) -> Op<'_, Vec<String>> {
        let (keys, args) = self.beat_keys_args(&beat);
        let reply = self.wire.eval(Script::Heartbeat, keys, args);
        Box::pin(async move { typed(reply.await) })
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

/// The store `config` names, not connected yet.
pub(crate) fn production_store(
    config: &FleetConfig,
) -> Result<(RedisWire, mpsc::UnboundedReceiver<redis::PushInfo>), FleetError> {
    let (con, pushes) = connector(&config.url, config.tls_ca.as_deref(), config.timeout)?;
    Ok((RedisWire::new(con), pushes))
}

#[cfg(test)]
pub(crate) mod conformance;

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
