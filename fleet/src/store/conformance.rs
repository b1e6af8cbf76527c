//! The conformance suite: each promise of docs/fleet.md's "What is guaranteed" that rests on
//! the store, as a check generic over the store, named after the promise. A backend runs the
//! whole suite with [`conformance!`] and a `run` function that gives each check a [`Backend`]
//! on its real server (here: Redis, and a store that breaks a promise on purpose; `sim/` runs
//! it against the simulator's model store).

use core::future::Future;
use core::pin::Pin;
use core::time::Duration;

use breakerbox_runtime::State;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc;

use super::{
    Beat, Change, CountBatch, FleetStore, LeaseAsk, Op, OpenKeys, Reads, Report, StoreError,
};
use crate::record::{Record, parse_payload};

/// A store's change feed: the records it publishes, and its connection's losses.
pub(crate) type Feed = mpsc::UnboundedReceiver<PushInfo>;

/// Work on a backend's server, for the suite.
pub(crate) type Work<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// A store's server, as the suite uses it.
pub(crate) trait Backend {
    /// A new store on the server for the records under `prefix`, and its change feed. Two
    /// stores under one prefix are two instances of one fleet.
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed);
    /// Leaves under `name`'s record what no fleet writes there: another application's value.
    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a>;
    /// Lets `d` pass on the store's clock (a real server's clock runs on its own: the suite
    /// waits for it; a model's is advanced).
    fn later(&self, d: Duration) -> Work<'_>;
}

/// A promise's check: `Err` names the promise and says how the store broke it.
pub(crate) type Checked<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + 'a>>;

/// One test per promise, each calling `$run(name, check)`, where `check` is
/// `for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>` (the `&str` a prefix of the test's
/// own).
macro_rules! conformance {
    ($run:path) => {
        $crate::store::conformance::conformance!(@ $run;
            one_write_per_trip,
            manual_control_reaches_every_instance,
            every_change_reaches_every_instance,
            open_times_run_on_the_stores_clock,
            fleet_wide_half_open_grants_at_most_half_open_calls_leases,
            a_written_outcome_ends_the_leases,
            a_lease_ends_on_the_stores_clock,
            fleet_counts_trip_the_fleet,
            a_reset_starts_the_fleet_counts_empty,
            one_records_problem_is_that_records,
            a_batch_of_rereads_gives_each_record_as_it_is,
            a_heartbeat_keeps_an_instance_live_for_its_life,
            a_quorum_trip_opens_the_record_only_with_enough_live_reports,
            a_family_keys_record_is_listed_open_until_it_closes_or_expires,
        );
    };
    (@ $run:path; $($promise:ident,)*) => {
        $(
            #[test]
            fn $promise() {
                fn check<'a>(
                    backend: &'a dyn $crate::store::conformance::Backend,
                    prefix: &'a str,
                ) -> $crate::store::conformance::Checked<'a> {
                    Box::pin($crate::store::conformance::promises::$promise(backend, prefix))
                }
                $run(stringify!($promise), check);
            }
        )*
    };
}
pub(crate) use conformance;

/// `op`'s answer within five seconds, or what went wrong.
async fn done<T>(what: &str, op: Op<'_, T>) -> Result<T, String> {
    match tokio::time::timeout(Duration::from_secs(5), op).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(format!("{what}: the store answered {e:?}")),
        Err(_) => Err(format!("{what}: no answer within 5 s")),
    }
}

/// A change to `state` by `instance`: a compare-and-set over `seen`, or forced.
fn change(state: &str, seen: u64, force: bool, open_ms: u64, instance: &str) -> Change {
    Change {
        force,
        seen,
        state: state.to_owned(),
        open_ms,
        reopens: 0,
        reason: format!("{state} by {instance}"),
        last_failure: String::new(),
        instance: instance.to_owned(),
        life: None,
    }
}

