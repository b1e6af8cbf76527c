//! The fleet's protocol over PostgreSQL (feature `postgres`): a row per breaker and per shared
//! family's key, changed only by the functions of `postgres_functions.sql` (each operation one
//! statement, so one transaction), and `LISTEN`/`NOTIFY` as the change feed.
//!
//! The tables (`postgres_tables.sql`) are created where missing and checked at every
//! connection: a table of the fleet's name with another shape, or another schema version, is
//! an error that names it, and the store answers nothing until it is fixed. Notifications are
//! lost while a connection is down: a lost connection is an [`Event::Lost`], after which the
//! task reads every record again, as it does after Redis's.
//!
//! The database must be in UTF-8 (`encoding 'UTF8'`, PostgreSQL's default): a connection to a
//! database in another encoding is an error that names it.

use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;
use tokio_postgres::error::SqlState;
use tokio_postgres::{AsyncMessage, Client, Row, Statement};

use super::{
    Alive, Beat, Change, CountBatch, Counted, Event, Feed, FleetStore, LeaseAsk, Leases, Live, Op,
    OpenKeys, Reads, Report, Reported, StoreError,
};
use crate::config::FleetConfig;
use crate::error::{FleetError, redact};
use crate::keys::{key_name, split_key};
use crate::record::{Record, parse_payload, state_name};

/// The channel every fleet's records are sent on (each notification names its schema and
/// prefix).
const CHANNEL: &str = "breakerbox_fleet";

/// The schema this version reads and writes (the row of `breakerbox_fleet_schema`).
pub(crate) const SCHEMA_VERSION: i32 = 1;

/// The advisory lock that makes one connection at a time create or check the schema.
const SCHEMA_LOCK: i64 = 0x6272_6b62_6f78_0001;

const TABLES: &str = include_str!("postgres_tables.sql");
const FUNCTIONS: &str = include_str!("postgres_functions.sql");

/// A column: its name, its type as `information_schema` spells it, and whether it is nullable.
type Column = (&'static str, &'static str, bool);

/// The fleet's tables, each with its primary key's columns (in order) and its columns, as
/// `postgres_tables.sql` makes them.
const SHAPE: &[(&str, &[&str], &[Column])] = &[
    (
        "breakerbox_fleet_schema",
        &[],
        &[("version", "integer", false)],
    ),
    (
        "breakerbox_fleet_records",
        &["prefix", "family", "name_md5"],
        &[
            ("prefix", "text", false),
            ("family", "text", false),
            ("name", "text", false),
            ("epoch", "bigint", false),
            ("state", "text", false),
            ("open_until", "bigint", false),
            ("reopens", "bigint", false),
            ("origin", "text", false),
            ("reason", "text", false),
            ("last_failure", "text", false),
            ("changed_at", "bigint", false),
            ("expires_at", "bigint", true),
            ("name_md5", "text", false),
        ],
    ),
    (
        "breakerbox_fleet_counts",
        &["prefix", "family", "name_md5", "bucket"],
        &[
            ("prefix", "text", false),
            ("family", "text", false),
            ("name", "text", false),
            ("bucket", "bigint", false),
            ("epoch", "bigint", false),
            ("calls", "bigint", false),
            ("failures", "bigint", false),
            ("name_md5", "text", false),
        ],
    ),
    (
        "breakerbox_fleet_leases",
        &["prefix", "family", "name_md5", "holder"],
        &[
            ("prefix", "text", false),
            ("family", "text", false),
            ("name", "text", false),
            ("holder", "text", false),
            ("expires_at", "bigint", false),
            ("name_md5", "text", false),
        ],
    ),
    (
        "breakerbox_fleet_reports",
        &["prefix", "family", "name_md5", "epoch", "instance"],
        &[
            ("prefix", "text", false),
            ("family", "text", false),
            ("name", "text", false),
            ("epoch", "bigint", false),
            ("instance", "text", false),
            ("expires_at", "bigint", false),
            ("name_md5", "text", false),
        ],
    ),
    (
        "breakerbox_fleet_live",
        &["prefix", "instance"],
        &[
            ("prefix", "text", false),
            ("instance", "text", false),
            ("expires_at", "bigint", false),
            ("states", "text", false),
        ],
    ),
    (
        "breakerbox_fleet_open_keys",
        &["prefix", "family", "key_md5"],
        &[
            ("prefix", "text", false),
            ("family", "text", false),
            ("key", "text", false),
            ("expires_at", "double precision", false),
            ("key_md5", "text", false),
        ],
    ),
];

/// The statements of the protocol, prepared once a connection.
struct Statements {
    read: Statement,
    write: Statement,
    lease: Statement,
    count: Statement,
    report: Statement,
    beat: Statement,
    open_keys: Statement,
    tidy: Statement,
    ping: Statement,
}

/// The records of the families `$2` and names `$3` (pairwise) under the prefix `$1`, in order,
/// each with the server's time; a missing or expired one has no epoch.
const READ: &str = "with t as (select breakerbox_fleet_now() as now_ms)
    select r.epoch, r.state, r.open_until, r.reopens, r.origin, r.reason, r.last_failure,
        t.now_ms
    from t cross join unnest($2::text[], $3::text[]) with ordinality as n(family, name, i)
    left join breakerbox_fleet_records r on r.prefix = $1 and r.family = n.family
        and r.name_md5 = md5(n.name) and r.name = n.name and (r.expires_at is null or r.expires_at > t.now_ms)
    order by n.i";

