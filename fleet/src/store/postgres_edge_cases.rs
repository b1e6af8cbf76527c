//! The PostgreSQL store's edge cases: what Redis takes and PostgreSQL might not, and the
//! database settings a fleet may meet. It checks that
//!
//! - a key longer than a notification can carry is shared, and only that key's feed suffers;
//! - a failure text holding a NUL byte is written, and a name PostgreSQL cannot hold fails
//!   alone in a batch of rereads;
//! - two instances tripping keys of one family at once both write, and a lost compare-and-set
//!   is an answer under any default isolation level of the database;
//! - a records table without its key, or a view in place of a fleet table, is an error naming
//!   it, and a fleet in another schema hears nothing of this one;
//! - a database not in UTF-8 is an error naming its encoding.
//!
//! Each test runs on the real PostgreSQL at `BREAKERBOX_TEST_POSTGRES_URL` (skipped without it,
//! as the conformance suite is), under a prefix, schema or database of its own.

use core::time::Duration;

use breakerbox_runtime::State;
use tokio_postgres::{Client, NoTls};

use super::conformance::postgres_url;
use super::postgres::postgres_store;
use super::{Beat, Change, FleetStore, Report, StoreError};
use crate::FleetConfig;
use crate::config::Quorum;
use crate::keys::key_name;

/// Runs `test` on the URL of the test PostgreSQL, on a fresh current-thread runtime (real
/// time: the server's clock runs on its own); nothing without a URL.
fn on_postgres<F: core::future::Future<Output = ()>>(test: impl FnOnce(String) -> F) {
    let Some(url) = postgres_url() else {
        return;
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(test(url));
}

/// A store at `url` for the records under `prefix`; each operation bounded by five seconds,
/// longer than the server's own deadlock check (one second).
fn store(url: &str, prefix: &str) -> Box<dyn FleetStore> {
    let config = FleetConfig::new(url.to_owned())
        .prefix(prefix)
        .timeout(Duration::from_secs(5));
    let (store, _feed) = postgres_store(&config).expect("a good URL");
    Box::new(store)
}

/// A plain connection to `url`, for what no fleet does.
async fn client(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .expect("PostgreSQL answers");
    tokio::spawn(connection);
    client
}

/// The URL of database `name` on the server of `url`, the database made (`create database
/// {name} {options}`) if it is not there yet.
async fn database(admin: &Client, url: &str, name: &str, options: &str) -> String {
    let exists = admin
        .query_opt("select 1 from pg_database where datname = $1", &[&name])
        .await
        .unwrap()
        .is_some();
    if !exists {
        admin
            .batch_execute(&format!("create database {name} {options}"))
            .await
            .unwrap();
    }
    let (base, _) = url.rsplit_once('/').expect("a URL with a database");
    format!("{base}/{name}")
}

/// The URL of a schema `name` made afresh on the server of `url` (anything of that name
/// dropped first) holding `objects` (statements that name the schema themselves).
async fn fresh_schema(url: &str, name: &str, objects: &str) -> String {
    client(url)
        .await
        .batch_execute(&format!(
            "drop schema if exists {name} cascade; create schema {name}; {objects}"
        ))
        .await
        .unwrap();
    in_schema(url, name)
}

/// `url` with `schema` as its connections' search path (as docs/fleet.md has it).
fn in_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-csearch_path%3D{schema}")
}

/// A prefix of the test's own.
fn prefix(test: &str) -> String {
    format!("edge-{test}-{}", std::process::id())
}

/// A trip over no record (a compare-and-set over epoch 0) by `instance`, failing with
/// `failure`; a family key's with a life in the store.
fn trip(instance: &str, failure: &str, key: bool) -> Change {
    Change {
        force: false,
        seen: 0,
        state: State::Open,
        open_ms: 30_000,
        reopens: 0,
        reason: "tripped".to_owned(),
        last_failure: failure.to_owned(),
        instance: instance.to_owned(),
        life: key.then_some(Duration::from_secs(60)),
    }
}

/// `n` hex digits that PostgreSQL cannot compress (an xorshift's): a key as long as a URL with
/// a token, or a request's header, may be.
fn noise(n: usize) -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap()
        })
        .collect()
}

/// How many rows of open key `key` under `prefix` the table holds, expired or not.
async fn open_key_rows(client: &Client, prefix: &str, key: &str) -> i64 {
    client
        .query_one(
            "select count(*) from breakerbox_fleet_open_keys where prefix = $1 and key = $2",
            &[&prefix, &key],
        )
        .await
        .unwrap()
        .get(0)
}

