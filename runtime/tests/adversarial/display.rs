//! D02: an error whose `Display` panics or re-enters the breaker, during the call that trips, in
//! every state, and under a debug `tracing` subscriber that formats every field.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use breakerbox_runtime::{Breaker, Error, ManualClock, Outcome, State};

use crate::support::{BombDisplay, PanickyDisplay, Reentrant, S, clocked, fail, ok};

#[test]
fn d02_rate_breaker_trips_through_a_panicking_display_and_trips_again_after_reset() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d02-rate",
        clocked(&clock)
            .failure_rate(100)
            .window(breakerbox_runtime::Window::Calls(4))
            .min_calls(2)
            .open_for(S)
            .build()
            .unwrap(),
    );
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Closed);
    fail(&b, PanickyDisplay); // the trip: formats the message
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().times_opened, 1);
    assert_eq!(b.metrics().failures, 2);
    let msg = b.last_failure().expect("a last failure is kept");
    assert!(!msg.contains("on purpose"), "{msg}");
    // The window was not left sealed: after a reset, failures trip it again.
    for round in 2..5u64 {
        b.reset();
        assert_eq!(b.state(), State::Closed);
        fail(&b, PanickyDisplay);
        fail(&b, PanickyDisplay);
        assert_eq!(b.state(), State::Open, "round {round}");
        assert_eq!(b.metrics().times_opened, round);
    }
    // Half-open: a probe failing with a panicking Display re-opens, and counts.
    clock.advance(10 * S);
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().failures, 2 * 4 + 1);
    // And a probe after that still closes it.
    clock.advance(100 * S);
    ok(&b);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn d02_panicking_display_in_every_state_never_unwinds_to_the_caller() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d02-states",
        clocked(&clock).failures(2).open_for(S).build().unwrap(),
    );
    // closed, below the limit
    fail(&b, PanickyDisplay);
    // closed, the trip
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Open);
    // open: rejected, the Display is never asked
    let r: Result<(), Error<PanickyDisplay>> = b.call(|| Err(PanickyDisplay));
    assert!(matches!(r, Err(Error::Rejected(_))));
    // the rejection's own message shows the placeholder, not a panic
    let text = match r {
        Err(Error::Rejected(rej)) => rej.to_string(),
        _ => unreachable!(),
    };
    assert!(text.contains("adv-d02-states"), "{text}");
    // half-open probe failure
    clock.advance(S);
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Open);
    // forced open
    b.force_open();
    let r: Result<(), Error<PanickyDisplay>> = b.call(|| Err(PanickyDisplay));
    assert!(matches!(r, Err(Error::Rejected(_))));
    // disabled
    b.disable();
    fail(&b, PanickyDisplay);
    assert_eq!(b.state(), State::Disabled);
    // record_with directly, with a TripFor
    b.reset();
    let p = b.try_acquire().unwrap();
    p.record_with(Outcome::TripFor(5 * S), Some(&PanickyDisplay));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().retry_after, Some(5 * S));
    let m = b.metrics();
    assert_eq!(m.failures, 5);
    assert_eq!(m.calls, m.successes + m.failures + m.ignored + m.rejected);
}

#[test]
fn d02_display_that_reenters_the_breaker_does_not_deadlock() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d02-reenter",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    let weak = b.downgrade();
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let reenter = Reentrant(move || {
        c.fetch_add(1, Ordering::SeqCst);
        let b = weak.upgrade().unwrap();
        let _ = b.state();
        let _ = b.metrics();
        let _ = b.last_failure();
        // A call through the breaker from inside the Display.
        let _: Result<(), Error<&str>> = b.call(|| Ok(()));
    });
    fail(&b, reenter);
    assert!(
        calls.load(Ordering::SeqCst) >= 1,
        "the message was not formatted"
    );
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.last_failure().as_deref(), Some("reentered"));
    assert_eq!(b.metrics().times_opened, 1);
}

#[test]
fn d02_display_that_resets_the_breaker_leaves_a_consistent_breaker() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-d02-reset-in-display",
        clocked(&clock)
            .failure_rate(100)
            .window(breakerbox_runtime::Window::Calls(2))
            .min_calls(2)
            .open_for(S)
            .build()
            .unwrap(),
    );
    let weak = b.downgrade();
    fail(&b, "first");
    fail(&b, Reentrant(move || weak.upgrade().unwrap().reset()));
    // Whatever the Display's reset did, the breaker is usable and trips again on failures.
    b.reset();
    fail(&b, "a");
    fail(&b, "b");
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!(m.failures, 4);
    // The first two failures: the Display's reset came before their trip, which then found a
    // new generation and opened nothing; the last two opened it once.
    assert_eq!(m.times_opened, 1);
}

// D02 with a debug `tracing` subscriber that formats every field (the user's Display included).
struct FormatAll;
struct Visit;
impl tracing::field::Visit for Visit {
    fn record_debug(&mut self, _: &tracing::field::Field, value: &dyn fmt::Debug) {
        let _ = format!("{value:?}");
    }
}
impl tracing::Subscriber for FormatAll {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        event.record(&mut Visit);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn d02_with_a_debug_subscriber_a_panicking_display_is_counted_and_a_probe_reopens() {
    tracing::subscriber::with_default(FormatAll, || {
        let clock = ManualClock::new();
        let b = Breaker::new(
            "adv-d02-tracing",
            clocked(&clock).failures(2).open_for(S).build().unwrap(),
        );
        let r = catch_unwind(AssertUnwindSafe(|| {
            fail(&b, PanickyDisplay);
            fail(&b, PanickyDisplay);
        }));
        assert!(r.is_ok(), "a panic got out");
        assert_eq!(b.metrics().failures, 2);
        assert_eq!(b.state(), State::Open);
        clock.advance(S);
        let r = catch_unwind(AssertUnwindSafe(|| fail(&b, PanickyDisplay)));
        assert!(r.is_ok(), "a panic got out of the probe");
        assert_eq!(b.state(), State::Open, "the failed probe re-opened it");
        assert_eq!(b.metrics().failures, 3);
        // With a bomb payload too.
        b.reset();
        let r = catch_unwind(AssertUnwindSafe(|| {
            fail(&b, BombDisplay);
            fail(&b, BombDisplay);
        }));
        assert!(r.is_ok(), "a panic got out");
        assert_eq!(b.state(), State::Open);
        assert_eq!(b.metrics().failures, 5);
    });
}
