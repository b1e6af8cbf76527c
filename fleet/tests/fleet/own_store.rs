//! A store of one's own, through the public API alone (feature `conformance`): a store that
//! counts each operation and each event of its feed and hands them to Redis's store
//! (`store::redis`), as a crate outside this one would write it. It passes the whole
//! conformance suite on a real `redis-server` (and fails it when made to ignore the epoch of a
//! compare-and-set), and a fleet started on it shares a trip with an instance on Redis's own
//! store; wrapped around PostgreSQL's store (`Fleet::store`), it does the same on PostgreSQL.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_fleet::store::conformance::{Backend, Checked, Work, on_runtime, promises};
use breakerbox_fleet::store::{
    self, Beat, Change, CountBatch, Counted, Event, Feed, FleetStore, LeaseAsk, Leases, Live, Op,
    OpenKeys, Reads, Record, Report, Reported, StoreError,
};
use breakerbox_fleet::{Fleet, FleetConfig, FleetError};
use breakerbox_runtime::{Breaker, Config, State};

use crate::servers::poll;
use crate::support::{Redis, shared_redis};

/// How many times each operation was asked for, and how many events each feed delivered, by
/// name (`"write"`, `"event"`…): shared by every store a [`CountingRedis`] made.
#[derive(Clone, Default)]
struct Tally(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Tally {
    fn add(&self, what: &'static str) {
        *self.0.lock().unwrap().entry(what).or_default() += 1;
    }

    fn of(&self, what: &str) -> u64 {
        self.0.lock().unwrap().get(what).copied().unwrap_or(0)
    }

    fn total(&self) -> u64 {
        self.0.lock().unwrap().values().sum()
    }
}

/// A store that counts each operation and hands it to `inner`; with `forces`, every
/// compare-and-set is written as if forced (a store that breaks a promise).
struct Counting<S> {
    inner: S,
    tally: Tally,
    forces: bool,
}

impl<S: FleetStore> FleetStore for Counting<S> {
    fn read(&mut self, name: String) -> Op<'_, Record> {
        self.tally.add("read");
        self.inner.read(name)
    }
    fn write(&mut self, name: String, mut change: Change) -> Op<'_, Record> {
        self.tally.add("write");
        change.force |= self.forces;
        self.inner.write(name, change)
    }
    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, Leases> {
        self.tally.add("lease");
        self.inner.lease(name, ask)
    }
    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, Counted> {
        self.tally.add("count");
        self.inner.count(name, batch)
    }
    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads> {
        self.tally.add("read_many");
        self.inner.read_many(names, beat)
    }
    fn report(&mut self, name: String, report: Report) -> Op<'_, Reported> {
        self.tally.add("report");
        self.inner.report(name, report)
    }
    fn beat(&mut self, beat: Beat) -> Op<'_, Live> {
        self.tally.add("beat");
        self.inner.beat(beat)
    }
    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys> {
        self.tally.add("open_keys");
        self.inner.open_keys(families)
    }
    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>> {
        self.tally.add("tidy");
        self.inner.tidy(stale, before_ms, names)
    }
    fn ping(&mut self) -> Op<'_, ()> {
        self.tally.add("ping");
        self.inner.ping()
    }
    fn follow(&mut self) -> Op<'_, ()> {
        self.tally.add("follow");
        self.inner.follow()
    }
}

/// Redis's store for `config`, counted (see [`counted`]).
fn counting_redis(
    config: &FleetConfig,
    tally: &Tally,
) -> (Counting<impl FleetStore + use<>>, Feed) {
    let (inner, feed) = store::redis(config).expect("a good URL");
    counted(inner, feed, tally)
}

/// `inner` counted, with a feed of its own: a task on the current runtime passes each of
/// `inner_feed`'s events on, counting them, until either end is gone.
fn counted<S: FleetStore>(inner: S, mut inner_feed: Feed, tally: &Tally) -> (Counting<S>, Feed) {
    let (events, feed) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let seen = tally.clone();
    tokio::spawn(async move {
        while let Some(event) = inner_feed.recv().await {
            seen.add("event");
            if matches!(event, Event::Lost) {
                seen.add("lost");
            }
            if events.send(event).is_err() {
                return;
            }
        }
    });
    let store = Counting {
        inner,
        tally: tally.clone(),
        forces: false,
    };
    (store, Feed::new(feed))
}