/// Waits until `n` of the fleet's writes in this database wait on a lock in the server
/// (polling the server, a round trip each time; no sleep).
async fn blocked(client: &Client, n: i64) {
    loop {
        let row = client
            .query_one(
                "select count(*) from pg_stat_activity where application_name = \
                 'breakerbox-fleet' and datname = current_database() and wait_event_type = \
                 'Lock' and query like '%breakerbox_fleet_write%'",
                &[],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) >= n {
            return;
        }
        tokio::task::yield_now().await;
    }
}

/// A family key's text longer than a btree row may be (2,704 bytes) is stored by Redis; on
/// PostgreSQL a primary key on the text would refuse its row (SQLSTATE 54000), which the store
/// would call a failure of the store: every shared breaker's problem, and since the task stops
/// writing at the first failure of the store and keys sort first, no other pending change
/// written while it is pending. The tables' keys hold the name's MD5: the key is shared as
/// any other, listed among its family's open keys whole. A key whose notification cannot be
/// sent even as its name alone (over 8,000 bytes) is that key's problem, never the store's.
#[test]
fn a_long_key_is_shared_and_one_too_long_to_notify_is_that_keys_problem() {
    on_postgres(|url| async move {
        let prefix = prefix("long-key");
        let mut s = store(&url, &prefix);
        let mut other = store(&url, &prefix);
        let long = noise(3_000);
        let name = key_name("users", &long);
        let written = s.write(name.clone(), trip("web-1", "", true)).await;
        assert!(
            written.as_ref().is_ok_and(|r| r.changed),
            "a long key's trip: {written:?}"
        );
        let read = other
            .read(name.clone())
            .await
            .expect("another instance reads it");
        assert_eq!(
            (read.state, read.origin.as_str()),
            (State::Open, "web-1"),
            "the long key's record, as another instance reads it"
        );
        let open = other
            .open_keys(vec!["users".to_owned()])
            .await
            .expect("the family's open keys");
        assert!(
            open.lists[0]
                .as_ref()
                .is_some_and(|keys| keys.iter().any(|(k, _)| *k == long)),
            "the long key listed whole among its family's open keys"
        );
        // Its probe leases and its counts are rows under the MD5 too.
        let epoch = read.epoch;
        let leased = other
            .lease(
                name.clone(),
                super::LeaseAsk {
                    epoch,
                    limit: 1,
                    life: Duration::from_secs(10),
                    holder: "web-2".to_owned(),
                    fewest: 1,
                },
            )
            .await;
        assert!(
            matches!(leased, Ok(super::Leases::Wait(wait)) if wait > Duration::ZERO),
            "the open record's lease, not yet: {leased:?}"
        );
        let counted = other
            .count(
                name.clone(),
                super::CountBatch {
                    calls: 3,
                    failures: 0,
                    window_ms: 10_000,
                    bucket_ms: 1_000,
                    min_calls: 100,
                    rate: 50,
                    open_ms: 1_000,
                    instance: "web-2".to_owned(),
                    epoch,
                },
            )
            .await;
        assert_eq!(
            counted,
            Ok(super::Counted::new(false, 3, 0)),
            "the long key's counts"
        );
        // A second long key of the family is a record of its own.
        let second = key_name("users", &format!("{long}x"));
        let again = other.read(second).await.expect("a read");
        assert_eq!(again.epoch, 0, "another long key has no record");
        // A name whose short notification (the name alone) is over 8,000 bytes, though it
        // compresses into the row: that record's problem.
        let name = key_name("users", &"ab".repeat(5_000));
        let written = s.write(name, trip("web-1", "", true)).await;
        assert!(
            matches!(written, Err(StoreError::Record(_))),
            "a key too long to notify: {written:?}"
        );
        let payments = s
            .write("payments".to_owned(), trip("web-1", "", false))
            .await;
        assert!(
            payments.as_ref().is_ok_and(|r| r.changed),
            "another breaker's write: {payments:?}"
        );
    });
}