/// The next record published on `feed` (skipping what is not a message), within five
/// seconds.
async fn published(feed: &mut Feed) -> Option<(String, Record)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let push = tokio::time::timeout_at(deadline, feed.recv())
            .await
            .ok()??;
        if push.kind != PushKind::Message {
            continue;
        }
        if let [_, Value::BulkString(payload)] = &push.data[..] {
            return parse_payload(payload);
        }
    }
}

/// `Err(promise: why)` unless `ok`.
fn keep(promise: &str, ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(format!("{promise}: {}", why()))
    }
}

/// The checks, one per promise.
pub(crate) mod promises {
    use super::*;

    /// **One write per trip**: of several instances tripping at once over the record they
    /// saw, one writes; the others are answered with its record.
    pub(crate) async fn one_write_per_trip(b: &dyn Backend, prefix: &str) -> Result<(), String> {
        const P: &str = "one write per trip";
        let mut stores: Vec<Box<dyn FleetStore>> = (0..3).map(|_| b.store(prefix).0).collect();
        for round in 0..3 {
            let seen = done("read", stores[0].read("pay".into())).await?.epoch;
            let mut written = Vec::new();
            for (i, store) in stores.iter_mut().enumerate() {
                let state = if round % 2 == 0 { "open" } else { "closed" };
                let c = change(state, seen, false, 60_000, &format!("i{i}"));
                written.push(done("write", store.write("pay".into(), c)).await?);
            }
            let writers = written.iter().filter(|r| r.changed).count();
            keep(P, writers == 1, || {
                format!("round {round}: {writers} of 3 compare-and-sets over epoch {seen} wrote")
            })?;
            let winner = written.iter().find(|r| r.changed).expect("one wrote");
            keep(P, winner.epoch > seen, || {
                format!("a write kept epoch {seen} (now {})", winner.epoch)
            })?;
            for lost in written.iter().filter(|r| !r.changed) {
                keep(P, lost.epoch == winner.epoch, || {
                    format!(
                        "a refused write was answered with epoch {}, not the winner's {}",
                        lost.epoch, winner.epoch
                    )
                })?;
            }
        }
        Ok(())
    }

    /// **Manual control reaches every instance**: a forced change is written whatever the
    /// record holds, and published to every instance.
    pub(crate) async fn manual_control_reaches_every_instance(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "manual control reaches every instance";
        let (mut here, _) = b.store(prefix);
        let (mut there, mut feed) = b.store(prefix);
        done("follow", there.follow()).await?;
        let first = done(
            "write",
            here.write("pay".into(), change("open", 0, false, 60_000, "a")),
        )
        .await?;
        keep(
            P,
            published(&mut feed)
                .await
                .is_some_and(|(_, r)| r.epoch == first.epoch),
            || "the first write was not published".to_owned(),
        )?;
        // Forced over an epoch the writer never saw (stale or made up).
        for (state, seen) in [
            ("forced_open", 0),
            ("disabled", 1),
            ("closed", first.epoch + 7),
        ] {
            let forced = done(
                "force",
                here.write("pay".into(), change(state, seen, true, 0, "a")),
            )
            .await?;
            keep(P, forced.changed, || {
                format!("forcing {state} over epoch {seen} wrote nothing")
            })?;
            let (name, record) = published(&mut feed)
                .await
                .ok_or_else(|| format!("{P}: forcing {state} was not published"))?;
            keep(
                P,
                name == "pay" && record.epoch == forced.epoch && record.state == forced.state,
                || format!("forcing {state} published {name} {record:?}, wrote {forced:?}"),
            )?;
        }
        Ok(())
    }