/// Counted Redis stores on the server `redis`, for the suite.
struct CountingRedis<'a> {
    redis: &'a Redis,
    tally: Tally,
    /// Its stores ignore the epoch of a compare-and-set.
    broken: bool,
}

impl Backend for CountingRedis<'_> {
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed) {
        // Operations may take 5 s: the suite checks answers, not how soon they come.
        let config = FleetConfig::new(self.redis.url())
            .prefix(prefix)
            .timeout(Duration::from_secs(5));
        let (mut store, feed) = counting_redis(&config, &self.tally);
        store.forces = self.broken;
        (Box::new(store), feed)
    }

    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a> {
        // A single breaker's record is the hash `{<prefix>:<name>}` (docs/fleet.md): a string
        // there is another application's.
        self.redis.cli(&[
            "SET",
            &format!("{{{prefix}:{name}}}"),
            "left by another application",
        ]);
        Box::pin(async {})
    }

    fn later(&self, d: Duration) -> Work<'_> {
        // The server's clock runs on its own: real time has to pass for it.
        Box::pin(tokio::time::sleep(d))
    }
}

/// A promise's check against counted Redis stores; each of its operations went through them.
fn against_counting_redis(name: &str, check: for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>) {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("own-store-conformance") else {
        return;
    };
    let backend = CountingRedis {
        redis: &redis,
        tally: Tally::default(),
        broken: false,
    };
    on_runtime(name, &backend, check).unwrap();
    assert!(
        backend.tally.total() > 0,
        "{name}: no operation went through the store of one's own"
    );
}

/// Every promise of the suite, against a store of one's own that hands each operation to
/// Redis's store.
mod conformance {
    breakerbox_fleet::conformance!(super::against_counting_redis);
}

#[test]
fn a_store_of_ones_own_that_ignores_the_epoch_fails_one_write_per_trip() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("own-store-broken") else {
        return;
    };
    let backend = CountingRedis {
        redis: &redis,
        tally: Tally::default(),
        broken: true,
    };
    let failed = on_runtime("own-store-broken", &backend, |b, p| {
        Box::pin(promises::one_write_per_trip(b, p))
    })
    .expect_err("a store that ignores the epoch passes no compare-and-set check");
    assert!(
        failed
            .starts_with("one write per trip: round 0: 3 of 3 compare-and-sets over epoch 0 wrote"),
        "{failed}"
    );
}

/// Opens on one failure, for a minute: a trip stays until something changes it.
fn trip_once() -> Config {
    Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// Two instances sharing the breaker `payments` (one failure opens it for a minute), each
/// resynced once: `own` on the store `make` builds for its config (on the runtime), `plain`
/// on the store its URL names. Fields drop in order: the breakers, the fleets, the runtime.
struct Pair {
    there: Breaker,
    here: Breaker,
    /// Held for its sharing.
    _plain: Fleet,
    own: Fleet,
    /// Held for the fleets' tasks.
    _rt: tokio::runtime::Runtime,
}

fn pair<S: FleetStore>(
    config: impl Fn(&str) -> FleetConfig,
    make: impl FnOnce(&FleetConfig) -> (S, Feed),
) -> Pair {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let own = rt.block_on(async {
        let (store, feed) = make(&config("own"));
        Fleet::connect_with_store(config("own"), store, feed).await
    });
    let own = own.expect("a fleet on the store of one's own");
    let plain = rt
        .block_on(Fleet::connect(config("plain")))
        .expect("a fleet on the URL's store");
    let here = Breaker::new("payments", trip_once());
    let there = Breaker::new("payments", trip_once());
    own.share(&here);
    plain.share(&there);
    rt.block_on(async {
        assert!(own.resync().await && plain.resync().await, "both resynced");
    });
    Pair {
        there,
        here,
        _plain: plain,
        own,
        _rt: rt,
    }
}

#[test]
fn a_fleet_on_a_store_of_ones_own_shares_a_trip_with_an_instance_on_redis() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("own-store") else {
        return;
    };
    let config = |instance: &str| {
        FleetConfig::new(redis.url())
            .prefix("own-store")
            .instance(instance)
    };
    let tally = Tally::default();
    let p = pair(config, |config| counting_redis(config, &tally));
    let Pair {
        here, there, own, ..
    } = &p;

    // A trip on the store of one's own reaches the instance on Redis's…
    let _ = here.call(|| Err::<(), _>("boom"));
    assert_eq!(here.state(), State::Open);
    poll(
        "the trip at the other instance",
        Duration::from_secs(5),
        || there.state() == State::Open,
    );
    assert!(tally.of("write") > 0, "the trip was written through it");
    assert_eq!(redis.hget("{own-store:payments}", "origin"), "own");

    // …and a reset there comes back through its feed.
    there.reset();
    poll(
        "the reset at the own store's instance",
        Duration::from_secs(5),
        || here.state() == State::Closed,
    );
    assert!(tally.of("event") > 0, "the reset arrived on its feed");
    let status = own.status();
    assert!(status.connected && status.pushed >= 1, "{status:?}");
    assert_eq!(own.config().get_url(), redis.url());
}