/// Two instances trip two keys of one family whose records have expired (and not yet been
/// swept), while a third write holds an expired open key of that family: each write deletes
/// its own expired record first (`breakerbox_fleet_lock`), then the family's expired open keys,
/// then sweeps the prefix's expired records, the other's among them; so each waits for the
/// other, and PostgreSQL would abort one with "deadlock detected" after a second (SQLSTATE
/// 40P01), which that instance takes for a failure of the store. Redis runs the two scripts
/// one after the other: both trips are written. The sweeps skip what another holds.
#[test]
fn two_instances_tripping_keys_of_one_family_at_once_both_write() {
    on_postgres(|url| async move {
        let prefix = prefix("deadlock");
        let mut a = store(&url, &prefix);
        let mut b = store(&url, &prefix);
        a.ping().await.expect("connects, the tables made");
        b.ping().await.expect("connects");
        let setup = client(&url).await;
        setup
            .batch_execute(&format!(
                "delete from breakerbox_fleet_records where prefix = '{prefix}';
                 delete from breakerbox_fleet_open_keys where prefix = '{prefix}';"
            ))
            .await
            .unwrap();
        // Two expired records of the family's keys, and an expired open key: what a family
        // holds a while after its keys closed, before anything swept it.
        setup
            .execute(
                "insert into breakerbox_fleet_records (prefix, family, name, epoch, state,
                    open_until, reopens, origin, reason, last_failure, changed_at, expires_at)
                 values ($1, 'users', 'ann', 5, 'closed', 0, 0, 'web-9', '', '', 0, 1),
                        ($1, 'users', 'bob', 5, 'closed', 0, 0, 'web-9', '', '', 0, 1)",
                &[&prefix],
            )
            .await
            .unwrap();
        setup
            .execute(
                "insert into breakerbox_fleet_open_keys (prefix, family, key, expires_at)
                 values ($1, 'users', 'cy', 1)",
                &[&prefix],
            )
            .await
            .unwrap();
        // A third write of the family, under way: it holds the expired open key it deletes.
        let mut third = client(&url).await;
        let holding = third.transaction().await.unwrap();
        holding
            .query(
                "select 1 from breakerbox_fleet_open_keys where prefix = $1 and key = 'cy' \
                 for update",
                &[&prefix],
            )
            .await
            .unwrap();
        // Both writes end while the third still holds its row: a sweep waits for no row
        // another holds.
        let (ann, bob) = tokio::join!(
            a.write(key_name("users", "ann"), trip("web-1", "", true)),
            b.write(key_name("users", "bob"), trip("web-2", "", true)),
        );
        holding.commit().await.unwrap();
        assert!(
            ann.as_ref().is_ok_and(|r| r.changed) && bob.as_ref().is_ok_and(|r| r.changed),
            "two trips of two keys over no record: {ann:?}, {bob:?}"
        );
        // What the sweeps skipped, a later write deletes.
        let left = open_key_rows(&setup, &prefix, "cy").await;
        assert_eq!(left, 1, "the key the third held, skipped");
        let later = Change {
            force: true,
            ..trip("web-1", "", true)
        };
        a.write(key_name("users", "ann"), later)
            .await
            .expect("a later write");
        let left = open_key_rows(&setup, &prefix, "cy").await;
        assert_eq!(left, 0, "the expired open key, swept");
    });
}

/// A trip's failure text is the caller's error as it displays; one holding a NUL byte (a
/// binary protocol's message) is stored by Redis, and refused by PostgreSQL's `text`
/// (SQLSTATE 22021), which would make it the record's problem: the trip never shared while
/// the breaker's last failure is that one. The store writes U+FFFD in the NUL's place.
#[test]
fn a_trip_whose_failure_text_holds_a_nul_is_written() {
    on_postgres(|url| async move {
        let prefix = prefix("nul-failure");
        let mut s = store(&url, &prefix);
        let written = s
            .write(
                "payments".to_owned(),
                trip("web-1", "bad frame \0\x01", false),
            )
            .await;
        assert!(
            written.as_ref().is_ok_and(|r| r.changed),
            "a trip over no record: {written:?}"
        );
        let read = s.read("payments".to_owned()).await.expect("the record");
        assert_eq!(
            (read.state, read.last_failure.as_str()),
            (State::Open, "bad frame \u{FFFD}\x01"),
            "the NUL is read back as U+FFFD"
        );
    });
}

/// A quorum of more instances than PostgreSQL's `integer` holds (any `u32` is a valid
/// `quorum`) is every live instance, as on Redis: the one live instance's report opens the
/// record.
#[test]
fn a_quorum_of_more_instances_than_an_integer_holds_is_the_live_instances() {
    on_postgres(|url| async move {
        let prefix = prefix("huge-quorum");
        let mut s = store(&url, &prefix);
        let live = s
            .beat(Beat {
                instance: "web-1".to_owned(),
                life: Duration::from_secs(60),
                states: String::new(),
            })
            .await
            .expect("a beat");
        let live = live
            .instances
            .iter()
            .map(|a| (a.instance.clone(), a.expires_ms))
            .collect();
        let report = Report::new(
            trip("web-1", "HTTP 503", false),
            Quorum::Instances(u32::MAX),
            live,
        );
        let reported = s.report("payments".to_owned(), report).await;
        let reported = reported.expect("a report under a huge quorum is an answer");
        assert!(
            reported.record.changed && reported.record.state == State::Open,
            "one live instance is the quorum: {reported:?}"
        );
        assert_eq!((reported.open, reported.needed, reported.live), (1, 1, 1));
    });
}

