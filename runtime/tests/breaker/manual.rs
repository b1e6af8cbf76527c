//! `TripFor`, manual control (trip, force open, disable, reset), the bulkhead, and exporting state.

use crate::support::{
    NS, breaker, events, fail, ms, rejected, secs, succeed, to_half_open, transitions,
};
use breakerbox_runtime::{
    Breaker, Config, Error, ManualClock, Outcome, Reason, RejectReason, State,
};
use std::panic::{AssertUnwindSafe, catch_unwind};

#[test]
fn trip_for_outcome_opens_for_exactly_d_from_closed() {
    let (b, clock) = breaker(Config::builder().open_for(secs(60)));
    let seen = events(&b);
    b.try_acquire().unwrap().record(Outcome::TripFor(secs(3)));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().retry_after, Some(secs(3)));
    assert_eq!(b.metrics().failures, 1);
    clock.advance(secs(3) - NS);
    rejected(&b);
    clock.advance(NS);
    assert!(b.try_acquire().unwrap().is_probe());
    assert_eq!(
        transitions(&seen)[0],
        (State::Closed, State::Open, Reason::TripFor(secs(3)))
    );
}

#[test]
fn trip_for_outcome_opens_for_exactly_d_from_half_open() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)).backoff(2.0));
    to_half_open(&b, &clock);
    b.try_acquire().unwrap().record(Outcome::TripFor(secs(7)));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().retry_after, Some(secs(7)));
}

#[test]
fn trip_for_outcome_opens_for_exactly_d_from_open() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(60)));
    let held = b.try_acquire().unwrap();
    fail(&b);
    clock.advance(secs(1));
    held.record(Outcome::TripFor(secs(10))); // the service's word is honoured
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().retry_after, Some(secs(10)));
}

#[test]
fn repro_retrip_while_open_counted_as_an_opening_without_event() {
    // A `TripFor` while open moved the deadline and, like a reset of a closed breaker, told no
    // listener; but `times_opened` counted it, so listeners and metrics disagreed.
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(60)));
    let held = b.try_acquire().unwrap();
    fail(&b);
    let seen = events(&b);
    clock.advance(secs(1));
    held.record(Outcome::TripFor(secs(10)));
    b.trip_for(secs(20));
    assert_eq!(b.metrics().retry_after, Some(secs(20)));
    assert_eq!(b.metrics().times_opened, 1);
    assert_eq!(transitions(&seen), []);
}

#[test]
fn manual_trip_for_opens_for_exactly_d_from_any_state() {
    type Setup = fn(&Breaker, &ManualClock);
    let setups: [(State, Setup); 5] = [
        (State::Closed, |_, _| {}),
        (State::Open, |b, _| fail(b)),
        (State::HalfOpen, |b, c| {
            to_half_open(b, c);
            let _probe = b.try_acquire().unwrap();
            std::mem::forget(_probe);
        }),
        (State::ForcedOpen, |b, _| b.force_open()),
        (State::Disabled, |b, _| b.disable()),
    ];
    for (from, setup) in setups {
        let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(60)));
        setup(&b, &clock);
        assert_eq!(b.state(), from);
        let seen = events(&b);
        b.trip_for(ms(1500));
        assert_eq!(b.state(), State::Open, "from {from}");
        assert_eq!(b.metrics().retry_after, Some(ms(1500)));
        let want = if from == State::Open {
            // Open stays open, with the new deadline: no state change to tell.
            vec![]
        } else {
            vec![(from, State::Open, Reason::TripFor(ms(1500)))]
        };
        assert_eq!(transitions(&seen), want, "from {from}");
        clock.advance(ms(1500));
        succeed(&b);
        assert_eq!(b.state(), State::Closed, "from {from}");
    }
}

#[test]
fn force_open_rejects_until_reset() {
    let (b, clock) = breaker(Config::builder());
    let seen = events(&b);
    b.force_open();
    let r = rejected(&b);
    assert_eq!(r.reason(), RejectReason::ForcedOpen);
    assert_eq!(r.retry_after(), None);
    clock.advance(secs(3600));
    rejected(&b);
    assert_eq!(b.state(), State::ForcedOpen);
    b.reset();
    succeed(&b);
    assert_eq!(
        transitions(&seen),
        [
            (State::Closed, State::ForcedOpen, Reason::ForcedOpen),
            (State::ForcedOpen, State::Closed, Reason::Reset),
        ]
    );
    assert_eq!(b.metrics().rejected, 2);
}