/// The open keys of the families `$2` under the prefix `$1`, with the server's time (one row
/// with no family when none is listed).
const OPEN_KEYS: &str = "with t as (select breakerbox_fleet_now() as now_ms)
    select t.now_ms, k.family, k.key, k.expires_at
    from t left join breakerbox_fleet_open_keys k on k.prefix = $1 and k.family = any($2)";

impl Statements {
    async fn prepare(client: &Client) -> Result<Statements, tokio_postgres::Error> {
        Ok(Statements {
            read: client.prepare(READ).await?,
            write: client
                .prepare(
                    "select * from breakerbox_fleet_write($1, $2, $3, $4, $5, $6, $7, $8, $9, \
                     $10, $11, $12)",
                )
                .await?,
            lease: client
                .prepare("select * from breakerbox_fleet_lease($1, $2, $3, $4, $5, $6, $7, $8)")
                .await?,
            count: client
                .prepare(
                    "select * from breakerbox_fleet_count($1, $2, $3, $4, $5, $6, $7, $8, $9, \
                     $10, $11, $12)",
                )
                .await?,
            report: client
                .prepare(
                    "select * from breakerbox_fleet_report($1, $2, $3, $4, $5, $6, $7, $8, $9, \
                     $10, $11, $12, $13)",
                )
                .await?,
            beat: client
                .prepare("select * from breakerbox_fleet_beat($1, $2, $3, $4)")
                .await?,
            open_keys: client.prepare(OPEN_KEYS).await?,
            tidy: client
                .prepare("select breakerbox_fleet_tidy($1, $2, $3)")
                .await?,
            ping: client.prepare("select 1").await?,
        })
    }
}