#[test]
fn a_store_that_does_not_answer_is_an_error_of_connect_with_store_naming_the_url() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Nothing listens on port 1.
    let config =
        FleetConfig::new("redis://fleet:s3cret@127.0.0.1:1/").timeout(Duration::from_millis(100));
    let tally = Tally::default();
    let e = rt
        .block_on(async {
            let (store, feed) = counting_redis(&config, &tally);
            Fleet::connect_with_store(config.clone(), store, feed).await
        })
        .unwrap_err();
    assert!(
        matches!(&e, FleetError::Store { url, .. } if url == "redis://fleet:***@127.0.0.1:1/"),
        "{e}"
    );
    assert!(tally.of("ping") >= 1, "the store was pinged");
}

#[test]
fn start_with_store_checks_the_share_patterns_as_start_does() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let config = FleetConfig::new("redis://127.0.0.1:1/").share("own-store-names-nothing*");
    let (store, feed) = counting_redis(&config, &Tally::default());
    let e = Fleet::start_with_store(config, store, feed).unwrap_err();
    assert!(
        matches!(&e, FleetError::ShareMatchesNothing { pattern } if pattern == "own-store-names-nothing*"),
        "{e}"
    );
}

/// The store the URL names, wrapped: on PostgreSQL, a fleet on its store (`Fleet::store`)
/// counted by a store of one's own shares a trip with an instance on PostgreSQL's own, and
/// takes a reset back through its feed.
#[cfg(feature = "postgres")]
#[test]
fn a_fleet_on_a_wrapped_postgres_store_shares_a_trip_with_an_instance_on_postgres() {
    let Some(bin) = crate::postgres::postgres_bin() else {
        return;
    };
    let _shared = crate::support::shared();
    let (url, _own) = crate::postgres::shared_postgres(&bin);
    let prefix = format!("own-store-pg-{}", std::process::id());
    let config = |instance: &str| {
        FleetConfig::new(url.clone())
            .prefix(prefix.as_str())
            .instance(instance)
    };
    let tally = Tally::default();
    let p = pair(config, |config| {
        let (inner, feed) = Fleet::store(config).expect("a PostgreSQL URL");
        counted(inner, feed, &tally)
    });
    let Pair { here, there, .. } = &p;

    let _ = here.call(|| Err::<(), _>("boom"));
    assert_eq!(here.state(), State::Open);
    poll(
        "the trip at the other instance",
        Duration::from_secs(5),
        || there.state() == State::Open,
    );
    assert!(tally.of("write") > 0, "the trip was written through it");

    there.reset();
    poll(
        "the reset at the wrapped store's instance",
        Duration::from_secs(5),
        || here.state() == State::Closed,
    );
    assert!(tally.of("event") > 0, "the reset arrived on its feed");
}

/// How often a [`Panicking`] store panicked, by where.
#[derive(Clone, Default)]
struct Panics {
    made: Arc<std::sync::atomic::AtomicU64>,
    polled: Arc<std::sync::atomic::AtomicU64>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
}

impl Panics {
    fn count(counter: &std::sync::atomic::AtomicU64) -> u64 {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
    }