/// Disabled calls trip nothing but are counted in the totals (`calls` is every call asked
/// for); they are not timed, so never `slow`.
#[test]
fn disabled_admits_everything_and_judges_nothing() {
    let (b, _) = breaker(Config::builder().failures(1).max_concurrent(1));
    b.disable();
    let before = b.metrics();
    let held: Vec<_> = (0..5).map(|_| b.try_acquire().unwrap()).collect();
    for _ in 0..10 {
        let r: Result<(), Error<&str>> = b.call(|| Err("down"));
        assert!(matches!(r, Err(Error::Inner("down"))));
    }
    drop(held);
    let _ = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), &str> { panic!("boom") })
    }));
    b.try_acquire().unwrap().record(Outcome::TripFor(secs(1)));
    assert_eq!(b.state(), State::Disabled);
    let after = b.metrics();
    // 5 held and dropped (ignored), 10 failures, a panic (a failure), a `TripFor` (a failure
    // that trips nothing).
    assert_eq!(
        (
            after.calls - before.calls,
            after.successes - before.successes,
            after.failures - before.failures,
            after.ignored - before.ignored,
            after.times_opened
        ),
        (17, 0, 12, 5, before.times_opened)
    );
    b.reset();
    fail(&b);
    assert_eq!(b.state(), State::Open, "back to normal");
}

#[test]
fn reset_closes_and_clears_the_streak() {
    let (b, _) = breaker(Config::builder().failures(2));
    fail(&b);
    b.reset();
    assert_eq!(b.metrics().consecutive_failures, 0);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    b.reset();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failures, 3, "totals keep counting");
}

#[test]
fn bulkhead_limits_concurrent_calls_when_closed() {
    let (b, _) = breaker(Config::builder().max_concurrent(2));
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    let r = rejected(&b);
    assert_eq!(r.reason(), RejectReason::BulkheadFull);
    assert_eq!(r.retry_after(), None);
    assert_eq!(b.state(), State::Closed, "a full bulkhead is not a failure");
    p1.success();
    let p3 = b.try_acquire().unwrap();
    rejected(&b);
    drop(p2); // a dropped permit frees its place too
    let p4 = b.try_acquire().unwrap();
    p3.failure();
    p4.ignore();
    let m = b.metrics();
    assert_eq!(
        (m.calls, m.successes, m.failures, m.ignored, m.rejected),
        (6, 1, 1, 2, 2)
    );
    for _ in 0..2 {
        let _a = b.try_acquire().unwrap();
        let _b = b.try_acquire().unwrap();
        rejected(&b);
    }
}

/// A state change frees every bulkhead place (so that a permit that never records cannot
/// hold one for good): a call admitted before a trip and still running after the recovery no
/// longer counts, and its late verdict gives back nothing of the new places.
#[test]
fn bulkhead_places_are_freed_by_a_trip_and_recovery() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .max_concurrent(1),
    );
    let held = b.try_acquire().unwrap();
    b.trip_for(secs(1));
    clock.advance(secs(1));
    succeed(&b); // the probe is not limited by the bulkhead
    assert_eq!(b.state(), State::Closed);
    let now = b
        .try_acquire()
        .expect("`held` lost its place with the trip");
    held.success();
    assert_eq!(
        rejected(&b).reason(),
        RejectReason::BulkheadFull,
        "a stale verdict freed a place"
    );
    now.success();
    succeed(&b);
}

#[test]
fn an_exported_open_state_imports_into_another_breaker_and_its_backoff_goes_on() {
    let config = || {
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .backoff(2.0)
            .max_open_for(secs(30))
    };
    let (here, here_clock) = breaker(config());
    let (there, there_clock) = breaker(config());
    let seen = events(&there);
    // Here: tripped, probed and failed twice: open for 4 s, two re-opens in.
    fail(&here);
    for _ in 0..2 {
        here_clock.advance(here.metrics().retry_after.unwrap());
        fail(&here);
    }
    here_clock.advance(secs(1));
    let shared = here.export_state();
    assert_eq!(shared.state, State::Open);
    assert_eq!(shared.open_remaining, Some(secs(3)));
    assert_eq!(shared.reopens, 2);
    there_clock.advance(secs(100)); // clocks of two processes differ
    there.import_state(&shared);
    assert_eq!(there.state(), State::Open);
    assert_eq!(there.metrics().retry_after, Some(secs(3)));
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::Imported)]
    );
    // The backoff goes on where the other process left it.
    there_clock.advance(secs(3));
    fail(&there);
    assert_eq!(there.metrics().retry_after, Some(secs(8)));
}

/// Half-open and closed states import too: an imported probe round counts its re-opens, and a
/// closed import resets the backoff.
#[test]
fn half_open_and_closed_states_import_and_a_closed_import_resets_the_backoff() {
    let config = || {
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .backoff(2.0)
            .max_open_for(secs(30))
    };
    let (other, _clock) = breaker(config());
    other.import_state(&breakerbox_runtime::SharedState::new(
        State::HalfOpen,
        None,
        1,
    ));
    assert_eq!(other.state(), State::HalfOpen);
    let p = other.try_acquire().unwrap();
    assert!(p.is_probe());
    p.failure();
    // One re-open in: this is the third opening, `open_for × 2²`.
    assert_eq!(other.metrics().retry_after, Some(secs(4)));
    other.import_state(&breakerbox_runtime::SharedState::new(
        State::Closed,
        None,
        0,
    ));
    assert_eq!(other.state(), State::Closed);
    fail(&other);
    assert_eq!(other.metrics().retry_after, Some(secs(1)));
}