    /// **Convergence**: every write reaches every instance, published with the record's
    /// fields, and a read gives the last one.
    pub(crate) async fn every_change_reaches_every_instance(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "every change reaches every instance";
        let (mut here, _) = b.store(prefix);
        let (mut there, mut feed) = b.store(prefix);
        done("follow", there.follow()).await?;
        let none = done("read", there.read("pay".into())).await?;
        keep(P, none.epoch == 0 && none.state == State::Closed, || {
            format!("no record reads as {none:?}, not epoch 0 closed")
        })?;
        let mut seen = 0;
        for state in ["open", "closed", "open"] {
            let mut c = change(state, seen, false, 60_000, "web-1");
            c.reopens = 2;
            c.last_failure = "HTTP 503".into();
            let w = done("write", here.write("pay".into(), c)).await?;
            keep(P, w.changed && w.epoch > seen, || {
                format!("writing {state} gave {w:?}")
            })?;
            seen = w.epoch;
            let (name, p) = published(&mut feed)
                .await
                .ok_or_else(|| format!("{P}: writing {state} was not published"))?;
            let r = done("read", there.read("pay".into())).await?;
            for (what, got) in [("published", &p), ("read", &r)] {
                keep(
                    P,
                    name == "pay"
                        && got.epoch == w.epoch
                        && got.state == w.state
                        && got.reopens == 2
                        && got.origin == "web-1"
                        && got.reason == format!("{state} by web-1")
                        && got.last_failure == "HTTP 503"
                        && got.open_until_ms == w.open_until_ms,
                    || format!("{what} {got:?} after writing {w:?}"),
                )?;
            }
        }
        Ok(())
    }

    /// **Open times on the store's clock**: an open record is open until the store's time at
    /// the write plus its open time, and the time left shrinks with the store's clock.
    pub(crate) async fn open_times_run_on_the_stores_clock(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "open times run on the store's clock";
        let (mut s, _) = b.store(prefix);
        let w = done(
            "write",
            s.write("pay".into(), change("open", 0, false, 30_000, "a")),
        )
        .await?;
        keep(P, w.open_until_ms == w.now_ms + 30_000, || {
            format!("open for 30 s at {} until {}", w.now_ms, w.open_until_ms)
        })?;
        b.later(Duration::from_millis(20)).await;
        let r = done("read", s.read("pay".into())).await?;
        let left = r.open_remaining().unwrap_or_default();
        keep(
            P,
            r.now_ms >= w.now_ms + 20 && left <= Duration::from_millis(29_980),
            || format!("20 ms later the store reads {r:?}, {left:?} left"),
        )
    }

    /// An open record's epoch, opened `open_ms` from now.
    async fn opened(s: &mut dyn FleetStore, open_ms: u64) -> Result<u64, String> {
        let seen = done("read", s.read("pay".into())).await?.epoch;
        let w = done(
            "write",
            s.write("pay".into(), change("open", seen, false, open_ms, "a")),
        )
        .await?;
        Ok(w.epoch)
    }

    fn ask(epoch: u64, holder: &str, life_ms: u64) -> LeaseAsk {
        LeaseAsk {
            epoch,
            limit: 2,
            life: Duration::from_millis(life_ms),
            holder: holder.to_owned(),
            fewest: 1,
        }
    }

    /// **Fleet-wide half-open: exactly `half_open_calls` probes**: no lease before the open
    /// time runs out; then at most `half_open_calls` leases at once, fleet-wide; none for an
    /// epoch that is no longer the open record's.
    pub(crate) async fn fleet_wide_half_open_grants_at_most_half_open_calls_leases(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "fleet-wide half-open grants at most half_open_calls leases";
        let mut s: Vec<Box<dyn FleetStore>> = (0..3).map(|_| b.store(prefix).0).collect();
        let epoch = opened(&mut *s[0], 60_000).await?;
        let early = done("lease", s[1].lease("pay".into(), ask(epoch, "b", 60_000))).await?;
        keep(P, early.0 == 0 && early.1 > 0, || {
            format!("before the open time ran out: {early:?}")
        })?;
        let epoch = opened(&mut *s[0], 1).await?;
        b.later(Duration::from_millis(5)).await;
        let mut granted = 0;
        for (i, store) in s.iter_mut().enumerate() {
            let (n, life) = done(
                "lease",
                store.lease("pay".into(), ask(epoch, &format!("h{i}"), 60_000)),
            )
            .await?;
            let ok = if n > 0 {
                life == 60_000
            } else {
                n == 0 && (1..=60_000).contains(&life)
            };
            keep(P, ok, || format!("a lease answer ({n}, {life})"))?;
            granted += n;
        }
        keep(P, granted == 2, || {
            format!("{granted} leases granted with half_open_calls = 2")
        })?;
        let again = done("lease", s[0].lease("pay".into(), ask(epoch, "h0", 60_000))).await?;
        keep(P, again == (2, 60_000), || {
            format!("the holder asking again got {again:?}, not its 2 renewed")
        })?;
        let stale = done(
            "lease",
            s[2].lease("pay".into(), ask(epoch - 1, "h2", 60_000)),
        )
        .await?;
        keep(P, stale == (0, -1), || {
            format!("an ask about another epoch got {stale:?}")
        })
    }