/// One connection: its client, its statements, and the task that drives it and hands its
/// notifications to the feed.
struct Conn {
    client: Client,
    st: Statements,
    driver: tokio::task::JoinHandle<()>,
    /// The connection's end has been told to the feed (once, by the driver or the store).
    told: Arc<AtomicBool>,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(connecting) = &self.connecting {
            connecting.abort();
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// The fleet's protocol over PostgreSQL, through one connection at a time, made on first use
/// and again after each loss.
pub(crate) struct Postgres {
    config: tokio_postgres::Config,
    /// TLS for `sslmode=require` (postgres_tls.rs).
    tls: super::postgres_tls::Tls,
    prefix: String,
    /// How long one operation (with the connection it may need) may take before the
    /// connection is given up: less than the task's own bound, so that the store, not the
    /// task, drops a connection that hangs.
    limit: Duration,
    conn: Option<Conn>,
    /// A connection being made, on a task of its own: an operation that gives up waiting
    /// for it leaves it to the next one, so that a slow start (the schema checked or
    /// created) is not begun again by every operation.
    connecting: Option<tokio::task::JoinHandle<Result<Conn, StoreError>>>,
    /// How long making a connection may take.
    connect_limit: Duration,
    /// `follow` was called: every new connection listens.
    listening: bool,
    events: mpsc::UnboundedSender<Event>,
}

/// The store `config` names (a `postgres://` or `postgresql://` URL), not connected yet, and
/// its change feed.
pub(crate) fn postgres_store(config: &FleetConfig) -> Result<(Postgres, Feed), FleetError> {
    let bad = |reason: String| FleetError::Url {
        url: redact(&config.url),
        reason,
    };
    let mut pg: tokio_postgres::Config = config.url.parse().map_err(|e| bad(format!("{e}")))?;
    let ca = super::postgres_tls::read_ca(config.tls_ca.as_deref())?;
    let tls = super::postgres_tls::connector(&mut pg, ca.as_deref()).map_err(bad)?;
    pg.connect_timeout(config.timeout)
        .keepalives(true)
        .application_name("breakerbox-fleet");
    let (events, feed) = mpsc::unbounded_channel();
    let store = Postgres {
        config: pg,
        tls,
        prefix: config.prefix.clone(),
        limit: config.timeout * 3 / 2,
        conn: None,
        connecting: None,
        connect_limit: (config.timeout * 8).max(Duration::from_secs(2)),
        listening: false,
        events,
    };
    Ok((store, Feed::new(feed)))
}

/// A task's name as the tables hold it: (family, key) for a shared family's key, ("", name)
/// for a breaker.
fn split(name: &str) -> (&str, &str) {
    split_key(name).unwrap_or(("", name))
}

/// `text` as PostgreSQL's `text` can hold it: a NUL byte, which it refuses (SQLSTATE 22021),
/// is stored as U+FFFD, the replacement character; so a record written with a NUL in its
/// reason or failure reads back (and is heard) with "\u{FFFD}" in its place. In a UTF-8
/// database (the only kind the store connects to) nothing else in a Rust string is refused.
fn storable(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text
    }
}

/// Whether PostgreSQL's `text` can hold `name` (a breaker's, or a family's and its key's,
/// as [`split`] cuts it): one with a NUL byte (a family key's text is the caller's) cannot be stored or looked up, so it is that record's problem (never
/// mapped to another name, which another key may have).
fn holdable(name: &str) -> Result<(), StoreError> {
    let (family, key) = split(name);
    if family.contains('\0') || key.contains('\0') {
        return Err(StoreError::Record(
            "PostgreSQL: a name with a NUL byte, which PostgreSQL's text cannot hold".to_owned(),
        ));
    }
    Ok(())
}

/// The error as the store says it, with its detail.
fn why(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// A column this instance cannot read.
fn unreadable(what: &str) -> StoreError {
    StoreError::Record(format!(
        "{what} this instance cannot read (another version's, or another application's?)"
    ))
}

/// A record from its fields; `None` fields (`epoch` missing) are no record.
#[expect(clippy::too_many_arguments, reason = "a record's fields")]
fn record_of(
    changed: bool,
    epoch: Option<i64>,
    state: Option<String>,
    open_until: Option<i64>,
    now: i64,
    reopens: Option<i64>,
    origin: Option<String>,
    reason: Option<String>,
    failure: Option<String>,
) -> Result<Record, StoreError> {
    let Some(epoch) = epoch else {
        return Ok(Record::from_reply(&[
            "0".into(),
            "0".into(),
            "closed".into(),
            "0".into(),
            now.to_string(),
            "0".into(),
            String::new(),
            String::new(),
            String::new(),
        ])
        .expect("no record reads"));
    };
    let reopens = reopens.unwrap_or(0);
    if u32::try_from(reopens).is_err() {
        return Err(unreadable("a record"));
    }
    let fields = [
        if changed { "1" } else { "0" }.to_owned(),
        epoch.to_string(),
        state.unwrap_or_default(),
        open_until.unwrap_or(0).to_string(),
        now.to_string(),
        reopens.to_string(),
        origin.unwrap_or_default(),
        reason.unwrap_or_default(),
        failure.unwrap_or_default(),
    ];
    Record::from_reply(&fields).ok_or_else(|| unreadable("a record"))
}

/// A record from a row of `READ`.
fn read_row(row: &Row) -> Result<Record, StoreError> {
    let get = || -> Result<Result<Record, StoreError>, tokio_postgres::Error> {
        Ok(record_of(
            false,
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(7)?,
            row.try_get(3)?,
            row.try_get(4)?,
            row.try_get(5)?,
            row.try_get(6)?,
        ))
    };
    get().map_err(|e| StoreError::Failed(why(&e)))?
}

/// A record from the first nine columns a write (or a report) returns.
fn written_row(row: &Row) -> Result<Record, StoreError> {
    let get = || -> Result<Result<Record, StoreError>, tokio_postgres::Error> {
        Ok(record_of(
            row.try_get(0)?,
            Some(row.try_get(1)?),
            Some(row.try_get(2)?),
            Some(row.try_get(3)?),
            row.try_get(4)?,
            Some(row.try_get(5)?),
            Some(row.try_get(6)?),
            Some(row.try_get(7)?),
            Some(row.try_get(8)?),
        ))
    };
    get().map_err(|e| StoreError::Failed(why(&e)))?
}

/// The first `<length>:<bytes>` field of `bytes`, and the rest.
fn field(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = bytes.iter().position(|b| *b == b':')?;
    let len: usize = core::str::from_utf8(&bytes[..colon]).ok()?.parse().ok()?;
    let start = colon.checked_add(1)?;
    let end = start.checked_add(len)?;
    Some((bytes.get(start..end)?, &bytes[end..]))
}

/// A notification as an event: a record of this fleet written, or to read again; `None` for
/// another fleet's (another schema of the database, or another prefix).
fn event_of(schema: &str, prefix: &str, payload: &str) -> Option<Event> {
    let bytes = payload.as_bytes();
    let foreign = || Some(Event::Foreign(bytes.to_vec()));
    let Some((at, rest)) = field(bytes) else {
        return foreign();
    };
    let Some((of, rest)) = field(rest) else {
        return foreign();
    };
    if at != schema.as_bytes() || of != prefix.as_bytes() {
        return None;
    }
    let Some((family, rest)) = field(rest) else {
        return foreign();
    };
    let family = String::from_utf8_lossy(family);
    let name = |name: &str| {
        if family.is_empty() {
            name.to_owned()
        } else {
            key_name(&family, name)
        }
    };
    if let Some((only, b"")) = field(rest) {
        return Some(Event::Stale(name(&String::from_utf8_lossy(only))));
    }
    match parse_payload(rest) {
        Some((key, record)) => Some(Event::Written(name(&key), record)),
        None => foreign(),
    }
}

/// Creates the fleet's tables where missing and its functions, after checking those that
/// exist and the schema's version; an error names what is wrong.
async fn ensure_schema(client: &mut Client) -> Result<(), StoreError> {
    let failed = |e: tokio_postgres::Error| StoreError::Failed(format!("PostgreSQL: {}", why(&e)));
    let tx = client.transaction().await.map_err(failed)?;
    tx.execute("select pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await
        .map_err(failed)?;
    let columns = tx
        .query(
            "select table_name::text, column_name::text, data_type::text, is_nullable::text
             from information_schema.columns
             where table_schema = current_schema() and table_name like 'breakerbox\\_fleet\\_%'",
            &[],
        )
        .await
        .map_err(failed)?;
    // Each relation of the fleet's names in the schema: its kind (`r` a table, `p` a
    // partitioned one) and its primary key's columns, in order.
    let relations = tx
        .query(
            "select c.relname::text, c.relkind::text,
                coalesce((select array_agg(a.attname::text order by k.n)
                    from pg_index i
                    cross join unnest(i.indkey::int2[]) with ordinality as k(attnum, n)
                    join pg_attribute a on a.attrelid = c.oid and a.attnum = k.attnum
                    where i.indrelid = c.oid and i.indisprimary), '{}')
             from pg_class c
             where c.relnamespace = (select oid from pg_namespace where nspname = current_schema())
                and c.relname like 'breakerbox\\_fleet\\_%'",
            &[],
        )
        .await
        .map_err(failed)?;
    let mut missing = false;
    for (table, key, shape) in SHAPE {
        let have: Vec<(String, String, bool)> = columns
            .iter()
            .filter(|row| row.get::<_, String>(0) == *table)
            .map(|row| (row.get(1), row.get(2), row.get::<_, String>(3) == "YES"))
            .collect();
        let wrong = |what: String| {
            StoreError::Failed(format!(
                "PostgreSQL: the table `{table}` is not the breakerbox fleet's (schema \
                 version {SCHEMA_VERSION}): {what}; drop or rename it, or give the fleet \
                 another database or schema"
            ))
        };
        // A view, or a relation without columns (a sequence, an index, which would make
        // `create table if not exists` skip the table), is not a table.
        let Some(relation) = relations
            .iter()
            .find(|row| row.get::<_, String>(0) == *table)
        else {
            missing = true;
            continue;
        };
        let relkind: String = relation.get(1);
        if relkind != "r" && relkind != "p" {
            return Err(wrong(format!(
                "it is not a table (its kind in pg_class is `{relkind}`)"
            )));
        }
        for (column, kind, nullable) in *shape {
            match have.iter().find(|(c, _, _)| c == column) {
                None => return Err(wrong(format!("it has no column `{column}`"))),
                Some((_, k, _)) if k != kind => {
                    return Err(wrong(format!(
                        "its column `{column}` is `{k}`, not `{kind}`"
                    )));
                }
                Some((_, _, n)) if n != nullable => {
                    let (is, fleets) = if *n {
                        ("allows null", "does not")
                    } else {
                        ("does not allow null", "does")
                    };
                    return Err(wrong(format!(
                        "its column `{column}` {is}, where the fleet's {fleets}"
                    )));
                }
                Some(_) => {}
            }
        }
        let have_key: Vec<String> = relation.get(2);
        if have_key != *key {
            let said = |columns: &[&str]| match columns {
                [] => "none".to_owned(),
                columns => format!("({})", columns.join(", ")),
            };
            let have: Vec<&str> = have_key.iter().map(String::as_str).collect();
            return Err(wrong(format!(
                "its primary key is {}, not {}",
                said(&have),
                said(key)
            )));
        }
    }
    if missing {
        tx.batch_execute(TABLES).await.map_err(failed)?;
    }
    let versions = tx
        .query("select version from breakerbox_fleet_schema", &[])
        .await
        .map_err(failed)?;
    match &versions[..] {
        [] => {
            tx.execute(
                "insert into breakerbox_fleet_schema (version) values ($1)",
                &[&SCHEMA_VERSION],
            )
            .await
            .map_err(failed)?;
        }
        [row] if row.get::<_, i32>(0) == SCHEMA_VERSION => {}
        [row] => {
            let version: i32 = row.get(0);
            return Err(StoreError::Failed(format!(
                "PostgreSQL: the database holds the breakerbox fleet's schema version \
                 {version}; this version of breakerbox reads and writes version \
                 {SCHEMA_VERSION}"
            )));
        }
        _ => {
            return Err(StoreError::Failed(
                "PostgreSQL: `breakerbox_fleet_schema` holds several rows; it must hold one, \
                 the schema's version"
                    .to_owned(),
            ));
        }
    }
    tx.batch_execute(FUNCTIONS).await.map_err(failed)?;
    tx.commit().await.map_err(failed)
}

/// Refuses a database in another encoding than UTF-8: the fleet's text (names, reasons,
/// failures) is UTF-8 and its notifications count each field's length in the database's bytes,
/// which the client receives converted to UTF-8.
async fn require_utf8(client: &Client) -> Result<(), StoreError> {
    let failed = |e: tokio_postgres::Error| StoreError::Failed(format!("PostgreSQL: {}", why(&e)));
    let encoding = client
        .simple_query("show server_encoding")
        .await
        .map_err(failed)?
        .into_iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .unwrap_or_default();
    if encoding.eq_ignore_ascii_case("UTF8") {
        return Ok(());
    }
    Err(StoreError::Failed(format!(
        "PostgreSQL: the database's encoding is {encoding}; the breakerbox fleet needs a UTF8 \
         database (create one with `encoding 'UTF8'`, or give the fleet another)"
    )))
}

/// A new connection to `config`, its schema checked (created where missing), its statements
/// prepared, listening if `listening`; its notifications of `prefix` sent to `events`.
async fn open(
    config: tokio_postgres::Config,
    tls: super::postgres_tls::Tls,
    prefix: String,
    events: mpsc::UnboundedSender<Event>,
    listening: bool,
) -> Result<Conn, StoreError> {
    let (mut client, mut connection) = config
        .connect(tls)
        .await
        .map_err(|e| StoreError::Failed(format!("PostgreSQL: {}", why(&e))))?;
    let told = Arc::new(AtomicBool::new(false));
    let end = told.clone();
    // The schema the connection's tables are in (its `current_schema()`), known before it
    // listens: every fleet of the database sends on one channel, naming its schema and prefix.
    let schema = Arc::new(std::sync::OnceLock::<String>::new());
    let ours = schema.clone();
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(n))) if n.channel() == CHANNEL => {
                    if let Some(event) = ours
                        .get()
                        .and_then(|schema| event_of(schema, &prefix, n.payload()))
                    {
                        let _ = events.send(event);
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break,
            }
        }
        if !end.swap(true, Ordering::Relaxed) {
            let _ = events.send(Event::Lost);
        }
    });
    let ready = async {
        let failed =
            |e: tokio_postgres::Error| StoreError::Failed(format!("PostgreSQL: {}", why(&e)));
        // Each function takes its record's lock, then reads the record: under `read committed`
        // that read sees what the lock's last holder committed, so a lost compare-and-set is
        // answered with the record that won. Set here, whatever the database's or the role's
        // default (`repeatable read` would fail it as a serialization error instead).
        client
            .batch_execute(
                "set session characteristics as transaction isolation level read committed",
            )
            .await
            .map_err(failed)?;
        require_utf8(&client).await?;
        ensure_schema(&mut client).await?;
        let st = Statements::prepare(&client).await.map_err(failed)?;
        let current: String = client
            .query_one("select coalesce(current_schema(), '')", &[])
            .await
            .map_err(failed)?
            .get(0);
        let _ = schema.set(current);
        if listening {
            client
                .batch_execute(&format!("listen {CHANNEL}"))
                .await
                .map_err(failed)?;
        }
        Ok(st)
    };
    match ready.await {
        Ok(st) => Ok(Conn {
            client,
            st,
            driver,
            told,
        }),
        Err(e) => {
            told.store(true, Ordering::Relaxed);
            driver.abort();
            Err(e)
        }
    }
}

