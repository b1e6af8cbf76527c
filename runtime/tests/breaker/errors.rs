//! `Rejected` and its messages; each breaker's last failure.

use crate::support::{self, NS, breaker, fail, ms, rejected, secs, succeed};
use breakerbox_runtime::{Breaker, Config, Error, ManualClock, State};

#[test]
fn rejected_says_what_happened() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(2)));
    let b = Breaker::new("x", b.config().clone());
    let r: Result<(), Error<&str>> = b.call(|| Err("boom"));
    assert_eq!(r.unwrap_err().to_string(), "boom");
    clock.advance(ms(800));
    let r: Result<(), Error<&str>> = b.call(|| Ok(()));
    let err = r.unwrap_err();
    assert_eq!(
        err.to_string(),
        "circuit breaker 'x' is open; retry in 1.2s (last failure: boom)"
    );
    let rejected = err.rejected().unwrap();
    assert_eq!(rejected.name(), "x");
    assert_eq!(rejected.last_failure().as_deref(), Some("boom"));
    clock.advance(ms(1050));
    assert_eq!(
        support::rejected(&b).to_string(),
        "circuit breaker 'x' is open; retry in 150ms (last failure: boom)"
    );
    clock.advance(ms(150) - NS);
    assert_eq!(
        support::rejected(&b).to_string(),
        "circuit breaker 'x' is open; retry in 1ms (last failure: boom)"
    );
}

#[test]
fn repro_rejected_shows_the_message_of_an_earlier_trip() {
    // A trip whose failure has no message kept the message of an earlier, unrelated trip, so
    // the error blamed an old failure for the current opening.
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)));
    let b = Breaker::new("earlier-trip", b.config().clone());
    let _ = b.call(|| Err::<(), _>("connection refused"));
    assert_eq!(b.last_failure().as_deref(), Some("connection refused"));
    clock.advance(secs(1));
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    fail(&b); // no message this time
    assert_eq!(b.last_failure(), None);
    assert_eq!(
        rejected(&b).to_string(),
        "circuit breaker 'earlier-trip' is open; retry in 1.0s"
    );
}

#[test]
fn rejected_messages_for_every_reason() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .max_concurrent(1),
    );
    let b = Breaker::new("users", b.config().clone());
    let held = b.try_acquire().unwrap();
    assert_eq!(
        rejected(&b).to_string(),
        "circuit breaker 'users' is at its limit of concurrent calls"
    );
    held.failure(); // no message: none shown
    assert_eq!(
        rejected(&b).to_string(),
        "circuit breaker 'users' is open; retry in 1.0s"
    );
    clock.advance(secs(1));
    let _probe = b.try_acquire().unwrap();
    assert_eq!(
        rejected(&b).to_string(),
        "circuit breaker 'users' is half-open and all its probe calls are taken"
    );
    b.force_open();
    assert_eq!(
        rejected(&b).to_string(),
        "circuit breaker 'users' is forced open"
    );
}

/// Two `Breaker::new` breakers with one name are two breakers: each keeps its own last failure,
/// and a rejection still names its breaker and that failure after the breaker's last handle is
/// dropped.
#[test]
fn breakers_that_share_a_name_keep_their_own_last_failure() {
    let config = Config::builder()
        .failures(1)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let a = Breaker::new("same-name", config.clone());
    let b = Breaker::new("same-name", config.clone());
    let c = Breaker::new("other-name", config);
    let _ = a.call(|| Err::<(), _>("refused"));
    assert_eq!(a.last_failure().as_deref(), Some("refused"));
    assert_eq!(b.last_failure(), None);
    assert_eq!(c.last_failure(), None);
    let rejected = a.try_acquire().unwrap_err();
    drop(a);
    assert_eq!(
        rejected.to_string(),
        "circuit breaker 'same-name' is open; retry in 60.0s (last failure: refused)"
    );
}