/// A batch of re-reads answers each record, one's problem that record's (the conformance
/// suite's promise): on PostgreSQL one name holding a NUL byte (a family key's text is the
/// caller's) would fail the whole batch's one statement, which the task takes for a failure
/// of the store. Such a name is that record's problem alone, in a batch and in a write.
#[test]
fn a_batch_of_rereads_with_a_name_postgres_cannot_hold_answers_the_others() {
    on_postgres(|url| async move {
        let prefix = prefix("nul-batch");
        let mut s = store(&url, &prefix);
        let reads = s
            .read_many(vec!["payments".to_owned(), key_name("users", "a\0b")], None)
            .await;
        let first = reads.as_ref().ok().and_then(|r| r.records.first());
        assert!(
            first.is_some_and(Result::is_ok),
            "the good record of the batch: {reads:?}"
        );
        let second = reads.as_ref().ok().and_then(|r| r.records.get(1));
        assert!(
            matches!(second, Some(Err(StoreError::Record(_)))),
            "the name with a NUL, that record's problem: {reads:?}"
        );
        let written = s
            .write(key_name("users", "a\0b"), trip("web-1", "", true))
            .await;
        assert!(
            matches!(written, Err(StoreError::Record(_))),
            "a write of it, that record's problem: {written:?}"
        );
    });
}

/// A database whose default isolation is `repeatable read` (a DBA's setting, `ALTER DATABASE
/// … SET default_transaction_isolation`): under it a compare-and-set that loses a race would
/// take its snapshot before the record's advisory lock and fail with "could not serialize
/// access" (SQLSTATE 40001), a failure of the store, where Redis answers the record as it is,
/// not changed. The store sets `read committed` on its own connection, so the lost
/// compare-and-set is answered with the record that won.
#[test]
fn a_lost_compare_and_set_is_an_answer_whatever_the_databases_default_isolation() {
    on_postgres(|url| async move {
        let admin = client(&url).await;
        let url = database(&admin, &url, "breakerbox_edge_rr", "").await;
        admin
            .batch_execute(
                "alter database breakerbox_edge_rr set default_transaction_isolation = \
                 'repeatable read'",
            )
            .await
            .unwrap();
        let prefix = prefix("isolation");
        let mut s = store(&url, &prefix);
        s.ping().await.expect("connects, the tables made");
        let mut other = client(&url).await;
        other
            .execute(
                "delete from breakerbox_fleet_records where prefix = $1",
                &[&prefix],
            )
            .await
            .unwrap();
        // Another instance's trip of the same record, under way (its transaction not ended).
        let theirs = other.transaction().await.unwrap();
        theirs
            .query(
                "select * from breakerbox_fleet_write($1, '', 'payments', false, 0, 'open', \
                 30000, 0, 'tripped', '', 'web-2', null)",
                &[&prefix],
            )
            .await
            .unwrap();
        let watch = client(&url).await;
        let release = async {
            blocked(&watch, 1).await;
            theirs.commit().await.unwrap();
        };
        let (mine, ()) = tokio::join!(
            s.write("payments".to_owned(), trip("web-1", "", false)),
            release
        );
        assert!(
            mine.as_ref()
                .is_ok_and(|r| !r.changed && r.origin == "web-2"),
            "the compare-and-set that lost: {mine:?}"
        );
    });
}

/// A table of the fleet's name with the fleet's columns but without its primary key (made by
/// hand, or by a tool that copies columns only) would let reads succeed while every write
/// failed (SQLSTATE 42P10, no constraint for `on conflict`) as a failure of the store, naming
/// nothing. The check at connection compares the primary key too: the error names the table,
/// at connection and at every operation after.
#[test]
fn a_records_table_without_its_key_is_an_error_naming_it() {
    on_postgres(|url| async move {
        let table = "create table breakerbox_edge_nokey.breakerbox_fleet_records (
            prefix text not null, family text not null, name text not null,
            epoch bigint not null, state text not null, open_until bigint not null,
            reopens bigint not null, origin text not null, reason text not null,
            last_failure text not null, changed_at bigint not null,
            expires_at bigint,
            name_md5 text generated always as (md5(name)) stored not null);";
        let url = fresh_schema(&url, "breakerbox_edge_nokey", table).await;
        let prefix = prefix("no-key");
        let mut s = store(&url, &prefix);
        let pinged = s.ping().await;
        let written = s
            .write("payments".to_owned(), trip("web-1", "", false))
            .await;
        let names_it = |r: Result<(), StoreError>| matches!(r, Err(StoreError::Failed(why)) if why.contains("breakerbox_fleet_records"));
        assert!(
            names_it(pinged.clone()) && names_it(written.clone().map(drop)),
            "at connection: {pinged:?}; a write: {written:?}"
        );
    });
}