impl Postgres {
    /// Gives up the connection (a later operation connects again); its loss is told to the
    /// feed if the driver has not told it.
    fn drop_conn(&mut self) {
        if let Some(conn) = self.conn.take()
            && !conn.told.swap(true, Ordering::Relaxed)
        {
            let _ = self.events.send(Event::Lost);
        }
    }

    /// Runs `go` on the connection (made first if there is none, or it was lost), within the
    /// store's limit; a connection that fails or hangs is given up.
    async fn run<T>(
        &mut self,
        go: impl for<'c> FnOnce(
            &'c Conn,
        ) -> Pin<
            Box<dyn Future<Output = Result<T, tokio_postgres::Error>> + Send + 'c>,
        >,
    ) -> Result<T, StoreError> {
        self.run_waiting(None, go).await
    }

    /// `run`, waiting up to `wait` for a connection being made (`None`: the store's limit for
    /// both, together), and then up to the store's limit for `go`.
    async fn run_waiting<T>(
        &mut self,
        wait: Option<Duration>,
        go: impl for<'c> FnOnce(
            &'c Conn,
        ) -> Pin<
            Box<dyn Future<Output = Result<T, tokio_postgres::Error>> + Send + 'c>,
        >,
    ) -> Result<T, StoreError> {
        let limit = self.limit;
        let start = tokio::time::Instant::now();
        let connected_by = start + wait.unwrap_or(limit);
        if self.conn.as_ref().is_some_and(|c| c.client.is_closed()) {
            self.drop_conn();
        }
        if self.conn.is_none() {
            let connecting = self.connecting.get_or_insert_with(|| {
                let limit = self.connect_limit;
                let open = open(
                    self.config.clone(),
                    // `NoTls`, a Copy type, without the feature `tls`.
                    Clone::clone(&self.tls),
                    self.prefix.clone(),
                    self.events.clone(),
                    self.listening,
                );
                tokio::spawn(async move {
                    tokio::time::timeout(limit, open).await.unwrap_or_else(|_| {
                        Err(StoreError::Failed(format!(
                            "PostgreSQL: no connection within {limit:?}"
                        )))
                    })
                })
            });
            let made = tokio::time::timeout_at(connected_by, connecting).await;
            let Ok(made) = made else {
                // Still connecting: the next operation waits for the same connection.
                return Err(StoreError::Failed(format!(
                    "PostgreSQL: no connection within {:?}",
                    connected_by - start
                )));
            };
            self.connecting = None;
            match made {
                Ok(Ok(conn)) => self.conn = Some(conn),
                Ok(Err(e)) => return Err(e),
                Err(e) => return Err(StoreError::Failed(format!("PostgreSQL: {e}"))),
            }
        }
        let conn = self.conn.as_ref().expect("connected above");
        let answered_by = match wait {
            Some(_) => tokio::time::Instant::now() + limit,
            None => start + limit,
        };
        let answer = tokio::time::timeout_at(answered_by, go(conn)).await;
        match answer {
            Ok(Ok(t)) => Ok(t),
            Ok(Err(e)) => {
                let why = format!("PostgreSQL: {}", why(&e));
                match e.code() {
                    // A data exception: what this record's row holds (a value out of range, a
                    // notification too long); or a name too long for the tables' index
                    // (`program_limit_exceeded`, an index row over 2,704 bytes).
                    Some(code)
                        if code.code().starts_with("22")
                            || *code == SqlState::PROGRAM_LIMIT_EXCEEDED =>
                    {
                        Err(StoreError::Record(why))
                    }
                    // Refused: a new connection would be refused the same.
                    Some(&SqlState::INSUFFICIENT_PRIVILEGE) => Err(StoreError::Failed(why)),
                    _ => {
                        // Lost, or the schema changed under it (a table or function dropped,
                        // a statement whose plan no longer holds): the next operation
                        // connects again, and the new connection checks and makes the schema.
                        self.drop_conn();
                        Err(StoreError::Failed(why))
                    }
                }
            }
            Err(_) => {
                self.drop_conn();
                Err(StoreError::Failed(format!(
                    "PostgreSQL: no answer within {limit:?}"
                )))
            }
        }
    }

    /// Reads the records of `names`, in order, in one statement: each record, or why not (a
    /// name PostgreSQL cannot hold is that record's problem, the others read all the same).
    async fn read_names(
        &mut self,
        names: &[String],
    ) -> Result<Vec<Result<Record, StoreError>>, StoreError> {
        let prefix = self.prefix.clone();
        let (families, keys): (Vec<String>, Vec<String>) = names
            .iter()
            .filter(|n| holdable(n).is_ok())
            .map(|n| {
                let (f, k) = split(n);
                (f.to_owned(), k.to_owned())
            })
            .unzip();
        let asked = keys.len();
        let rows = if asked == 0 {
            Vec::new()
        } else {
            self.run(move |c| {
                Box::pin(async move {
                    c.client
                        .query(&c.st.read, &[&prefix, &families, &keys])
                        .await
                })
            })
            .await?
        };
        if rows.len() != asked {
            return Err(StoreError::Failed(
                "PostgreSQL: a read's rows do not match its names".to_owned(),
            ));
        }
        let mut rows = rows.iter();
        Ok(names
            .iter()
            .map(|n| {
                holdable(n)?;
                read_row(rows.next().expect("a row for each name held"))
            })
            .collect())
    }

    /// Everyone's heartbeat after `beat`.
    async fn beat_now(&mut self, beat: Beat) -> Result<Live, StoreError> {
        let prefix = self.prefix.clone();
        let life = i64::try_from(beat.life.as_millis().max(1)).unwrap_or(i64::MAX);
        let (instance, states) = (storable(beat.instance), storable(beat.states));
        let rows = self
            .run(move |c| {
                Box::pin(async move {
                    c.client
                        .query(&c.st.beat, &[&prefix, &instance, &life, &states])
                        .await
                })
            })
            .await?;
        let mut live = Live {
            now_ms: 0,
            instances: Vec::with_capacity(rows.len()),
        };
        for row in rows {
            let (now, instance, expires, states): (i64, String, i64, String) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            live.now_ms = u64::try_from(now).unwrap_or(0);
            live.instances.push(Alive {
                instance,
                expires_ms: u64::try_from(expires).unwrap_or(0),
                states,
            });
        }
        Ok(live)
    }
}