    /// **Fleet-wide half-open**: a probe outcome written (a close or a re-open) drops the
    /// leases of the record before it.
    pub(crate) async fn a_written_outcome_ends_the_leases(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a written outcome ends the leases";
        let (mut s, _) = b.store(prefix);
        let (mut t, _) = b.store(prefix);
        let epoch = opened(&mut *s, 1).await?;
        b.later(Duration::from_millis(5)).await;
        let got = done("lease", s.lease("pay".into(), ask(epoch, "a", 60_000))).await?;
        keep(P, got.0 == 2, || format!("the first ask got {got:?}"))?;
        // A failed probe re-opens it, for a moment.
        let epoch = opened(&mut *t, 1).await?;
        b.later(Duration::from_millis(5)).await;
        let got = done("lease", t.lease("pay".into(), ask(epoch, "b", 60_000))).await?;
        keep(P, got.0 == 2, || {
            format!("after a re-open, another asker got {got:?}: the old leases stayed")
        })
    }

    /// **A lease ends on the store's clock**: once its life has run out, another may have it.
    pub(crate) async fn a_lease_ends_on_the_stores_clock(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a lease ends on the store's clock";
        let (mut s, _) = b.store(prefix);
        let epoch = opened(&mut *s, 1).await?;
        b.later(Duration::from_millis(5)).await;
        let got = done("lease", s.lease("pay".into(), ask(epoch, "a", 50))).await?;
        keep(P, got == (2, 50), || format!("the first ask got {got:?}"))?;
        let wait = done("lease", s.lease("pay".into(), ask(epoch, "b", 50))).await?;
        keep(P, wait.0 == 0 && (1..=50).contains(&wait.1), || {
            format!("while leased: {wait:?}")
        })?;
        b.later(Duration::from_millis(wait.1 as u64 + 5)).await;
        let got = done("lease", s.lease("pay".into(), ask(epoch, "b", 50))).await?;
        keep(P, got.0 == 2, || {
            format!("after the leases' life, another asker got {got:?}")
        })
    }

    fn batch(calls: u64, failures: u64, instance: &str, epoch: u64) -> CountBatch {
        CountBatch {
            calls,
            failures,
            window_ms: 10_000,
            bucket_ms: 1_000,
            min_calls: 10,
            rate: "50".into(),
            open_ms: 30_000,
            instance: instance.to_owned(),
            epoch,
        }
    }

