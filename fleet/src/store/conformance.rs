//! The conformance suite: each promise of `docs/fleet.md`'s "What is guaranteed" that rests on
//! the store, and each rule of [`FleetStore`]'s operations those promises rest on (leases,
//! counts, quorum reports, tidying), as a check generic over the store, named after the
//! promise (feature `conformance`). A store passes it before a fleet runs on it: the fleet's
//! other promises (calls never wait, local breaking goes on, the store policy) rest on the
//! fleet's task, which is the same for every store.
//!
//! A store's [`Backend`] makes stores on one server (two stores of one prefix are two
//! instances of one fleet), leaves another application's value under a record's name, and
//! lets the store's clock run. [`conformance!`](crate::conformance) makes one `#[test]` per
//! promise, each calling a function of yours with the promise's name and its check, which
//! runs it (on a runtime of its own: [`on_runtime`]):
//!
//! ```ignore
//! use breakerbox_fleet::store::conformance::{Backend, Checked, Work, on_runtime};
//! use breakerbox_fleet::store::{Feed, FleetStore};
//!
//! struct MyServer { /* a connection to the server the tests use */ }
//!
//! impl Backend for MyServer {
//!     fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed) { /* a new store */ }
//!     fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a> { /* … */ }
//!     fn later(&self, d: std::time::Duration) -> Work<'_> {
//!         Box::pin(tokio::time::sleep(d)) // a real server's clock runs on its own
//!     }
//! }
//!
//! fn against_my_server(name: &str, check: for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>) {
//!     on_runtime(name, &MyServer::new(), check).unwrap();
//! }
//!
//! breakerbox_fleet::conformance!(against_my_server);
//! ```
//!
//! The crate runs the suite against Redis and PostgreSQL (their real servers), and against
//! the simulator's model store.

use core::future::Future;
use core::pin::Pin;
use core::time::Duration;

use breakerbox_runtime::State;

pub(crate) use super::Feed;
use super::{
    Beat, Change, CountBatch, Counted, Event, FleetStore, LeaseAsk, Leases, Live, Op, Record,
    Report, Reported, StoreError,
};
#[cfg(test)]
use super::{OpenKeys, Reads};
use crate::config::Quorum;

/// Work on a backend's server, for the suite: a boxed future, not `Send` (the suite runs on
/// one thread).
pub type Work<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// A store's server, as the suite uses it.
pub trait Backend {
    /// A new store on the server for the records under `prefix`, and its change feed, not
    /// connected yet (as a fleet is given it). Two stores under one prefix are two instances
    /// of one fleet; stores under another prefix share nothing with them.
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed);
    /// Leaves under `name`'s record (of `prefix`) what no fleet writes there: another
    /// application's value, which the store must answer as that record's problem
    /// ([`StoreError::Record`]).
    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a>;
    /// Lets `d` pass on the store's clock (a real server's clock runs on its own: the suite
    /// waits for it, `tokio::time::sleep`; a model's is advanced).
    fn later(&self, d: Duration) -> Work<'_>;
}

/// A promise's check: `Err` names the promise and says how the store broke it.
pub type Checked<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + 'a>>;

