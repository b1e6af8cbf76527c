//! Open and half-open: when a breaker probes, how many probes run, what closes or reopens it.

use crate::support::{
    NS, breaker, events, fail, ms, rejected, secs, succeed, to_half_open, transitions,
};

use breakerbox_runtime::{Config, Reason, RejectReason, State};

#[test]
fn open_becomes_half_open_after_open_for_and_not_a_nanosecond_before() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(2)));
    let seen = events(&b);
    fail(&b);
    let r = rejected(&b);
    assert_eq!(r.reason(), RejectReason::Open);
    assert_eq!(r.retry_after(), Some(secs(2)));
    clock.advance(ms(800));
    assert_eq!(rejected(&b).retry_after(), Some(ms(1200)));
    assert_eq!(b.metrics().retry_after, Some(ms(1200)));
    clock.advance(ms(1200) - NS);
    assert_eq!(rejected(&b).retry_after(), Some(NS));
    assert_eq!(b.state(), State::Open);
    clock.advance(NS);
    let p = b.try_acquire().expect("open_for has passed");
    assert!(p.is_probe());
    assert_eq!(b.state(), State::HalfOpen);
    p.success();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        transitions(&seen),
        [
            (State::Closed, State::Open, Reason::Failures(1)),
            (State::Open, State::HalfOpen, Reason::OpenElapsed),
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded),
        ]
    );
    let m = b.metrics();
    assert_eq!((m.rejected, m.calls), (3, 5));
}

#[test]
fn half_open_admits_exactly_half_open_calls() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .half_open_calls(3)
            .successes(3),
    );
    to_half_open(&b, &clock);
    let probes: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert!(probes.iter().all(|p| p.is_probe()));
    let r = rejected(&b);
    assert_eq!(r.reason(), RejectReason::HalfOpenFull);
    assert_eq!(r.retry_after(), None);
    let mut probes = probes.into_iter();
    probes.next().unwrap().success();
    assert_eq!(b.metrics().consecutive_successes, 1);
    // A success does not free a slot: the round is 3 probes.
    rejected(&b);
    probes.next().unwrap().success();
    assert_eq!(b.state(), State::HalfOpen);
    probes.next().unwrap().success();
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_failed_probe_reopens() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .half_open_calls(2)
            .successes(2),
    );
    let seen = events(&b);
    to_half_open(&b, &clock);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    p1.success();
    p2.failure();
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().retry_after, Some(secs(1)));
    assert_eq!(b.metrics().times_opened, 2);
    assert_eq!(
        transitions(&seen)[2],
        (State::HalfOpen, State::Open, Reason::ProbeFailed)
    );
}

#[test]
fn successes_successful_probes_close() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .half_open_calls(3)
            .successes(2),
    );
    to_half_open(&b, &clock);
    succeed(&b);
    assert_eq!(b.state(), State::HalfOpen);
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().consecutive_successes, 0);
}

#[test]
fn ignored_frees_a_probe_slot() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)));
    to_half_open(&b, &clock);
    let p = b.try_acquire().unwrap();
    rejected(&b);
    p.ignore();
    assert_eq!(b.state(), State::HalfOpen);
    let p = b.try_acquire().expect("the slot was freed");
    drop(p); // a cancelled probe frees it too
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn probe_timeout_unsticks_a_round_whose_probes_never_report() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .probe_timeout(secs(5)),
    );
    let seen = events(&b);
    to_half_open(&b, &clock);
    let hung = b.try_acquire().unwrap();
    clock.advance(secs(5) - NS);
    assert_eq!(rejected(&b).reason(), RejectReason::HalfOpenFull);
    assert_eq!(b.state(), State::HalfOpen);
    clock.advance(NS);
    let r = rejected(&b);
    assert_eq!(b.state(), State::Open, "the round timed out");
    // The caller that found the round stuck is told what the breaker is now: open, and when
    // to retry (the second opening, so `open_for` again without backoff).
    assert_eq!(
        (r.reason(), r.retry_after()),
        (RejectReason::Open, Some(secs(1)))
    );
    assert_eq!(
        transitions(&seen)[2],
        (State::HalfOpen, State::Open, Reason::ProbeTimeout)
    );
    clock.advance(secs(1));
    let p = b.try_acquire().expect("a new round");
    p.success();
    assert_eq!(b.state(), State::Closed);
    hung.failure(); // stale: from the timed-out round
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failures, 2);
}

/// Probes cancelled one after another (a timeout wrapped around the breaker, over a hung
/// service) free their slots only while the round is younger than `probe_timeout`: the first
/// cancelled after it ends the round, and the breaker opens again instead of sending every
/// call to the service, half-open for good.
#[test]
fn probe_timeout_ends_a_round_whose_probes_are_cancelled_one_after_another() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .probe_timeout(secs(5)),
    );
    let seen = events(&b);
    to_half_open(&b, &clock);
    for _ in 0..9 {
        let probe = b.try_acquire().expect("the slot was freed");
        clock.advance(ms(500));
        drop(probe);
        assert_eq!(b.state(), State::HalfOpen);
    }
    let probe = b.try_acquire().expect("the slot was freed");
    clock.advance(ms(500));
    drop(probe);
    assert_eq!(b.state(), State::Open, "the round timed out");
    assert_eq!(
        transitions(&seen)[2],
        (State::HalfOpen, State::Open, Reason::ProbeTimeout)
    );
    assert_eq!(b.metrics().ignored, 10);
    clock.advance(secs(1));
    b.try_acquire().expect("a new round").success();
    assert_eq!(b.state(), State::Closed);
}

/// After a quiet spell longer than `probe_timeout` in half-open, the first probe that ends
/// ignored (a classifier's `Ignored`, a cancelled call) frees its slot: the round's time runs
/// from its first probe, so a probe that never hung does not re-open the breaker.
#[test]
fn an_ignored_probe_after_a_quiet_spell_frees_its_slot() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .probe_timeout(secs(5)),
    );
    to_half_open(&b, &clock);
    clock.advance(secs(600));
    b.try_acquire().unwrap().ignore();
    assert_eq!(b.state(), State::HalfOpen);
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
}

/// A reload that lowers `successes` (with `half_open_calls`) to what the round under way has
/// already passed applies to that round, as `reconfigure` promises: the next call finds the
/// breaker closed. Without it the round had no probe left to admit and no success to come,
/// and re-opened at `probe_timeout` though every probe had succeeded.
#[test]
fn a_reconfigure_lowering_successes_to_what_the_round_passed_closes_it() {
    let config = || {
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .probe_timeout(secs(10))
    };
    let (b, clock) = breaker(config().half_open_calls(3).successes(3));
    let seen = events(&b);
    to_half_open(&b, &clock);
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().success();
    assert_eq!(b.state(), State::HalfOpen);
    let lower = config().half_open_calls(2).successes(2).build().unwrap();
    assert!(b.reconfigure(lower).unwrap());
    let p = b.try_acquire().expect("the round has its successes");
    assert!(!p.is_probe());
    p.success();
    clock.advance(secs(10));
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        transitions(&seen).last(),
        Some(&(State::HalfOpen, State::Closed, Reason::ProbesSucceeded))
    );
}