    /// **Fleet-count trips**: three instances each see 4 failures of a 50%-over-10 s breaker
    /// with `min_calls = 10`; the fleet's 12 trip it, and the trip is published.
    pub(crate) async fn fleet_counts_trip_the_fleet(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "fleet counts trip the fleet";
        let mut s: Vec<Box<dyn FleetStore>> = (0..3).map(|_| b.store(prefix).0).collect();
        let (mut watcher, mut feed) = b.store(prefix);
        done("follow", watcher.follow()).await?;
        let mut last = (0, 0, 0);
        for (i, store) in s.iter_mut().enumerate() {
            last = done(
                "count",
                store.count("pay".into(), batch(4, 4, &format!("i{i}"), 0)),
            )
            .await?;
            if i < 2 {
                keep(
                    P,
                    last == (0, 4 * (i as i64 + 1), 4 * (i as i64 + 1)),
                    || format!("after {} batches: {last:?}", i + 1),
                )?;
            }
        }
        keep(P, last == (1, 12, 12), || {
            format!("the third batch gave {last:?}")
        })?;
        let r = done("read", watcher.read("pay".into())).await?;
        keep(
            P,
            r.state == State::Open && r.open_until_ms == r.now_ms.max(r.open_until_ms),
            || format!("after the trip the record is {r:?}"),
        )?;
        let (_, p) = published(&mut feed)
            .await
            .ok_or_else(|| format!("{P}: the trip was not published"))?;
        keep(P, p.epoch == r.epoch && p.state == State::Open, || {
            format!("published {p:?}, read {r:?}")
        })
    }

    /// **Fleet counts belong to one record**: any write of it (a reset too) starts the window
    /// empty, and a batch judged under an older record is dropped.
    pub(crate) async fn a_reset_starts_the_fleet_counts_empty(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a reset starts the fleet counts empty";
        let (mut s, _) = b.store(prefix);
        let got = done("count", s.count("pay".into(), batch(8, 4, "a", 0))).await?;
        keep(P, got == (0, 8, 4), || {
            format!("the first batch gave {got:?}")
        })?;
        let reset = done(
            "force",
            s.write("pay".into(), change("closed", 0, true, 0, "a")),
        )
        .await?;
        let old = done("count", s.count("pay".into(), batch(3, 3, "a", 0))).await?;
        keep(P, old == (0, 0, 0), || {
            format!("a batch of the record before the reset gave {old:?}")
        })?;
        let new = done(
            "count",
            s.count("pay".into(), batch(2, 1, "a", reset.epoch)),
        )
        .await?;
        keep(P, new == (0, 2, 1), || {
            format!("the first batch after the reset gave {new:?}")
        })
    }

    /// **One record's problem is that record's**: another application's value under a
    /// breaker's key is that record's problem (not the store's failure), and every other
    /// record reads and writes as before.
    pub(crate) async fn one_records_problem_is_that_records(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "one record's problem is that record's";
        let (mut s, _) = b.store(prefix);
        b.spoil(prefix, "junk").await;
        let read = s.read("junk".into()).await;
        keep(P, matches!(read, Err(StoreError::Record(_))), || {
            format!("reading it: {read:?}")
        })?;
        let write = s
            .write("junk".into(), change("open", 0, false, 1000, "a"))
            .await;
        keep(P, matches!(write, Err(StoreError::Record(_))), || {
            format!("writing over it: {write:?}")
        })?;
        let w = done(
            "write",
            s.write("pay".into(), change("open", 0, false, 1000, "a")),
        )
        .await?;
        keep(P, w.changed, || format!("another record beside it: {w:?}"))
    }

    /// **Convergence** after lost messages: a batch of re-reads gives each record as it is
    /// (none: epoch 0, closed), another application's value there as that record's problem
    /// only, and the heartbeat sent with it.
    pub(crate) async fn a_batch_of_rereads_gives_each_record_as_it_is(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a batch of re-reads gives each record as it is";
        let (mut s, _) = b.store(prefix);
        let w = done(
            "write",
            s.write("pay".into(), change("open", 0, false, 60_000, "a")),
        )
        .await?;
        b.spoil(prefix, "junk").await;
        let names = ["pay", "none", "junk"].map(str::to_owned).to_vec();
        let beat = Beat {
            instance: "a".into(),
            life: Duration::from_secs(60),
            states: String::new(),
        };
        let reads = done("re-read", s.read_many(names, Some(beat))).await?;
        let [pay, none, junk] = &reads.records[..] else {
            return Err(format!(
                "{P}: {} answers for 3 records",
                reads.records.len()
            ));
        };
        keep(
            P,
            pay.as_ref().is_ok_and(|r| {
                r.epoch == w.epoch && r.state == State::Open && r.open_until_ms == w.open_until_ms
            }),
            || format!("the written record read as {pay:?}, written {w:?}"),
        )?;
        keep(
            P,
            none.as_ref()
                .is_ok_and(|r| r.epoch == 0 && r.state == State::Closed),
            || format!("no record read as {none:?}"),
        )?;
        keep(P, matches!(junk, Err(StoreError::Record(_))), || {
            format!("another application's value read as {junk:?}")
        })?;
        keep(
            P,
            matches!(&reads.beat, Some(Ok(live)) if live.get(1).is_some_and(|i| i == "a")),
            || format!("the beat sent with it gave {:?}", reads.beat),
        )
    }