    fn of(counter: &std::sync::atomic::AtomicU64) -> u64 {
        counter.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A store that panics while `on`: in making its first write (the later ones are written);
/// and for batches of re-reads, in turn, in polling one, or in dropping one that never
/// answers (the fleet drops it at its timeout).
struct Panicking<S> {
    inner: S,
    on: Arc<std::sync::atomic::AtomicBool>,
    panics: Panics,
    rereads: u64,
}

/// A batch of re-reads that never answers and panics when dropped.
struct HangsThenPanicsOnDrop(Panics);

impl std::future::Future for HangsThenPanicsOnDrop {
    type Output = Result<Reads, StoreError>;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::task::Poll::Pending
    }
}

impl Drop for HangsThenPanicsOnDrop {
    fn drop(&mut self) {
        Panics::count(&self.0.dropped);
        panic!("the store's re-reads panic when dropped");
    }
}

impl<S: FleetStore> Panicking<S> {
    fn on(&self) -> bool {
        self.on.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl<S: FleetStore> FleetStore for Panicking<S> {
    fn read(&mut self, name: String) -> Op<'_, Record> {
        self.inner.read(name)
    }
    fn write(&mut self, name: String, change: Change) -> Op<'_, Record> {
        if self.on() && Panics::of(&self.panics.made) == 0 {
            Panics::count(&self.panics.made);
            panic!("the store's write panics");
        }
        self.inner.write(name, change)
    }
    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, Leases> {
        self.inner.lease(name, ask)
    }
    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, Counted> {
        self.inner.count(name, batch)
    }
    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads> {
        if !self.on() {
            return self.inner.read_many(names, beat);
        }
        self.rereads += 1;
        let panics = self.panics.clone();
        if self.rereads.is_multiple_of(2) {
            return Box::pin(HangsThenPanicsOnDrop(panics));
        }
        Box::pin(async move {
            Panics::count(&panics.polled);
            panic!("the store's re-reads panic when polled");
        })
    }
    fn report(&mut self, name: String, report: Report) -> Op<'_, Reported> {
        self.inner.report(name, report)
    }
    fn beat(&mut self, beat: Beat) -> Op<'_, Live> {
        self.inner.beat(beat)
    }
    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys> {
        self.inner.open_keys(families)
    }
    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>> {
        self.inner.tidy(stale, before_ms, names)
    }
    fn ping(&mut self) -> Op<'_, ()> {
        self.inner.ping()
    }
    fn follow(&mut self) -> Op<'_, ()> {
        self.inner.follow()
    }
}

/// A store of one's own that panics (making an operation, polling it, or dropping it) fails
/// that operation, as a store error: the fleet's task goes on, the breaker decides locally
/// meanwhile, its trip is written once a write goes through, and it takes on a reset made
/// elsewhere once the store stops panicking.
#[test]
fn a_store_that_panics_fails_its_operations_and_the_fleet_goes_on() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("own-store-panics") else {
        return;
    };
    let config = |instance: &str| {
        FleetConfig::new(redis.url())
            .prefix("own-store-panics")
            .instance(instance)
            .resync_every(Duration::from_millis(100))
            .timeout(Duration::from_millis(100))
    };
    let on = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let panics = Panics::default();
    let p = pair(config, |config| {
        let (inner, feed) = store::redis(config).expect("a good URL");
        let store = Panicking {
            inner,
            on: on.clone(),
            panics: panics.clone(),
            rereads: 0,
        };
        (store, feed)
    });
    let Pair {
        here, there, own, ..
    } = &p;

    on.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = here.call(|| Err::<(), _>("boom"));
    assert_eq!(here.state(), State::Open, "it decides locally");
    // The first write panics; the next one writes the trip.
    poll(
        "the trip at the other instance",
        Duration::from_secs(5),
        || there.state() == State::Open,
    );
    assert_eq!(Panics::of(&panics.made), 1);
    assert_eq!(redis.hget("{own-store-panics:payments}", "origin"), "own");
    // Re-reads panic when polled, and hang and panic when dropped at the timeout. A panic is
    // counted here before the fleet's task catches it and counts its store error, so the wait
    // is for both.
    poll(
        "re-reads panicking when polled and when dropped, each a store error",
        Duration::from_secs(5),
        || {
            Panics::of(&panics.polled) >= 2
                && Panics::of(&panics.dropped) >= 2
                && own.status().store_errors >= 5
        },
    );

    // The task went on: once the store stops panicking, a reset elsewhere reaches it.
    on.store(false, std::sync::atomic::Ordering::SeqCst);
    there.reset();
    poll(
        "the reset at the panicking store's instance",
        Duration::from_secs(5),
        || here.state() == State::Closed,
    );
}