/// A view of the fleet's name with the fleet's columns (a DBA's compatibility shim, say)
/// passes a check of columns; the check at connection refuses it, naming it.
#[test]
fn a_view_in_place_of_a_fleet_table_is_an_error_naming_it() {
    on_postgres(|url| async move {
        let view = "create view breakerbox_edge_view.breakerbox_fleet_live as
            select ''::text as prefix, ''::text as instance, 0::bigint as expires_at,
            ''::text as states where false;";
        let url = fresh_schema(&url, "breakerbox_edge_view", view).await;
        let mut s = store(&url, &prefix("view"));
        let pinged = s.ping().await;
        assert!(
            matches!(&pinged, Err(StoreError::Failed(why))
                if why.contains("breakerbox_fleet_live") && why.contains("not a table")),
            "at connection: {pinged:?}"
        );
    });
}

/// Two fleets in two schemas of one database (`?options=-csearch_path%3D…`, as docs/fleet.md
/// has it), under the same prefix (the default one, say): the tables are apart, and every
/// notification goes on the one channel `breakerbox_fleet` of the database; named by prefix
/// alone, each fleet would take on the other's writes as its own records (a trip in one
/// opening the other's breakers). Each notification names its schema too.
#[test]
fn a_fleet_in_another_schema_hears_nothing_of_this_one() {
    on_postgres(|url| async move {
        let admin = client(&url).await;
        admin
            .batch_execute(
                "create schema if not exists breakerbox_edge_staging;
                 create schema if not exists breakerbox_edge_production;",
            )
            .await
            .unwrap();
        let prefix = prefix("schemas");
        let config = |url: String| {
            FleetConfig::new(url)
                .prefix(prefix.as_str())
                .timeout(Duration::from_secs(5))
        };
        let (mut staging, _) =
            postgres_store(&config(in_schema(&url, "breakerbox_edge_staging"))).unwrap();
        let (mut production, mut heard) =
            postgres_store(&config(in_schema(&url, "breakerbox_edge_production"))).unwrap();
        production.follow().await.expect("listens");
        staging
            .write(
                "payments".to_owned(),
                Change {
                    force: true,
                    ..trip("staging-1", "", false)
                },
            )
            .await
            .expect("staging's trip");
        // Production's own write, after: its notification comes after any of staging's.
        production
            .write(
                "own".to_owned(),
                Change {
                    force: true,
                    ..trip("production-1", "", false)
                },
            )
            .await
            .expect("production's write");
        let mut before_own = Vec::new();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(5), heard.recv())
                .await
                .expect("production hears its own write")
                .expect("the feed");
            match event {
                super::Event::Written(name, _) if name == "own" => break,
                super::Event::Lost => {}
                other => before_own.push(other),
            }
        }
        assert!(
            before_own.is_empty(),
            "production heard, from staging's schema: {before_own:?}"
        );
    });
}

/// A database in another encoding than UTF-8 (LATIN1, say: a legacy database the fleet is
/// given a schema in): each field of a notification is sent as `<length>:<text>`, the length
/// counted in the database's bytes, while the client receives the text converted to UTF-8; so
/// a record whose text held a non-ASCII character would no longer parse. The store refuses
/// such a database at connection, with an error that names its encoding.
#[test]
fn a_database_not_in_utf8_is_an_error_naming_its_encoding() {
    on_postgres(|url| async move {
        let admin = client(&url).await;
        let options = "encoding 'LATIN1' lc_collate 'C' lc_ctype 'C' template template0";
        let url = database(&admin, &url, "breakerbox_edge_latin1", options).await;
        let prefix = prefix("latin1");
        let mut s = store(&url, &prefix);
        let pinged = s.ping().await;
        assert!(
            matches!(&pinged, Err(StoreError::Failed(why)) if why.contains("LATIN1") && why.contains("UTF8")),
            "at connection: {pinged:?}"
        );
        let written = s
            .write(
                "payments".to_owned(),
                trip("web-1", "refusé par la banque", false),
            )
            .await;
        assert!(
            matches!(&written, Err(StoreError::Failed(why)) if why.contains("LATIN1")),
            "a write: {written:?}"
        );
    });
}