    /// **Quorum: the live set**: a beat keeps its instance live for its life on the store's
    /// clock, and then no longer.
    pub(crate) async fn a_heartbeat_keeps_an_instance_live_for_its_life(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a heartbeat keeps an instance live for its life";
        let (mut s, _) = b.store(prefix);
        let beat = |instance: &str, life_ms: u64, states: &str| Beat {
            instance: instance.into(),
            life: Duration::from_millis(life_ms),
            states: states.into(),
        };
        done("beat", s.beat(beat("short", 50, "3:pay4:open"))).await?;
        let live = done("beat", s.beat(beat("long", 60_000, ""))).await?;
        let now: u64 = live.first().and_then(|n| n.parse().ok()).unwrap_or(0);
        let listed: Vec<&[String]> = live[1..].chunks(3).collect();
        keep(
            P,
            listed.len() == 2
                && listed.iter().any(|f| {
                    f[0] == "short"
                        && f[2] == "3:pay4:open"
                        && f[1].parse::<u64>().is_ok_and(|e| e > now && e <= now + 50)
                })
                && listed
                    .iter()
                    .any(|f| f[0] == "long" && f[1] == (now + 60_000).to_string()),
            || format!("two beats gave {live:?}"),
        )?;
        b.later(Duration::from_millis(60)).await;
        let live = done("beat", s.beat(beat("long", 60_000, ""))).await?;
        keep(P, live.len() == 4 && live[1] == "long", || {
            format!("after the short beat's life: {live:?}")
        })
    }

    /// **Quorum trips**: a local trip under a quorum is a report; the record opens (one write,
    /// published) only once the open reports of live instances reach the quorum.
    pub(crate) async fn a_quorum_trip_opens_the_record_only_with_enough_live_reports(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a quorum trip opens the record only with enough live reports";
        let (mut s, _) = b.store(prefix);
        let mut live = Vec::new();
        for i in ["a", "b", "c"] {
            live = done(
                "beat",
                s.beat(Beat {
                    instance: i.into(),
                    life: Duration::from_secs(60),
                    states: String::new(),
                }),
            )
            .await?;
        }
        let live: Vec<(String, String)> = live[1..]
            .chunks(3)
            .map(|f| (f[0].clone(), f[1].clone()))
            .collect();
        let report = |instance: &str| Report {
            trip: change("open", 0, false, 30_000, instance),
            quorum: "2".into(),
            live: live.clone(),
        };
        let first = done("report", s.report("pay".into(), report("a"))).await?;
        keep(
            P,
            first.len() == 13
                && first[0] == "0"
                && first[2] == "closed"
                && first[9] == "1"
                && first[10..] == ["1", "2", "3"],
            || format!("the first report gave {first:?}"),
        )?;
        let again = done("report", s.report("pay".into(), report("a"))).await?;
        keep(P, again[0] == "0" && again[10] == "1", || {
            format!("the same instance reporting again gave {again:?}")
        })?;
        let second = done("report", s.report("pay".into(), report("b"))).await?;
        keep(
            P,
            second[0] == "1" && second[2] == "open" && second[10..] == ["2", "2", "3"],
            || format!("the second instance's report gave {second:?}"),
        )?;
        let r = done("read", s.read("pay".into())).await?;
        keep(
            P,
            r.state == State::Open && r.epoch.to_string() == second[1],
            || format!("after the quorum the record is {r:?}"),
        )
    }