/// A store of one's own whose change feed closes (the task passing its events on ended): the
/// fleet says so, as a store error, and goes on; other instances' changes arrive by the
/// periodic re-reads, and its own changes are written as before.
#[test]
fn a_store_whose_feed_closes_is_read_again_every_resync_and_says_so() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("own-store-feed") else {
        return;
    };
    let config = |instance: &str| {
        FleetConfig::new(redis.url())
            .prefix("own-store-feed")
            .instance(instance)
            .resync_every(Duration::from_millis(200))
    };
    let p = pair(config, |config| {
        let (inner, _redis_feed) = store::redis(config).expect("a good URL");
        let (sender, events) = tokio::sync::mpsc::unbounded_channel::<Event>();
        drop(sender);
        (inner, Feed::new(events))
    });
    let Pair {
        here, there, own, ..
    } = &p;
    // The task finds the feed closed when it next looks at it, which may be after the resync
    // was answered: waited for.
    poll(
        "the closed feed said, as a store error",
        Duration::from_secs(5),
        || {
            let status = own.status();
            status.store_errors >= 1
                && status
                    .last_error
                    .as_deref()
                    .is_some_and(|e| e.starts_with("the store's change feed closed"))
        },
    );

    // A trip elsewhere arrives by a re-read; a reset here is written and shared.
    let _ = there.call(|| Err::<(), _>("boom"));
    poll("the trip, by a re-read", Duration::from_secs(5), || {
        here.state() == State::Open
    });
    here.reset();
    poll(
        "the reset at the other instance",
        Duration::from_secs(5),
        || there.state() == State::Closed,
    );
}

/// A store's own tests build the fleet's requests with their constructors and drive it
/// directly: a compare-and-set opens the record, a lease ask before its open time ran out
/// waits, a count batch over the open record is counted and writes nothing, a beat lists the
/// instance, and a report over a record no longer closed is not taken.
#[test]
fn a_stores_own_tests_build_the_fleets_requests() {
    let _shared = crate::support::shared();
    let Some(redis) = shared_redis("own-store-requests") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = FleetConfig::new(redis.url()).prefix("own-store-requests");
        let (mut store, _feed) = store::redis(&config).expect("a good URL");
        let mut open = Change::new(State::Open, 0, "unit");
        open.open_ms = 60_000;
        let written = store.write("pay".into(), open.clone()).await.unwrap();
        assert!(
            written.changed && written.state == State::Open,
            "{written:?}"
        );
        assert_eq!(written.origin, "unit");

        let ask = LeaseAsk::new(written.epoch, 1, Duration::from_secs(1), "unit@1");
        let leases = store.lease("pay".into(), ask).await.unwrap();
        assert!(matches!(leases, Leases::Wait(_)), "{leases:?}");

        let mut batch = CountBatch::new(10, 10, "unit", written.epoch);
        batch.min_calls = 5;
        let counted = store.count("pay".into(), batch).await.unwrap();
        assert!(
            !counted.tripped && (counted.calls, counted.failures) == (10, 10),
            "{counted:?}"
        );
        let after = store.read("pay".into()).await.unwrap();
        assert_eq!(
            after.epoch, written.epoch,
            "the open record is not written again"
        );

        let live = store
            .beat(Beat::new("unit", Duration::from_secs(5)))
            .await
            .unwrap();
        assert!(
            live.instances.iter().any(|a| a.instance == "unit"),
            "{live:?}"
        );

        // Over epoch 0, no longer the record's: not taken.
        let report = Report::new(open, breakerbox_fleet::Quorum::Instances(2), Vec::new());
        let reported = store.report("pay".into(), report).await.unwrap();
        assert!(!reported.taken, "{reported:?}");
        assert_eq!(reported.record.epoch, written.epoch);
    });
}
