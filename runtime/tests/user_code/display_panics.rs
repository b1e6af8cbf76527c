//! An error whose `Display` panics or re-enters the breaker, during the call that trips, in
//! every state, and under a debug `tracing` subscriber that formats every field.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use breakerbox_runtime::{Breaker, Config, Error, ManualClock, Outcome, State, Window};

use crate::calls::{BombDisplay, PanickyDisplay, Reentrant, S, clocked, fail, ok};

#[test]
fn rate_breaker_trips_through_a_panicking_display_and_trips_again_after_reset() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "display-panics-rate",
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
fn panicking_display_in_every_state_never_unwinds_to_the_caller() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "display-panics-states",
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
    assert!(text.contains("display-panics-states"), "{text}");
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
fn display_that_reenters_the_breaker_does_not_deadlock() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "display-panics-reenter",
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
fn display_that_resets_the_breaker_leaves_a_consistent_breaker() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "display-panics-reset-in-display",
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

#[test]
fn with_a_debug_subscriber_a_panicking_display_is_counted_and_a_probe_reopens() {
    logging::debug(|| {
        let clock = ManualClock::new();
        let b = Breaker::new(
            "display-panics-tracing",
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

/// A breaker on a fresh manual clock.
fn breaker(builder: breakerbox_runtime::ConfigBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let config = builder.clock(clock.clone()).build().expect("valid config");
    (Breaker::new("core", config), clock)
}

fn rejection(b: &Breaker) -> breakerbox_runtime::Rejected {
    match b.try_acquire() {
        Ok(p) => panic!("admitted {p:?} in state {:?}", b.state()),
        Err(r) => r,
    }
}

/// An error whose `Display` panics.
struct Unprintable;

impl std::fmt::Display for Unprintable {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        panic!("Display of Unprintable");
    }
}

/// Records a failure whose `Display` panics. Returns whether a panic came out of the breaker
/// (it never should).
fn fail_unprintable(p: breakerbox_runtime::Permit<'_>) -> bool {
    catch_unwind(AssertUnwindSafe(|| p.failure_with(&Unprintable))).is_err()
}

mod logging {
    //! A subscriber that formats every field of every event, as a `fmt` subscriber at `debug`
    //! level does, on the threads inside [`debug`]. Installed once as the global subscriber
    //! (scoped subscribers of tests on other threads would race over callsite interest).
    use std::cell::Cell;
    use std::fmt;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::subscriber::Interest;
    use tracing::{Metadata, Subscriber};

    struct Formatting;
    struct Fields(String);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.0 += &format!(" {}={value:?}", field.name());
        }
    }

    impl Subscriber for Formatting {
        fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
            Interest::sometimes()
        }
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            ON.with(Cell::get)
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            std::hint::black_box(fields.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    thread_local!(static ON: Cell<bool> = const { Cell::new(false) });

    /// Runs `f` with every event of this thread formatted.
    pub fn debug(f: impl FnOnce()) {
        static INIT: std::sync::Once = std::sync::Once::new();
        INIT.call_once(|| tracing::subscriber::set_global_default(Formatting).unwrap());
        ON.with(|on| on.set(true));
        f();
        ON.with(|on| on.set(false));
    }
}

/// The failure that trips a rate breaker has a `Display` that panics. The message must be
/// formatted outside the window's seal-and-publish step: a panic between the two would leave
/// the gate sealed for a generation never published, and 1000 failures at 100 % would never
/// trip it.
#[test]
fn a_panicking_display_does_not_keep_a_rate_breaker_closed() {
    let (b, _) = breaker(
        Config::builder()
            .failure_rate(100)
            .window(Window::Calls(10))
            .min_calls(1),
    );
    let mut escaped = 0;
    for _ in 0..1000 {
        if let Ok(p) = b.try_acquire() {
            escaped += usize::from(fail_unprintable(p));
        }
    }
    assert_eq!(b.state(), State::Open, "1000 failures at 100% did not trip");
    let m = b.metrics();
    assert_eq!((m.times_opened, m.failures, m.rejected), (1, 1, 999));
    assert_eq!(escaped, 0, "the Display's panic reached the caller");
    assert_eq!(b.last_failure().as_deref(), Some("<Display panicked>"));
    let r = rejection(&b);
    assert!(
        r.to_string()
            .ends_with("(last failure: <Display panicked>)"),
        "{r}"
    );
}

/// The same with a consecutive policy: the opening is counted once and published, never
/// counted and then lost to the panic (`times_opened` 1 on a breaker still closed).
#[test]
fn a_panicking_display_opens_a_consecutive_breaker_once() {
    let (b, _) = breaker(Config::builder().failures(3));
    for _ in 0..3 {
        fail_unprintable(b.try_acquire().unwrap());
    }
    let m = b.metrics();
    assert_eq!((m.state, m.times_opened, m.failures), (State::Open, 1, 3));
}

/// With a subscriber that formats `debug` events, the failure's `Display` is formatted only
/// after it is counted: its panic loses no count, and a probe's slot is freed (its verdict is
/// recorded).
#[test]
fn a_panicking_display_is_counted_and_frees_its_probe_under_debug_logging() {
    let (b, clock) = breaker(Config::builder().failures(2).open_for(S));
    logging::debug(|| {
        assert!(!fail_unprintable(b.try_acquire().unwrap()));
        let m = b.metrics();
        assert_eq!((m.failures, m.consecutive_failures), (1, 1));
        fail_unprintable(b.try_acquire().unwrap());
        assert_eq!(b.state(), State::Open);
        clock.advance(S);
        let probe = b.try_acquire().unwrap();
        assert!(probe.is_probe());
        assert!(!fail_unprintable(probe));
        assert_eq!(b.state(), State::Open, "the failed probe did not re-open");
        assert_eq!(b.metrics().failures, 3);
    });
}