    /// **Keyed families**: one record per key, expiring on the store's clock once the key is
    /// closed, and per family the list of the keys not closed, which a re-read reads instead
    /// of every key; an expired key is dropped from the list by a tidy.
    pub(crate) async fn a_family_keys_record_is_listed_open_until_it_closes_or_expires(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a family key's record is listed open until it closes or expires";
        let (mut s, _) = b.store(prefix);
        let k1 = crate::keys::key_name("users", "ann");
        let k2 = crate::keys::key_name("users", "bob");
        let write = |state: &str, seen: u64, life_ms: u64| {
            let mut c = change(state, seen, false, 60_000, "a");
            c.life = Some(Duration::from_millis(life_ms));
            c
        };
        let w1 = done("write", s.write(k1.clone(), write("open", 0, 120_000))).await?;
        done("write", s.write(k2.clone(), write("open", 0, 50))).await?;
        let listed = done(
            "open keys",
            s.open_keys(vec!["users".into(), "nobody".into()]),
        )
        .await?;
        let users = listed.lists.first().cloned().flatten().unwrap_or_default();
        keep(
            P,
            users.len() == 2
                && users
                    .iter()
                    .any(|(k, e)| k == "ann" && *e == (w1.now_ms + 120_000) as f64)
                && listed
                    .lists
                    .get(1)
                    .is_some_and(|l| l.as_ref().is_some_and(Vec::is_empty)),
            || {
                format!(
                    "two open keys listed as {:?} at {}",
                    listed.lists, listed.now_ms
                )
            },
        )?;
        b.later(Duration::from_millis(60)).await;
        let r2 = done("read", s.read(k2.clone())).await?;
        keep(P, r2.epoch == 0, || {
            format!("a key's record past its life reads as {r2:?}")
        })?;
        let listed = done("open keys", s.open_keys(vec!["users".into()])).await?;
        let users = listed.lists.first().cloned().flatten().unwrap_or_default();
        keep(
            P,
            users
                .iter()
                .any(|(k, e)| k == "bob" && *e <= listed.now_ms as f64),
            || format!("an expired key listed as {users:?} at {}", listed.now_ms),
        )?;
        let read = done(
            "tidy",
            s.tidy(vec!["users".into()], listed.now_ms, vec![k1.clone()]),
        )
        .await?;
        keep(
            P,
            matches!(&read[..], [Ok(r)] if r.epoch == w1.epoch),
            || format!("tidy read {read:?}"),
        )?;
        done(
            "write",
            s.write(k1.clone(), write("closed", w1.epoch, 60_000)),
        )
        .await?;
        let listed = done("open keys", s.open_keys(vec!["users".into()])).await?;
        keep(
            P,
            listed
                .lists
                .first()
                .is_some_and(|l| l.as_ref().is_some_and(Vec::is_empty)),
            || format!("after the tidy and the close: {:?}", listed.lists),
        )
    }
}

/// Runs `check` on a fresh tokio runtime (real time), on `backend`.
pub(crate) fn on_runtime(
    name: &str,
    backend: &dyn Backend,
    check: for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>,
) -> Result<(), String> {
    let prefix = format!("conformance-{name}-{}", std::process::id());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(check(backend, &prefix))
}

/// The real Redis at `BREAKERBOX_TEST_REDIS_URL`.
struct RealRedis(String);

impl Backend for RealRedis {
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed) {
        let config = crate::FleetConfig::new(self.0.clone()).prefix(prefix);
        let (wire, feed) = super::production_store(&config).expect("a good URL");
        (Box::new(super::Redis::new(Box::new(wire), prefix)), feed)
    }

    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a> {
        Box::pin(async move {
            let config = crate::FleetConfig::new(self.0.clone()).prefix(prefix);
            let (mut wire, _) = super::production_store(&config).expect("a good URL");
            let key = crate::keys::record_key(prefix, name);
            let set = vec![
                "SET".to_owned(),
                key,
                "left by another application".to_owned(),
            ];
            super::Wire::pipeline(&mut wire, vec![set])
                .await
                .expect("SET");
        })
    }

    fn later(&self, d: Duration) -> Work<'_> {
        // The server's clock runs on its own: real time has to pass for it.
        Box::pin(tokio::time::sleep(d))
    }
}