/// `n` as a bigint, saturated.
fn big(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A life in ms as a bigint.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl FleetStore for Postgres {
    fn read(&mut self, name: String) -> Op<'_, Record> {
        Box::pin(async move {
            let mut records = self.read_names(core::slice::from_ref(&name)).await?;
            records
                .pop()
                .ok_or_else(|| StoreError::Failed("PostgreSQL: a read with no row".to_owned()))?
        })
    }

    fn write(&mut self, name: String, change: Change) -> Op<'_, Record> {
        let prefix = self.prefix.clone();
        Box::pin(async move {
            holdable(&name)?;
            let (family, key) = split(&name);
            let (family, key) = (family.to_owned(), key.to_owned());
            let seen = big(change.seen);
            let state = state_name(change.state);
            let open_ms = big(change.open_ms);
            let reopens = i64::from(change.reopens);
            let life = change.life.map(ms);
            let (reason, failure, instance) = (
                storable(change.reason),
                storable(change.last_failure),
                storable(change.instance),
            );
            let row = self
                .run(move |c| {
                    Box::pin(async move {
                        c.client
                            .query_one(
                                &c.st.write,
                                &[
                                    &prefix,
                                    &family,
                                    &key,
                                    &change.force,
                                    &seen,
                                    &state,
                                    &open_ms,
                                    &reopens,
                                    &reason,
                                    &failure,
                                    &instance,
                                    &life,
                                ],
                            )
                            .await
                    })
                })
                .await?;
            written_row(&row)
        })
    }

    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, Leases> {
        let prefix = self.prefix.clone();
        Box::pin(async move {
            holdable(&name)?;
            let (family, key) = split(&name);
            let (family, key) = (family.to_owned(), key.to_owned());
            let epoch = big(ask.epoch);
            let limit = i32::try_from(ask.limit).unwrap_or(i32::MAX);
            let life = ms(ask.life).max(1);
            let fewest = i32::try_from(ask.fewest).unwrap_or(i32::MAX);
            let holder = storable(ask.holder);
            let row = self
                .run(move |c| {
                    Box::pin(async move {
                        c.client
                            .query_one(
                                &c.st.lease,
                                &[
                                    &prefix, &family, &key, &epoch, &limit, &life, &holder, &fewest,
                                ],
                            )
                            .await
                    })
                })
                .await?;
            Ok(Leases::from_reply(
                i64::from(row.get::<_, i32>(0)),
                row.get(1),
            ))
        })
    }

    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, Counted> {
        let prefix = self.prefix.clone();
        Box::pin(async move {
            holdable(&name)?;
            let (family, key) = split(&name);
            let (family, key) = (family.to_owned(), key.to_owned());
            let numbers = [
                big(batch.calls),
                big(batch.failures),
                big(batch.window_ms),
                big(batch.bucket_ms.max(1)),
                i64::from(batch.min_calls),
                i64::from(batch.rate),
                big(batch.open_ms),
            ];
            let epoch = big(batch.epoch);
            let instance = storable(batch.instance);
            let row = self
                .run(move |c| {
                    Box::pin(async move {
                        let [calls, failures, window, bucket, min_calls, rate, open_ms] = &numbers;
                        c.client
                            .query_one(
                                &c.st.count,
                                &[
                                    &prefix, &family, &key, calls, failures, window, bucket,
                                    min_calls, rate, open_ms, &instance, &epoch,
                                ],
                            )
                            .await
                    })
                })
                .await?;
            Ok(Counted::from_reply(
                i64::from(row.get::<_, i32>(0)),
                row.get(1),
                row.get(2),
            ))
        })
    }

    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads> {
        Box::pin(async move {
            let records = self.read_names(&names).await?;
            let beat = match beat {
                Some(beat) => Some(self.beat_now(beat).await),
                None => None,
            };
            Ok(Reads { records, beat })
        })
    }

    fn report(&mut self, name: String, report: Report) -> Op<'_, Reported> {
        let prefix = self.prefix.clone();
        Box::pin(async move {
            holdable(&name)?;
            let (family, key) = split(&name);
            let (family, key) = (family.to_owned(), key.to_owned());
            let trip = report.trip;
            let seen = big(trip.seen);
            let open_ms = big(trip.open_ms);
            let reopens = i64::from(trip.reopens);
            let quorum = report.quorum.arg();
            let (live, expiries): (Vec<String>, Vec<i64>) = report
                .live
                .into_iter()
                .map(|(i, e)| (storable(i), big(e)))
                .unzip();
            let (reason, failure, instance) = (
                storable(trip.reason),
                storable(trip.last_failure),
                storable(trip.instance),
            );
            let life = trip.life.map(ms);
            let row = self
                .run(move |c| {
                    Box::pin(async move {
                        c.client
                            .query_one(
                                &c.st.report,
                                &[
                                    &prefix, &family, &key, &seen, &open_ms, &reopens, &reason,
                                    &failure, &instance, &quorum, &live, &expiries, &life,
                                ],
                            )
                            .await
                    })
                })
                .await?;
            let record = written_row(&row)?;
            let tally = |i: usize| u32::try_from(row.get::<_, i32>(i)).unwrap_or(0);
            Ok(Reported {
                record,
                taken: row.get(9),
                open: tally(10),
                needed: tally(11),
                live: tally(12),
            })
        })
    }

    fn beat(&mut self, beat: Beat) -> Op<'_, Live> {
        Box::pin(self.beat_now(beat))
    }

    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys> {
        let prefix = self.prefix.clone();
        Box::pin(async move {
            let asked = families.clone();
            let rows = self
                .run(move |c| {
                    Box::pin(
                        async move { c.client.query(&c.st.open_keys, &[&prefix, &asked]).await },
                    )
                })
                .await?;
            let mut now_ms = 0;
            let mut lists: Vec<Option<Vec<(String, f64)>>> =
                families.iter().map(|_| Some(Vec::new())).collect();
            for row in rows {
                now_ms = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
                let (Some(family), Some(key), Some(expires)) = (
                    row.get::<_, Option<String>>(1),
                    row.get::<_, Option<String>>(2),
                    row.get::<_, Option<f64>>(3),
                ) else {
                    continue;
                };
                if let Some(Some(list)) = families
                    .iter()
                    .position(|f| *f == family)
                    .map(|i| &mut lists[i])
                {
                    list.push((key, expires));
                }
            }
            Ok(OpenKeys { now_ms, lists })
        })
    }

    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>> {
        let prefix = self.prefix.clone();
        Box::pin(async move {
            if !stale.is_empty() {
                let before = big(before_ms);
                self.run(move |c| {
                    Box::pin(async move {
                        c.client
                            .execute(&c.st.tidy, &[&prefix, &stale, &before])
                            .await
                    })
                })
                .await?;
            }
            if names.is_empty() {
                return Ok(Vec::new());
            }
            self.read_names(&names).await
        })
    }

    fn ping(&mut self) -> Op<'_, ()> {
        Box::pin(async move {
            // As long as a connection may take to be made (`Fleet::connect` waits that long;
            // the task, less, and the connection goes on being made meanwhile).
            let wait = self.connect_limit;
            self.run_waiting(Some(wait), |c| {
                Box::pin(async move { c.client.query_one(&c.st.ping, &[]).await })
            })
            .await
            .map(|_| ())
        })
    }

    fn follow(&mut self) -> Op<'_, ()> {
        Box::pin(async move {
            self.listening = true;
            self.run(|c| {
                Box::pin(async move { c.client.batch_execute(&format!("listen {CHANNEL}")).await })
            })
            .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(fields: &[&str]) -> String {
        fields.iter().map(|f| format!("{}:{f}", f.len())).collect()
    }

    #[test]
    fn a_notification_of_this_fleet_is_a_written_record() {
        let p = payload(&[
            "public", "shop", "", "pay", "17", "open", "1030", "1000", "2", "web-1", "why", "",
        ]);
        let Some(Event::Written(name, record)) = event_of("public", "shop", &p) else {
            panic!("{p}");
        };
        assert_eq!(name, "pay");
        assert_eq!(record.epoch, 17);
        assert_eq!(record.open_remaining(), Some(Duration::from_millis(30)));
    }

    #[test]
    fn a_family_keys_notification_names_the_key() {
        let p = payload(&[
            "public", "shop", "users", "ann", "17", "closed", "0", "1000", "0", "web-1", "", "",
        ]);
        let Some(Event::Written(name, _)) = event_of("public", "shop", &p) else {
            panic!("{p}");
        };
        assert_eq!(split_key(&name), Some(("users", "ann")));
        let stale = payload(&["public", "shop", "users", "ann"]);
        assert_eq!(
            event_of("public", "shop", &stale),
            Some(Event::Stale(key_name("users", "ann")))
        );
    }

    #[test]
    fn another_schemas_or_prefixs_notification_is_none_and_garbage_is_foreign() {
        let p = payload(&["public", "other", "", "pay"]);
        assert_eq!(event_of("public", "shop", &p), None);
        let p = payload(&["staging", "shop", "", "pay"]);
        assert_eq!(event_of("public", "shop", &p), None);
        assert_eq!(
            event_of("public", "shop", "hello"),
            Some(Event::Foreign(b"hello".to_vec()))
        );
        let cut = payload(&["public", "shop", "", "pay", "17", "sideways"]);
        assert!(matches!(
            event_of("public", "shop", &cut),
            Some(Event::Foreign(_))
        ));
    }

    /// A function of the fleet's dropped under a connection: the operation fails (the store's
    /// failure), and the next one connects again, which makes the function again.
    #[test]
    fn a_function_dropped_under_the_connection_is_made_again_by_the_next_one() {
        let Some(url) = crate::store::conformance::postgres_url() else {
            return;
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let schema = format!("dropped_{}", std::process::id());
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                tokio::spawn(connection);
                client
                    .batch_execute(&format!(
                        "drop schema if exists {schema} cascade; create schema {schema}"
                    ))
                    .await
                    .unwrap();
                let sep = if url.contains('?') { '&' } else { '?' };
                let config = crate::store::conformance::patient(
                    &format!("{url}{sep}options=-csearch_path%3D{schema}"),
                    "breakerbox",
                );
                let (mut store, _) = postgres_store(&config).unwrap();
                let change = |seen| Change {
                    force: false,
                    seen,
                    state: breakerbox_runtime::State::Open,
                    open_ms: 60_000,
                    reopens: 0,
                    reason: "tripped".to_owned(),
                    last_failure: String::new(),
                    instance: "a".to_owned(),
                    life: None,
                };
                let first = store.write("pay".to_owned(), change(0)).await.unwrap();
                client
                    .batch_execute(&format!("drop function {schema}.breakerbox_fleet_write"))
                    .await
                    .unwrap();
                let failed = store.write("pay".to_owned(), change(first.epoch)).await;
                assert!(matches!(failed, Err(StoreError::Failed(_))), "{failed:?}");
                let again = store
                    .write("pay".to_owned(), change(first.epoch))
                    .await
                    .unwrap();
                assert!(again.changed && again.epoch > first.epoch, "{again:?}");
                client
                    .batch_execute(&format!("drop schema {schema} cascade"))
                    .await
                    .unwrap();
            });
    }

    /// A record too long for a notification (a reason of 9 000 bytes) is sent as its name, to
    /// read again; read, it is whole.
    #[test]
    fn a_record_too_long_for_a_notification_is_sent_as_its_name() {
        let Some(url) = crate::store::conformance::postgres_url() else {
            return;
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let prefix = format!("long-{}", std::process::id());
                let config = crate::store::conformance::patient(&url, &prefix);
                let (mut here, _) = postgres_store(&config).unwrap();
                let (mut there, mut feed) = postgres_store(&config).unwrap();
                there.follow().await.unwrap();
                let change = Change {
                    force: true,
                    seen: 0,
                    state: breakerbox_runtime::State::Open,
                    open_ms: 60_000,
                    reopens: 0,
                    reason: "r".repeat(9_000),
                    last_failure: String::new(),
                    instance: "a".to_owned(),
                    life: None,
                };
                let written = here.write("pay".to_owned(), change).await.unwrap();
                let event = tokio::time::timeout(Duration::from_secs(5), feed.recv())
                    .await
                    .unwrap();
                assert_eq!(event, Some(Event::Stale("pay".to_owned())));
                let read = there.read("pay".to_owned()).await.unwrap();
                assert_eq!(read.epoch, written.epoch);
                assert_eq!(read.reason.len(), 9_000);
            });
    }
}