/// One `#[test]` per promise of the store conformance suite
/// ([`store::conformance`](crate::store::conformance), feature `conformance`), each named
/// after its promise and calling `$run(name, check)`, where `$run` is a path to a function of
/// yours and `check` is a
/// `for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>` (the `&str` a prefix for the test's
/// records, which `$run` chooses: one of its own per test, as
/// [`on_runtime`](crate::store::conformance::on_runtime) does). `$run` runs the check against
/// its [`Backend`](crate::store::conformance::Backend) and fails on an `Err`.
///
/// ```ignore
/// fn against_my_store(
///     name: &str,
///     check: for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>,
/// ) {
///     on_runtime(name, &MyServer::new(), check).unwrap();
/// }
///
/// breakerbox_fleet::conformance!(against_my_store);
/// ```
#[macro_export]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
macro_rules! conformance {
    ($run:path) => {
        $crate::conformance!(@ $run;
            one_write_per_trip,
            manual_control_reaches_every_instance,
            every_change_reaches_every_instance,
            open_times_run_on_the_stores_clock,
            fleet_wide_half_open_grants_at_most_half_open_calls_leases,
            a_written_outcome_ends_the_leases,
            a_lease_ends_on_the_stores_clock,
            a_lease_ask_gets_every_free_lease_at_least_fewest_or_its_own_renewed,
            fleet_counts_trip_the_fleet,
            a_reset_starts_the_fleet_counts_empty,
            fleet_counts_trip_at_min_calls_and_the_rate_not_below,
            fleet_counts_leave_the_window_on_the_stores_clock,
            one_records_problem_is_that_records,
            a_batch_of_rereads_gives_each_record_as_it_is,
            a_heartbeat_keeps_an_instance_live_for_its_life,
            a_quorum_trip_opens_the_record_only_with_enough_live_reports,
            a_quorum_report_counts_only_for_its_open_time_and_its_record,
            only_live_instances_reports_count_toward_a_quorum,
            a_family_keys_record_is_listed_open_until_it_closes_or_expires,
            a_tidy_drops_only_expired_keys_and_reads_each_record_as_it_is,
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
#[cfg(test)]
pub(crate) use crate::conformance;

/// `op`'s answer, an error included, within five seconds; else that it gave none.
async fn answer<T>(what: &str, op: Op<'_, T>) -> Result<Result<T, StoreError>, String> {
    tokio::time::timeout(Duration::from_secs(5), op)
        .await
        .map_err(|_| format!("{what}: no answer within 5 s"))
}

/// `op`'s answer within five seconds, or what went wrong.
async fn done<T>(what: &str, op: Op<'_, T>) -> Result<T, String> {
    match tokio::time::timeout(Duration::from_secs(5), op).await {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(format!("{what}: the store answered {e:?}")),
        Err(_) => Err(format!("{what}: no answer within 5 s")),
    }
}

/// A change to `state` (as a record names it) by `instance`: a compare-and-set over `seen`, or
/// forced.
fn change(state: &str, seen: u64, force: bool, open_ms: u64, instance: &str) -> Change {
    Change {
        force,
        seen,
        state: match state {
            "open" => State::Open,
            "forced_open" => State::ForcedOpen,
            "disabled" => State::Disabled,
            _ => State::Closed,
        },
        open_ms,
        reopens: 0,
        reason: format!("{state} by {instance}"),
        last_failure: String::new(),
        instance: instance.to_owned(),
        life: None,
    }
}

/// The next record written on `feed` (skipping the connection's losses), within five
/// seconds; `None` for none, or for a message that is not a record.
async fn published(feed: &mut Feed) -> Option<(String, Record)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(deadline, feed.recv())
            .await
            .ok()??
        {
            Event::Written(name, record) => return Some((name, record)),
            Event::Lost => continue,
            Event::Stale(_) | Event::Foreign(_) => return None,
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

/// The checks, one per promise, each named after it: what [`conformance!`](crate::conformance)
/// runs, to call one at a time. Each takes a backend and a prefix for its records (fresh: a
/// check reads what it did not write as left by another run), and answers `Err` naming the
/// promise and how the store broke it.
pub mod promises {
    use super::*;

    /// **One write per trip**: of several instances tripping at once over the record they
    /// saw, one writes (its epoch greater than the last and at least the store's time); the
    /// others are answered with its record.
    pub async fn one_write_per_trip(b: &dyn Backend, prefix: &str) -> Result<(), String> {
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
            // At least the store's time: a record written again after it vanished is newer
            // than any it replaced.
            keep(P, winner.epoch >= winner.now_ms, || {
                format!(
                    "a write's epoch {} is below the store's time {} ms",
                    winner.epoch, winner.now_ms
                )
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
    pub async fn manual_control_reaches_every_instance(
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
    pub async fn every_change_reaches_every_instance(
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
    pub async fn open_times_run_on_the_stores_clock(
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
    pub async fn fleet_wide_half_open_grants_at_most_half_open_calls_leases(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "fleet-wide half-open grants at most half_open_calls leases";
        let mut s: Vec<Box<dyn FleetStore>> = (0..3).map(|_| b.store(prefix).0).collect();
        let epoch = opened(&mut *s[0], 60_000).await?;
        let early = done("lease", s[1].lease("pay".into(), ask(epoch, "b", 60_000))).await?;
        keep(
            P,
            matches!(early, Leases::Wait(w) if w > Duration::ZERO),
            || format!("before the open time ran out: {early:?}"),
        )?;
        let epoch = opened(&mut *s[0], 1).await?;
        b.later(Duration::from_millis(5)).await;
        let mut granted = 0;
        for (i, store) in s.iter_mut().enumerate() {
            let got = done(
                "lease",
                store.lease("pay".into(), ask(epoch, &format!("h{i}"), 60_000)),
            )
            .await?;
            let ok = match got {
                Leases::Granted { count, life } => {
                    granted += count;
                    count > 0 && life == Duration::from_secs(60)
                }
                Leases::Wait(w) => {
                    (Duration::from_millis(1)..=Duration::from_secs(60)).contains(&w)
                }
                Leases::Gone => false,
            };
            keep(P, ok, || format!("a lease answer {got:?}"))?;
        }
        keep(P, granted == 2, || {
            format!("{granted} leases granted with half_open_calls = 2")
        })?;
        let again = done("lease", s[0].lease("pay".into(), ask(epoch, "h0", 60_000))).await?;
        let renewed = Leases::Granted {
            count: 2,
            life: Duration::from_secs(60),
        };
        keep(P, again == renewed, || {
            format!("the holder asking again got {again:?}, not its 2 renewed")
        })?;
        let stale = done(
            "lease",
            s[2].lease("pay".into(), ask(epoch - 1, "h2", 60_000)),
        )
        .await?;
        keep(P, stale == Leases::Gone, || {
            format!("an ask about another epoch got {stale:?}")
        })
    }

    /// **Fleet-wide half-open**: a probe outcome written (a close or a re-open) drops the
    /// leases of the record before it.
    pub async fn a_written_outcome_ends_the_leases(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a written outcome ends the leases";
        let (mut s, _) = b.store(prefix);
        let (mut t, _) = b.store(prefix);
        let epoch = opened(&mut *s, 1).await?;
        b.later(Duration::from_millis(5)).await;
        let got = done("lease", s.lease("pay".into(), ask(epoch, "a", 60_000))).await?;
        let two = |got: Leases| matches!(got, Leases::Granted { count: 2, .. });
        keep(P, two(got), || format!("the first ask got {got:?}"))?;
        // A failed probe re-opens it, for a moment.
        let epoch = opened(&mut *t, 1).await?;
        b.later(Duration::from_millis(5)).await;
        let got = done("lease", t.lease("pay".into(), ask(epoch, "b", 60_000))).await?;
        keep(P, two(got), || {
            format!("after a re-open, another asker got {got:?}: the old leases stayed")
        })
    }

    /// **A lease ends on the store's clock**: once its life has run out, another may have it.
    pub async fn a_lease_ends_on_the_stores_clock(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a lease ends on the store's clock";
        let (mut s, _) = b.store(prefix);
        let epoch = opened(&mut *s, 1).await?;
        b.later(Duration::from_millis(5)).await;
        // Leases of 1 s: the next ask, a round trip later, comes while they are held, even
        // on a slow machine.
        let got = done("lease", s.lease("pay".into(), ask(epoch, "a", 1_000))).await?;
        let granted = Leases::Granted {
            count: 2,
            life: Duration::from_millis(1_000),
        };
        keep(P, got == granted, || format!("the first ask got {got:?}"))?;
        let answer = done("lease", s.lease("pay".into(), ask(epoch, "b", 1_000))).await?;
        let wait = match answer {
            Leases::Wait(w) => w,
            _ => Duration::ZERO,
        };
        keep(
            P,
            (Duration::from_millis(1)..=Duration::from_millis(1_000)).contains(&wait),
            || format!("while leased: {answer:?}"),
        )?;
        b.later(wait + Duration::from_millis(5)).await;
        let got = done("lease", s.lease("pay".into(), ask(epoch, "b", 1_000))).await?;
        keep(P, matches!(got, Leases::Granted { count: 2, .. }), || {
            format!("after the leases' life, another asker got {got:?}")
        })
    }

    /// **Fleet-wide half-open: a lease ask gets every free lease, at least `fewest`, or its
    /// own renewed**: an asker holding no lease is granted every free one if at least its
    /// `fewest` are free (fewer could not close its round), and else is told to wait, at least
    /// 1 ms, while leases are held; a holder asking again gets the leases it holds renewed and
    /// no more, each for a new life from the renewal on the store's clock. Askers differ in
    /// `limit` and `fewest` where instances run different `half_open_calls` and `successes`
    /// (a config being rolled out): the leases held count against each ask's `limit`.
    pub async fn a_lease_ask_gets_every_free_lease_at_least_fewest_or_its_own_renewed(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a lease ask gets every free lease, at least fewest, or its own renewed";
        let mut s: Vec<Box<dyn FleetStore>> = (0..3).map(|_| b.store(prefix).0).collect();
        let epoch = opened(&mut *s[0], 1).await?;
        b.later(Duration::from_millis(5)).await;
        let minute = Duration::from_secs(60);
        let asked = |holder: &str, limit: u32, fewest: u32, life: Duration| LeaseAsk {
            epoch,
            limit,
            life,
            holder: holder.to_owned(),
            fewest,
        };
        let waits = |got: Leases, most: Duration| {
            let waited = Duration::from_millis(1)..=most;
            matches!(got, Leases::Wait(w) if waited.contains(&w))
        };
        let one = done("lease", s[0].lease("pay".into(), asked("a", 1, 1, minute))).await?;
        keep(
            P,
            one == Leases::Granted {
                count: 1,
                life: minute,
            },
            || format!("the first ask, for 1 lease of 1, got {one:?}"),
        )?;
        let few = done("lease", s[1].lease("pay".into(), asked("b", 3, 3, minute))).await?;
        keep(P, waits(few, minute), || {
            format!("with 2 of 3 leases free, an ask for at least 3 got {few:?}")
        })?;
        let two = done("lease", s[2].lease("pay".into(), asked("c", 3, 2, minute))).await?;
        keep(
            P,
            two == Leases::Granted {
                count: 2,
                life: minute,
            },
            || format!("with 2 of 3 leases free, an ask for at least 2 got {two:?}, not the 2"),
        )?;
        let none = done("lease", s[1].lease("pay".into(), asked("b", 3, 1, minute))).await?;
        keep(P, waits(none, minute), || {
            format!("with none of 3 leases free, an ask got {none:?}")
        })?;
        for (i, holder, limit, fewest, held) in [(0, "a", 1, 1, 1), (2, "c", 3, 2, 2)] {
            let again = done(
                "lease",
                s[i].lease("pay".into(), asked(holder, limit, fewest, minute)),
            )
            .await?;
            keep(
                P,
                again
                    == Leases::Granted {
                        count: held,
                        life: minute,
                    },
                || format!("{holder}, holding {held} of {limit}, asking again got {again:?}"),
            )?;
        }

        // A renewal lasts its life from the renewal: 1.6 s after it, leases for 3 s are still
        // held, though 3.2 s have passed since they were first granted. (On a real server the
        // wait is real time: 1.4 s of room for a slow machine's answers.)
        let epoch = done(
            "write",
            s[0].write("renewed".into(), change("open", 0, false, 1, "a")),
        )
        .await?
        .epoch;
        b.later(Duration::from_millis(5)).await;
        let life = Duration::from_secs(3);
        let asked = |holder: &str| LeaseAsk {
            epoch,
            limit: 2,
            life,
            holder: holder.to_owned(),
            fewest: 1,
        };
        let granted = Leases::Granted { count: 2, life };
        let first = done("lease", s[0].lease("renewed".into(), asked("a"))).await?;
        keep(P, first == granted, || {
            format!("the first ask for leases of 3 s got {first:?}")
        })?;
        b.later(Duration::from_millis(1_600)).await;
        let renewed = done("lease", s[0].lease("renewed".into(), asked("a"))).await?;
        keep(P, renewed == granted, || {
            format!("the holder asking again 1.6 s later got {renewed:?}")
        })?;
        b.later(Duration::from_millis(1_600)).await;
        let other = done("lease", s[1].lease("renewed".into(), asked("b"))).await?;
        keep(P, waits(other, life), || {
            format!(
                "1.6 s after the holder renewed its leases for 3 s, another asker got {other:?}: \
                 the renewal did not last its life"
            )
        })
    }

    /// A batch of a breaker tripping at 50% failed over 10 s, from 10 calls, open for 30 s.
    fn batch(calls: u64, failures: u64, instance: &str, epoch: u64) -> CountBatch {
        CountBatch::new(calls, failures, instance, epoch)
    }

    /// **Fleet-count trips**: three instances each see 4 failures of a 50%-over-10 s breaker
    /// with `min_calls = 10`; the fleet's 12 trip it, and the trip is published.
    pub async fn fleet_counts_trip_the_fleet(b: &dyn Backend, prefix: &str) -> Result<(), String> {
        const P: &str = "fleet counts trip the fleet";
        let mut s: Vec<Box<dyn FleetStore>> = (0..3).map(|_| b.store(prefix).0).collect();
        let (mut watcher, mut feed) = b.store(prefix);
        done("follow", watcher.follow()).await?;
        let mut last = Counted::new(false, 0, 0);
        for (i, store) in s.iter_mut().enumerate() {
            last = done(
                "count",
                store.count("pay".into(), batch(4, 4, &format!("i{i}"), 0)),
            )
            .await?;
            if i < 2 {
                keep(
                    P,
                    last == Counted::new(false, 4 * (i as u64 + 1), 4 * (i as u64 + 1)),
                    || format!("after {} batches: {last:?}", i + 1),
                )?;
            }
        }
        keep(P, last == Counted::new(true, 12, 12), || {
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
    pub async fn a_reset_starts_the_fleet_counts_empty(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a reset starts the fleet counts empty";
        let (mut s, _) = b.store(prefix);
        let got = done("count", s.count("pay".into(), batch(8, 4, "a", 0))).await?;
        keep(P, got == Counted::new(false, 8, 4), || {
            format!("the first batch gave {got:?}")
        })?;
        let reset = done(
            "force",
            s.write("pay".into(), change("closed", 0, true, 0, "a")),
        )
        .await?;
        let old = done("count", s.count("pay".into(), batch(3, 3, "a", 0))).await?;
        keep(P, old == Counted::new(false, 0, 0), || {
            format!("a batch of the record before the reset gave {old:?}")
        })?;
        let new = done(
            "count",
            s.count("pay".into(), batch(2, 1, "a", reset.epoch)),
        )
        .await?;
        keep(P, new == Counted::new(false, 2, 1), || {
            format!("the first batch after the reset gave {new:?}")
        })
    }

    /// **Fleet-count trips at the thresholds**: the fleet's window trips the record once its
    /// calls reach `min_calls` and its failure rate reaches `rate`, exactly at either (one call
    /// short of `min_calls`, or a rate below `rate`, trips nothing); and only a closed record:
    /// a batch over a record already open is counted and writes nothing.
    pub async fn fleet_counts_trip_at_min_calls_and_the_rate_not_below(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "fleet counts trip at min_calls and the rate, not below";
        let (mut s, _) = b.store(prefix);
        // `batch`: min_calls = 10, rate = 50%.
        let steps = [
            (
                "few",
                9,
                9,
                Counted::new(false, 9, 9),
                "9 calls, all failed",
            ),
            ("few", 1, 0, Counted::new(true, 10, 9), "the 10th call"),
            (
                "low",
                10,
                4,
                Counted::new(false, 10, 4),
                "10 calls, 40% failed",
            ),
            (
                "low",
                2,
                2,
                Counted::new(true, 12, 6),
                "12 calls, 50% failed",
            ),
        ];
        for (name, calls, failures, expected, what) in steps {
            let got = done(
                "count",
                s.count(name.into(), batch(calls, failures, "a", 0)),
            )
            .await?;
            keep(P, got == expected, || {
                format!("{what}, with min_calls = 10 and rate = 50%, gave {got:?}")
            })?;
        }
        let open = done("read", s.read("low".into())).await?;
        keep(P, open.state == State::Open, || {
            format!("after its trip the record is {open:?}")
        })?;
        let over = done(
            "count",
            s.count("low".into(), batch(10, 10, "a", open.epoch)),
        )
        .await?;
        keep(P, over == Counted::new(false, 10, 10), || {
            format!("10 failed calls counted over the open record gave {over:?}")
        })?;
        let after = done("read", s.read("low".into())).await?;
        keep(P, after.epoch == open.epoch, || {
            format!("a batch over the open record {open:?} wrote {after:?}")
        })
    }

    /// **Fleet counts over a window of the store's clock**: a batch's calls leave the fleet's
    /// window once the window has passed on the store's clock, and a later batch is counted
    /// without them.
    pub async fn fleet_counts_leave_the_window_on_the_stores_clock(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "fleet counts leave the window on the store's clock";
        let (mut s, _) = b.store(prefix);
        let short = CountBatch {
            window_ms: 100,
            bucket_ms: 10,
            ..batch(6, 6, "a", 0)
        };
        let got = done("count", s.count("pay".into(), short.clone())).await?;
        keep(P, got == Counted::new(false, 6, 6), || {
            format!("the first batch gave {got:?}")
        })?;
        b.later(Duration::from_millis(150)).await;
        let got = done("count", s.count("pay".into(), short)).await?;
        keep(P, got == Counted::new(false, 6, 6), || {
            format!(
                "150 ms later, with a window of 100 ms, a batch gave {got:?}: the first batch's \
                 calls were still counted"
            )
        })
    }

    /// **One record's problem is that record's**: another application's value under a
    /// breaker's key is that record's problem (not the store's failure), and every other
    /// record reads and writes as before.
    pub async fn one_records_problem_is_that_records(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "one record's problem is that record's";
        let (mut s, _) = b.store(prefix);
        b.spoil(prefix, "junk").await;
        let read = answer("reading it", s.read("junk".into())).await?;
        keep(P, matches!(read, Err(StoreError::Record(_))), || {
            format!("reading it: {read:?}")
        })?;
        let write = answer(
            "writing over it",
            s.write("junk".into(), change("open", 0, false, 1000, "a")),
        )
        .await?;
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
    pub async fn a_batch_of_rereads_gives_each_record_as_it_is(
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
            matches!(&reads.beat, Some(Ok(live)) if live.instances.first().is_some_and(|i| i.instance == "a")),
            || format!("the beat sent with it gave {:?}", reads.beat),
        )
    }

    /// **Quorum: the live set**: a beat keeps its instance live for its life on the store's
    /// clock, and then no longer.
    pub async fn a_heartbeat_keeps_an_instance_live_for_its_life(
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
        // A short life of 1 s: the next beat, a round trip later, comes within it, even on a
        // slow machine.
        done("beat", s.beat(beat("short", 1_000, "3:pay4:open"))).await?;
        let live = done("beat", s.beat(beat("long", 60_000, ""))).await?;
        let now = live.now_ms;
        let listed = &live.instances;
        keep(
            P,
            listed.len() == 2
                && listed.iter().any(|a| {
                    a.instance == "short"
                        && a.states == "3:pay4:open"
                        && a.expires_ms > now
                        && a.expires_ms <= now + 1_000
                })
                && listed
                    .iter()
                    .any(|a| a.instance == "long" && a.expires_ms == now + 60_000),
            || format!("two beats gave {live:?}"),
        )?;
        b.later(Duration::from_millis(1_100)).await;
        let live = done("beat", s.beat(beat("long", 60_000, ""))).await?;
        keep(
            P,
            live.instances.len() == 1 && live.instances[0].instance == "long",
            || format!("after the short beat's life: {live:?}"),
        )
    }

    /// **Quorum trips**: a local trip under a quorum is a report; the record opens (one write,
    /// published) only once the open reports of live instances reach the quorum.
    pub async fn a_quorum_trip_opens_the_record_only_with_enough_live_reports(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a quorum trip opens the record only with enough live reports";
        let (mut s, _) = b.store(prefix);
        let mut live = Live {
            now_ms: 0,
            instances: Vec::new(),
        };
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
        let live: Vec<(String, u64)> = live
            .instances
            .iter()
            .map(|a| (a.instance.clone(), a.expires_ms))
            .collect();
        let report = |instance: &str| Report {
            trip: change("open", 0, false, 30_000, instance),
            quorum: Quorum::Instances(2),
            live: live.clone(),
        };
        let first = done("report", s.report("pay".into(), report("a"))).await?;
        let tally = |r: &Reported| (r.open, r.needed, r.live);
        keep(
            P,
            !first.record.changed
                && first.record.state == State::Closed
                && first.taken
                && tally(&first) == (1, 2, 3),
            || format!("the first report gave {first:?}"),
        )?;
        let again = done("report", s.report("pay".into(), report("a"))).await?;
        keep(P, !again.record.changed && again.open == 1, || {
            format!("the same instance reporting again gave {again:?}")
        })?;
        let second = done("report", s.report("pay".into(), report("b"))).await?;
        keep(
            P,
            second.record.changed
                && second.record.state == State::Open
                && tally(&second) == (2, 2, 3),
            || format!("the second instance's report gave {second:?}"),
        )?;
        let r = done("read", s.read("pay".into())).await?;
        keep(
            P,
            r.state == State::Open && r.epoch == second.record.epoch,
            || format!("after the quorum the record is {r:?}"),
        )
    }

    /// The live set after each of `beats` (an instance and its beat's life in ms), in order:
    /// as the last beat's answer lists it, each instance with its beat's expiry.
    async fn beaten(
        s: &mut dyn FleetStore,
        beats: &[(&str, u64)],
    ) -> Result<Vec<(String, u64)>, String> {
        let mut live = Vec::new();
        for (instance, life_ms) in beats {
            let beat = Beat::new(*instance, Duration::from_millis(*life_ms));
            live = done("beat", s.beat(beat)).await?.instances;
        }
        Ok(live
            .into_iter()
            .map(|a| (a.instance, a.expires_ms))
            .collect())
    }

    /// A report's answer as `(taken, open, needed, live)`.
    fn tally(r: &Reported) -> (bool, u32, u32, u32) {
        (r.taken, r.open, r.needed, r.live)
    }

    /// **Quorum trips: a report lasts its trip's open time, for its record**: an instance's
    /// open report no longer counts toward the quorum once its open time has passed on the
    /// store's clock (while other reports of the record go on), nor once the record has been
    /// written since (a report counts for the epoch it was made over); a report over a record
    /// written since the reporter saw it is not taken, its tally zeros.
    pub async fn a_quorum_report_counts_only_for_its_open_time_and_its_record(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a quorum report counts only for its open time and its record";
        let (mut s, _) = b.store(prefix);
        let live = beaten(&mut *s, &[("a", 60_000), ("b", 60_000), ("c", 60_000)]).await?;
        let report = |instance: &str, seen: u64, open_ms: u64| Report {
            trip: change("open", seen, false, open_ms, instance),
            quorum: Quorum::Instances(3),
            live: live.clone(),
        };
        let long = done("report", s.report("pay".into(), report("c", 0, 60_000))).await?;
        let short = done("report", s.report("pay".into(), report("a", 0, 50))).await?;
        keep(
            P,
            !short.record.changed
                && tally(&long) == (true, 1, 3, 3)
                && tally(&short) == (true, 2, 3, 3),
            || format!("c's report, open for 60 s, gave {long:?}; a's, open for 50 ms, {short:?}"),
        )?;
        b.later(Duration::from_millis(60)).await;
        let late = done("report", s.report("pay".into(), report("b", 0, 60_000))).await?;
        keep(
            P,
            !late.record.changed && tally(&late) == (true, 2, 3, 3),
            || {
                format!(
                    "b's report, 60 ms after a's of 50 ms, gave {late:?}: a's report still counted"
                )
            },
        )?;
        let w = done(
            "write",
            s.write("pay".into(), change("closed", 0, false, 0, "c")),
        )
        .await?;
        let stale = done("report", s.report("pay".into(), report("a", 0, 60_000))).await?;
        keep(
            P,
            !stale.record.changed
                && stale.record.epoch == w.epoch
                && tally(&stale) == (false, 0, 0, 0),
            || {
                format!(
                    "a report over epoch 0, once the record was written as epoch {}, gave {stale:?}",
                    w.epoch
                )
            },
        )?;
        let first = done(
            "report",
            s.report("pay".into(), report("a", w.epoch, 60_000)),
        )
        .await?;
        keep(
            P,
            !first.record.changed && tally(&first) == (true, 1, 3, 3),
            || {
                format!(
                    "the first report over the record written since gave {first:?}: reports of \
                     the record before still counted"
                )
            },
        )?;
        done(
            "report",
            s.report("pay".into(), report("b", w.epoch, 60_000)),
        )
        .await?;
        let third = done(
            "report",
            s.report("pay".into(), report("c", w.epoch, 60_000)),
        )
        .await?;
        keep(
            P,
            third.record.changed
                && third.record.state == State::Open
                && tally(&third) == (true, 3, 3, 3),
            || format!("the third report over the record written since gave {third:?}"),
        )
    }

    /// **Quorum: the live set**: a quorum is counted among the live instances alone (the
    /// reporter, and those of the report's list whose beat has not expired on the store's
    /// clock), a percentage of them rounded up, and only their open reports count toward it.
    pub async fn only_live_instances_reports_count_toward_a_quorum(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "only live instances' reports count toward a quorum";
        let (mut s, _) = b.store(prefix);
        // b's beat last, so that its answer lists b, live for 1 s more (the first report, a
        // round trip later, comes within it, even on a slow machine).
        let live = beaten(&mut *s, &[("a", 60_000), ("c", 60_000), ("b", 1_000)]).await?;
        keep(P, live.len() == 3, || {
            format!("three beats listed {live:?}")
        })?;
        // 60% of 3 live instances is 2, rounded up; of 2, 2 as well.
        let report = |instance: &str| Report {
            trip: change("open", 0, false, 60_000, instance),
            quorum: Quorum::Percent(60),
            live: live.clone(),
        };
        let first = done("report", s.report("pay".into(), report("b"))).await?;
        keep(
            P,
            !first.record.changed && tally(&first) == (true, 1, 2, 3),
            || format!("the first report of 3 live instances under 60% gave {first:?}"),
        )?;
        b.later(Duration::from_millis(1_100)).await;
        let second = done("report", s.report("pay".into(), report("a"))).await?;
        keep(
            P,
            !second.record.changed && tally(&second) == (true, 1, 2, 2),
            || {
                format!(
                    "a's report, once b's beat had expired, gave {second:?}: b is not live, nor \
                     does its report count"
                )
            },
        )?;
        let third = done("report", s.report("pay".into(), report("c"))).await?;
        keep(
            P,
            third.record.changed
                && third.record.state == State::Open
                && tally(&third) == (true, 2, 2, 2),
            || format!("c's report, the second of 2 live instances, gave {third:?}"),
        )
    }

    /// **Keyed families**: one record per key, expiring on the store's clock once the key is
    /// closed, and per family the list of the keys not closed, which a re-read reads instead
    /// of every key; an expired key is dropped from the list by a tidy.
    pub async fn a_family_keys_record_is_listed_open_until_it_closes_or_expires(
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
        // bob's record lives 1 s: the listing, a round trip later, comes within it, even on a
        // slow machine.
        done("write", s.write(k2.clone(), write("open", 0, 1_000))).await?;
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
        b.later(Duration::from_millis(1_100)).await;
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

    /// **Keyed families: a tidy**: a tidy drops from its families' lists the keys whose record
    /// expired by its time and leaves every other key listed (one whose record lives on, and
    /// one that never expires, listed with an infinite expiry); it reads each record asked
    /// for, in order, as it is: an expired key's and one never written as none (epoch 0,
    /// closed), another application's value as that record's problem.
    pub async fn a_tidy_drops_only_expired_keys_and_reads_each_record_as_it_is(
        b: &dyn Backend,
        prefix: &str,
    ) -> Result<(), String> {
        const P: &str = "a tidy drops only expired keys and reads each record as it is";
        let (mut s, _) = b.store(prefix);
        let key = |k: &str| crate::keys::key_name("users", k);
        let open_for = |life_ms: u64| {
            let mut c = change("open", 0, false, 60_000, "a");
            c.life = Some(Duration::from_millis(life_ms));
            c
        };
        let ann = done("write", s.write(key("ann"), open_for(120_000))).await?;
        let cy = done("write", s.write(key("cy"), open_for(0))).await?;
        done("write", s.write(key("bob"), open_for(50))).await?;
        b.spoil(prefix, "junk").await;
        b.later(Duration::from_millis(60)).await;
        let before_ms = done("open keys", s.open_keys(vec!["users".into()]))
            .await?
            .now_ms;
        let names = vec![key("ann"), key("bob"), key("cy"), key("dan"), "junk".into()];
        let read = done("tidy", s.tidy(vec!["users".into()], before_ms, names)).await?;
        let [ann_r, bob_r, cy_r, dan_r, junk_r] = &read[..] else {
            return Err(format!("{P}: {} answers for 5 records", read.len()));
        };
        let as_written = |r: &Result<Record, StoreError>, w: &Record| {
            r.as_ref()
                .is_ok_and(|r| r.epoch == w.epoch && r.state == State::Open)
        };
        keep(P, as_written(ann_r, &ann) && as_written(cy_r, &cy), || {
            format!(
                "the live keys' records read as {ann_r:?} and {cy_r:?}, written as epochs {} and {}",
                ann.epoch, cy.epoch
            )
        })?;
        let none = |r: &Result<Record, StoreError>| {
            r.as_ref()
                .is_ok_and(|r| r.epoch == 0 && r.state == State::Closed)
        };
        keep(P, none(bob_r) && none(dan_r), || {
            format!("an expired key's record read as {bob_r:?}, one never written as {dan_r:?}")
        })?;
        keep(P, matches!(junk_r, Err(StoreError::Record(_))), || {
            format!("another application's value read as {junk_r:?}")
        })?;
        let listed = done("open keys", s.open_keys(vec!["users".into()])).await?;
        let mut users = listed.lists.first().cloned().flatten().unwrap_or_default();
        users.sort_by(|x, y| x.0.cmp(&y.0));
        let kept = vec![
            ("ann".to_owned(), (ann.now_ms + 120_000) as f64),
            ("cy".to_owned(), f64::INFINITY),
        ];
        keep(P, users == kept, || {
            format!("after a tidy by {before_ms} ms the family lists {users:?}, not {kept:?}")
        })
    }
}

/// Runs `check` against `backend` on a tokio runtime of its own (current-thread, real time,
/// every driver enabled), with a prefix of its own for the check named `name` (the name and
/// this process's id), so that tests running at once, or again on one server, share no record.
/// What a `$run` function of [`conformance!`](crate::conformance) can call; a backend whose
/// clock is a model's runs the check on a paused runtime of its own instead.
pub fn on_runtime(
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

/// The fleet config of a store on the test server at `url`, under `prefix`, whose operations
/// may take 5 s: the suite checks what a store answers, not how soon, and a loaded machine
/// may take longer than the default limit to open a connection.
#[cfg(test)]
pub(crate) fn patient(url: &str, prefix: &str) -> crate::FleetConfig {
    crate::FleetConfig::new(url)
        .prefix(prefix)
        .timeout(Duration::from_secs(5))
}

/// The real Redis at `BREAKERBOX_TEST_REDIS_URL`.
#[cfg(test)]
struct RealRedis(String);

#[cfg(test)]
impl Backend for RealRedis {
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed) {
        let config = patient(&self.0, prefix);
        let (wire, feed) = super::production_store(&config).expect("a good URL");
        (
            Box::new(super::Redis::new(Box::new(wire), prefix)),
            Feed::redis(feed),
        )
    }

    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a> {
        Box::pin(async move {
            let config = patient(&self.0, prefix);
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
#[cfg(test)]
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
#[cfg(test)]
fn against_redis(name: &str, check: for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>) {
    let Some(url) = redis_url() else {
        return;
    };
    on_runtime(name, &RealRedis(url), check).unwrap();
}

#[cfg(test)]
mod redis_store {
    super::conformance!(super::against_redis);
}

/// A promise a [`Broken`] backend's stores break on purpose.
#[cfg(test)]
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    /// Every compare-and-set is written as if forced (the epoch it was given ignored).
    IgnoresTheEpoch,
    /// Every lease ask is granted from one free lease (its `fewest` ignored).
    IgnoresFewest,
}

/// A store that breaks one promise on purpose, by changing what it hands on.
#[cfg(test)]
struct Faulty(Box<dyn FleetStore>, Fault);

#[cfg(test)]
impl FleetStore for Faulty {
    fn read(&mut self, name: String) -> Op<'_, Record> {
        self.0.read(name)
    }
    fn write(&mut self, name: String, mut change: Change) -> Op<'_, Record> {
        if let Fault::IgnoresTheEpoch = self.1 {
            change.force = true;
        }
        self.0.write(name, change)
    }
    fn lease(&mut self, name: String, mut ask: LeaseAsk) -> Op<'_, Leases> {
        if let Fault::IgnoresFewest = self.1 {
            ask.fewest = 1;
        }
        self.0.lease(name, ask)
    }
    fn count(&mut self, name: String, batch: CountBatch) -> Op<'_, Counted> {
        self.0.count(name, batch)
    }
    fn read_many(&mut self, names: Vec<String>, beat: Option<Beat>) -> Op<'_, Reads> {
        self.0.read_many(names, beat)
    }
    fn report(&mut self, name: String, report: Report) -> Op<'_, Reported> {
        self.0.report(name, report)
    }
    fn beat(&mut self, beat: Beat) -> Op<'_, Live> {
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

/// `B`'s stores, each breaking the promise its [`Fault`] names.
#[cfg(test)]
pub(crate) struct Broken<B>(pub(crate) B, pub(crate) Fault);

#[cfg(test)]
impl<B: Backend> Backend for Broken<B> {
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed) {
        let (store, feed) = self.0.store(prefix);
        (Box::new(Faulty(store, self.1)), feed)
    }
    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a> {
        self.0.spoil(prefix, name)
    }
    fn later(&self, d: Duration) -> Work<'_> {
        self.0.later(d)
    }
}

/// `broken`, a store that ignores the epoch, fails the promise of one write per trip at its
/// first round: the promises catch such a store.
#[cfg(test)]
fn fails_one_write_per_trip(broken: &dyn Backend) {
    let failed = on_runtime("broken", broken, |b, p| {
        Box::pin(promises::one_write_per_trip(b, p))
    })
    .expect_err("a store that ignores the epoch passes no compare-and-set check");
    assert!(
        failed
            .starts_with("one write per trip: round 0: 3 of 3 compare-and-sets over epoch 0 wrote"),
        "{failed}"
    );
}

/// How the promise of leases at least `fewest` fails a store that ignores `fewest`: at the
/// first ask for more leases than are free.
#[cfg(test)]
pub(crate) const IGNORED_FEWEST: &str = "a lease ask gets every free lease, at least fewest, or \
     its own renewed: with 2 of 3 leases free, an ask for at least 3 got Granted { count: 2, \
     life: 60s }";

/// `broken`, a store that ignores `fewest`, fails the promise of leases at least `fewest`.
#[cfg(test)]
fn fails_leases_at_least_fewest(broken: &dyn Backend) {
    let failed = on_runtime("broken-fewest", broken, |b, p| {
        Box::pin(
            promises::a_lease_ask_gets_every_free_lease_at_least_fewest_or_its_own_renewed(b, p),
        )
    })
    .expect_err("a store that ignores fewest grants fewer leases than an ask is worth");
    assert_eq!(failed, IGNORED_FEWEST);
}

#[test]
fn a_store_that_ignores_the_epoch_fails_one_write_per_trip() {
    let Some(url) = redis_url() else {
        return;
    };
    fails_one_write_per_trip(&Broken(RealRedis(url), Fault::IgnoresTheEpoch));
}

#[test]
fn a_store_that_ignores_fewest_fails_leases_at_least_fewest() {
    let Some(url) = redis_url() else {
        return;
    };
    fails_leases_at_least_fewest(&Broken(RealRedis(url), Fault::IgnoresFewest));
}

/// `scripts/test`'s PostgreSQL (`BREAKERBOX_TEST_POSTGRES_URL`); without one the tests against
/// it are skipped, except under CI (`CI=true`), where they fail.
#[cfg(all(test, feature = "postgres"))]
pub(crate) fn postgres_url() -> Option<String> {
    match std::env::var("BREAKERBOX_TEST_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!(
                "the PostgreSQL store's tests need BREAKERBOX_TEST_POSTGRES_URL (scripts/test sets it)"
            )
        }
        Err(_) => {
            eprintln!("SKIPPED: no BREAKERBOX_TEST_POSTGRES_URL");
            None
        }
    }
}

/// The real PostgreSQL at `BREAKERBOX_TEST_POSTGRES_URL`.
#[cfg(all(test, feature = "postgres"))]
struct RealPostgres(String);

#[cfg(all(test, feature = "postgres"))]
impl Backend for RealPostgres {
    fn store(&self, prefix: &str) -> (Box<dyn FleetStore>, Feed) {
        let config = patient(&self.0, prefix);
        let (store, feed) = super::postgres::postgres_store(&config).expect("a good URL");
        (Box::new(store), feed)
    }

    fn spoil<'a>(&'a self, prefix: &'a str, name: &'a str) -> Work<'a> {
        Box::pin(async move {
            // The tables first, as a fleet's first connection makes them.
            let (mut store, _) = self.store(prefix);
            done("ping", store.ping())
                .await
                .expect("PostgreSQL answers");
            let (client, connection) = tokio_postgres::connect(&self.0, tokio_postgres::NoTls)
                .await
                .expect("PostgreSQL answers");
            tokio::spawn(connection);
            let (family, name) = crate::keys::split_key(name).unwrap_or(("", name));
            client
                .execute(
                    "insert into breakerbox_fleet_records (prefix, family, name, epoch, state,
                        open_until, reopens, origin, reason, last_failure, changed_at)
                     values ($1, $2, $3, 1, 'left by another application', 0, 0, '', '', '', 0)
                     on conflict (prefix, family, name_md5) do update set state = excluded.state",
                    &[&prefix, &family, &name],
                )
                .await
                .expect("a foreign row");
        })
    }

    fn later(&self, d: Duration) -> Work<'_> {
        // The server's clock runs on its own: real time has to pass for it.
        Box::pin(tokio::time::sleep(d))
    }
}

/// Every promise against the real PostgreSQL (skipped without
/// `BREAKERBOX_TEST_POSTGRES_URL`, as `scripts/test` sets it).
#[cfg(all(test, feature = "postgres"))]
fn against_postgres(name: &str, check: for<'a> fn(&'a dyn Backend, &'a str) -> Checked<'a>) {
    let Some(url) = postgres_url() else {
        return;
    };
    on_runtime(name, &RealPostgres(url), check).unwrap();
}

#[cfg(all(test, feature = "postgres"))]
mod postgres_store {
    super::conformance!(super::against_postgres);
}

#[cfg(all(test, feature = "postgres"))]
#[test]
fn a_postgres_store_that_ignores_the_epoch_fails_one_write_per_trip() {
    let Some(url) = postgres_url() else {
        return;
    };
    fails_one_write_per_trip(&Broken(RealPostgres(url), Fault::IgnoresTheEpoch));
}

#[cfg(all(test, feature = "postgres"))]
#[test]
fn a_postgres_store_that_ignores_fewest_fails_leases_at_least_fewest() {
    let Some(url) = postgres_url() else {
        return;
    };
    fails_leases_at_least_fewest(&Broken(RealPostgres(url), Fault::IgnoresFewest));
}