/// `scripts/test`'s redis-server (`BREAKERBOX_TEST_REDIS_URL`); without one the tests against
/// it are skipped, except under CI (`CI=true`), where they fail.
fn redis_url() -> Option<String> {
    match std::env::var("BREAKERBOX_TEST_REDIS_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!(
                "the store's conformance tests need BREAKERBOX_TEST_REDIS_URL (scripts/test sets it)"
            )
        }
        Err(_) => {
            eprintln!("SKIPPED: no BREAKERBOX_TEST_REDIS_URL");
            None
        }
    }
}

/// Every promise against the real Redis (skipped without `BREAKERBOX_TEST_REDIS_URL`, as
/// `scripts/test` sets it).
fn against_redis(name: &str, check: for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>) {
    let Some(url) = redis_url() else {
        return;
    };
    on_runtime(name, &RealRedis(url), check).unwrap();
}

mod redis_store {
    super::conformance!(super::against_redis);
}

/// A store that breaks one promise on purpose: every compare-and-set is written as if forced
/// (the epoch it was given ignored).
struct IgnoresTheEpoch(Box<dyn FleetStore>);

impl FleetStore for IgnoresTheEpoch {
    fn read(&mut self, name: String) -> Op<'_, Record> {
        self.0.read(name)
    }
    fn write(&mut self, name: String, mut change: Change) -> Op<'_, Record> {
        change.force = true;
        self.0.write(name, change)
    }
    fn lease(&mut self, name: String, ask: LeaseAsk) -> Op<'_, (i64, i64)> {
        self.0.lease(name, ask)
    }
    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, (i64, i64, i64)> {
        self.0.count(name, batch)
    }
    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads> {
        self.0.read_many(names, beat)
    }
    fn report(&mut self, name: String, report: Report) -> Op<'_, Vec<String>> {
        self.0.report(name, report)
    }
    fn beat(&mut self, beat: Beat) -> Op<'_, Vec<String>> {
        self.0.beat(beat)
    }
    fn open_keys(&mut self, families: Vec<String>) -> Op<'_, OpenKeys> {
        self.0.open_keys(families)
    }
    fn tidy(
        &mut self,
        stale: Vec<String>,
        before_ms: u64,
        names: Vec<String>,
    ) -> Op<'_, Vec<Result<Record, StoreError>>> {
        self.0.tidy(stale, before_ms, names)
    }
    fn ping(&mut self) -> Op<'_, ()> {
        self.0.ping()
    }
    fn follow(&mut self) -> Op<'_, ()> {
        self.0.follow()
    }
}

/// `B`'s stores, each ignoring the epoch of a compare-and-set.
pub(crate) struct Broken<B>(pub(crate) B);

impl<B: Backend> Backend for Broken<B> {
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed) {
        let (store, feed) = self.0.store(prefix);
        (Box::new(IgnoresTheEpoch(store)), feed)
    }
    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a> {
        self.0.spoil(prefix, name)
    }
    fn later(&self, d: Duration) -> Work<'_> {
        self.0.later(d)
    }
}

#[test]
fn a_store_that_ignores_the_epoch_fails_one_write_per_trip() {
    let Some(url) = redis_url() else {
        return;
    };
    let broken = Broken(RealRedis(url));
    let failed = on_runtime("broken", &broken, |b, p| {
        Box::pin(promises::one_write_per_trip(b, p))
    })
    .expect_err("a store that ignores the epoch passes no compare-and-set check");
    assert!(
        failed
            .starts_with("one write per trip: round 0: 3 of 3 compare-and-sets over epoch 0 wrote"),
        "{failed}"
    );
}
