//! Every transition and config rule of the breaker, on a `ManualClock`: no test sleeps.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Config, ConfigBuilder, ConfigError, Error, Event, ManualClock, Outcome, Reason,
    RejectReason, Rejected, State, Window, registry,
};

const NS: Duration = Duration::from_nanos(1);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A breaker on a fresh manual clock.
fn breaker(builder: ConfigBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let config = builder.clock(clock.clone()).build().expect("valid config");
    (Breaker::new("b", config), clock)
}

fn fail(b: &Breaker) {
    b.try_acquire().expect("admitted").failure();
}

fn succeed(b: &Breaker) {
    b.try_acquire().expect("admitted").success();
}

fn rejected(b: &Breaker) -> Rejected {
    match b.try_acquire() {
        Ok(p) => panic!("admitted {p:?} in state {:?}", b.state()),
        Err(r) => r,
    }
}

/// Records every event of `b` for later inspection.
fn events(b: &Breaker) -> Arc<Mutex<Vec<Event>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    b.on_state_change(move |e| log.lock().unwrap().push(e.clone()));
    seen
}

fn transitions(seen: &Mutex<Vec<Event>>) -> Vec<(State, State, Reason)> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|e| (e.from, e.to, e.reason))
        .collect()
}

/// Trips a `failures(1)` breaker and lets `open_for` pass so the next call probes.
fn to_half_open(b: &Breaker, clock: &ManualClock) {
    fail(b);
    assert_eq!(b.state(), State::Open);
    clock.advance(b.metrics().retry_after.unwrap());
}

// ---------------------------------------------------------------- consecutive failures

#[test]
fn consecutive_failures_trip_at_exactly_n() {
    let (b, _) = breaker(Config::builder().failures(3));
    let seen = events(&b);
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().consecutive_failures, 2);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::Failures(3))]
    );
    let m = b.metrics();
    assert_eq!((m.failures, m.times_opened), (3, 1));
}

#[test]
fn default_config_trips_after_five() {
    let (b, _) = breaker(Config::builder());
    for _ in 0..4 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().retry_after, Some(secs(60)));
}

#[test]
fn a_success_breaks_the_streak() {
    let (b, _) = breaker(Config::builder().failures(3));
    fail(&b);
    fail(&b);
    succeed(&b);
    assert_eq!(b.metrics().consecutive_failures, 0);
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn an_ignored_call_neither_breaks_nor_extends_the_streak() {
    let (b, _) = breaker(Config::builder().failures(2));
    fail(&b);
    b.try_acquire().unwrap().ignore();
    assert_eq!(b.metrics().consecutive_failures, 1);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn failures_within_restarts_a_streak_older_than_the_span() {
    let (b, clock) = breaker(Config::builder().failures(3).failures_within(secs(10)));
    fail(&b); // t = 0: the streak starts
    clock.advance(secs(5));
    fail(&b);
    clock.advance(secs(5) + NS); // 10 s + 1 ns after the first: too old
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().consecutive_failures, 1, "a new streak started");
    clock.advance(secs(4));
    fail(&b);
    clock.advance(secs(6)); // exactly 10 s after this streak's first failure: still inside
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn repro_stale_probe_moves_the_start_of_a_failures_within_streak() {
    // One word holds both the start of a closed streak and the half-open round's last
    // progress. A probe reporting after its round closed the breaker wrote its progress there,
    // restarting the `failures_within` span of a streak it had nothing to do with.
    let (b, clock) = breaker(
        Config::builder()
            .failures(3)
            .failures_within(secs(10))
            .open_for(secs(1))
            .half_open_calls(2),
    );
    b.trip_for(secs(1));
    clock.advance(secs(1));
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    p1.success(); // closes: the round is over, p2 is stale
    assert_eq!(b.state(), State::Closed);
    fail(&b); // t = 1 s: a streak starts
    clock.advance(secs(9));
    p2.success(); // t = 10 s: stale, must not touch the streak
    clock.advance(secs(3));
    fail(&b); // t = 13 s: 12 s after the streak began: a new streak
    fail(&b);
    assert_eq!(b.metrics().consecutive_failures, 2);
    assert_eq!(b.state(), State::Closed);
}

// ---------------------------------------------------------------- failure rate

fn rate_config(window: Window, min_calls: u32, rate: u8) -> ConfigBuilder {
    Config::builder()
        .failure_rate(rate)
        .window(window)
        .min_calls(min_calls)
}

#[test]
fn failure_rate_over_calls_is_judged_only_from_min_calls() {
    let (b, _) = breaker(rate_config(Window::Calls(10), 4, 50));
    for _ in 0..3 {
        fail(&b); // 100% but only 3 calls
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failures, 3);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn failure_rate_over_calls_trips_when_a_success_crosses_min_calls() {
    let (b, _) = breaker(rate_config(Window::Calls(10), 4, 50));
    fail(&b);
    fail(&b);
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    let seen = events(&b);
    succeed(&b); // 4 calls, 2 failed: 50%
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::FailureRate(50))]
    );
}

#[test]
fn a_failure_rate_of_exactly_the_limit_trips() {
    let (b, _) = breaker(rate_config(Window::Calls(10), 4, 50));
    for _ in 0..3 {
        succeed(&b);
    }
    fail(&b); // 25%
    for _ in 0..20 {
        succeed(&b);
        fail(&b);
        if b.state() == State::Open {
            break;
        }
    }
    // Alternating calls reach exactly 5 of 10 once the window is full of them.
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!(m.window_calls, 10);
    assert_eq!(m.failure_rate, Some(50.0));
}

#[test]
fn failure_rate_over_calls_slides() {
    // A cumulative count would never reach 75% here; the last 4 calls do.
    let (b, _) = breaker(rate_config(Window::Calls(4), 4, 75));
    for _ in 0..8 {
        succeed(&b);
    }
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failure_rate, Some(50.0));
    fail(&b); // S F F F
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().window_calls, 4);
}

#[test]
fn repro_count_window_trip_opens_from_time_zero() {
    // A count window records without reading the clock, and the trip it judged used that
    // missing time (0) as "now": the deadline was `open_for` after the clock's origin, so on
    // the system clock the breaker was past it at once and let the next call probe.
    let (b, clock) = breaker(rate_config(Window::Calls(4), 2, 50).open_for(secs(30)));
    let seen = events(&b);
    clock.advance(secs(3600));
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!(m.retry_after, Some(secs(30)));
    assert_eq!(m.time_in_state, Duration::ZERO);
    assert_eq!(seen.lock().unwrap()[0].at, secs(3600));
    assert_eq!(rejected(&b).reason(), RejectReason::Open);
}

#[test]
fn old_failures_slide_out_of_a_call_window() {
    let (b, _) = breaker(rate_config(Window::Calls(4), 4, 75));
    fail(&b);
    fail(&b);
    succeed(&b);
    succeed(&b); // F F S S: 50%
    succeed(&b);
    succeed(&b); // S S S S: the failures slid out
    assert_eq!(b.metrics().failure_rate, Some(0.0));
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn failure_rate_over_time_is_judged_only_from_min_calls() {
    let (b, _) = breaker(rate_config(Window::Time(secs(10)), 4, 50));
    for _ in 0..3 {
        fail(&b);
    }
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
}

#[test]
fn repro_time_window_success_crossing_min_calls_never_judged() {
    // A count window judges the call that brings it to `min_calls`; a time window did not when
    // that call was a success, so 50% failures stayed closed until the next failure.
    let (b, _) = breaker(rate_config(Window::Time(secs(10)), 4, 50));
    fail(&b);
    fail(&b);
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    succeed(&b); // 4 calls in the window, 2 failed: 50%
    assert_eq!(b.state(), State::Open);
    // After a close, the next crossing is judged again.
    b.reset();
    fail(&b);
    for _ in 0..2 {
        succeed(&b);
    }
    assert_eq!(b.state(), State::Closed);
    fail(&b); // 2 of 4
    assert_eq!(b.state(), State::Open);
    // And once a judgment had enough calls, successes alone are not judged (nothing to trip).
    b.reset();
    for _ in 0..4 {
        succeed(&b);
    }
    fail(&b);
    for _ in 0..10 {
        succeed(&b);
    }
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn old_buckets_slide_out_of_a_time_window() {
    // Ten buckets of one second each.
    let (b, clock) = breaker(rate_config(Window::Time(secs(10)), 2, 60));
    for _ in 0..4 {
        succeed(&b); // t = 0
    }
    clock.advance(secs(5));
    fail(&b);
    fail(&b); // 2 of 6: 33%
    assert_eq!(b.state(), State::Closed);
    clock.advance(secs(5) - NS); // t = 10 s - 1 ns: the first bucket is still in
    assert_eq!(b.metrics().window_calls, 6);
    clock.advance(NS); // t = 10 s: it slid out
    assert_eq!(b.metrics().window_calls, 2);
    succeed(&b); // 2 of 3: 66%
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_time_window_forgets_everything_after_its_span() {
    let (b, clock) = breaker(rate_config(Window::Time(secs(10)), 3, 50));
    fail(&b);
    fail(&b);
    clock.advance(secs(10));
    assert_eq!(b.metrics().window_calls, 0);
    assert_eq!(b.metrics().failure_rate, None);
    succeed(&b);
    succeed(&b);
    fail(&b); // 1 of 3
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn the_window_is_cleared_when_the_breaker_closes() {
    let (b, clock) = breaker(rate_config(Window::Calls(10), 2, 50).open_for(secs(1)));
    fail(&b);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    clock.advance(secs(1));
    succeed(&b); // the probe closes it
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().window_calls, 0);
    succeed(&b);
    fail(&b); // 1 of 2: 50% trips again, judged on the new window only
    assert_eq!(b.state(), State::Open);
}

// ---------------------------------------------------------------- slow calls

#[test]
fn slow_calls_count_as_failures() {
    let (b, clock) = breaker(Config::builder().failures(2).slow(ms(100)));
    let p = b.try_acquire().unwrap();
    clock.advance(ms(100) - NS);
    p.success(); // just fast enough
    assert_eq!(b.metrics().consecutive_failures, 0);
    for _ in 0..2 {
        let p = b.try_acquire().unwrap();
        clock.advance(ms(100));
        p.success();
    }
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!((m.successes, m.failures, m.slow), (3, 0, 2));
}

#[test]
fn slow_calls_trip_by_their_own_rate() {
    let (b, clock) = breaker(
        Config::builder()
            .slow(ms(100))
            .slow_rate(50)
            .window(Window::Calls(10))
            .min_calls(4),
    );
    let seen = events(&b);
    for _ in 0..3 {
        let p = b.try_acquire().unwrap();
        clock.advance(ms(150));
        p.success();
    }
    // With their own rate, slow calls do not count as consecutive failures.
    assert_eq!(b.metrics().consecutive_failures, 0);
    assert_eq!(b.state(), State::Closed, "3 calls are fewer than min_calls");
    succeed(&b); // 3 slow of 4
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::SlowRate(75))]
    );
}

#[test]
fn slow_calls_count_into_a_failure_rate() {
    let (b, clock) = breaker(rate_config(Window::Calls(4), 2, 100).slow(ms(10)));
    for _ in 0..2 {
        let p = b.try_acquire().unwrap();
        clock.advance(ms(10));
        p.success();
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_slow_probe_reopens() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .slow(ms(100))
            .open_for(secs(1)),
    );
    to_half_open(&b, &clock);
    let p = b.try_acquire().unwrap();
    clock.advance(ms(100));
    p.success();
    assert_eq!(b.state(), State::Open);
}

// ---------------------------------------------------------------- open and half-open

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

#[test]
fn backoff_grows_per_reopen_up_to_max_open_for_and_resets_on_close() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .backoff(2.0)
            .max_open_for(secs(5)),
    );
    fail(&b);
    let mut seen = vec![];
    for _ in 0..5 {
        let wait = b.metrics().retry_after.unwrap();
        seen.push(wait);
        clock.advance(wait);
        fail(&b); // the probe fails
    }
    assert_eq!(seen, [secs(1), secs(2), secs(4), secs(5), secs(5)]);
    clock.advance(secs(5));
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(1)), "back to the base");
}

#[test]
fn backoff_default_cap_is_five_minutes() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(100))
            .backoff(10.0),
    );
    assert_eq!(b.config().max_open_for(), secs(300));
    fail(&b);
    clock.advance(secs(100));
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(300)));
}

#[test]
fn reset_restores_the_base_open_time() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)).backoff(3.0));
    fail(&b);
    clock.advance(secs(1));
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(3)));
    b.reset();
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(1)));
}

#[test]
fn jitter_stays_within_its_bounds() {
    let mut waits = vec![];
    for _ in 0..50 {
        let (b, clock) = breaker(
            Config::builder()
                .failures(1)
                .open_for(secs(10))
                .max_open_for(secs(100))
                .jitter(0.25),
        );
        for _ in 0..4 {
            fail(&b);
            let wait = b.metrics().retry_after.unwrap();
            assert!(
                (ms(7500)..=ms(12500)).contains(&wait),
                "{wait:?} outside 10 s ± 25%"
            );
            waits.push(wait);
            clock.advance(wait);
            succeed(&b);
        }
    }
    waits.sort();
    waits.dedup();
    assert!(waits.len() > 20, "jitter varies: {waits:?}");
    assert!(waits.iter().any(|w| *w < secs(10)) && waits.iter().any(|w| *w > secs(10)));
}

#[test]
fn repro_jitter_never_lengthens_at_the_cap() {
    // The jittered time was capped at max_open_for again, which by default is open_for: every
    // draw that should lengthen gave exactly open_for, so half the breakers of a fleet probed
    // in step, and "lengthen or shorten" only ever shortened.
    let mut longer = 0;
    let mut alive = vec![]; // distinct breakers: the draw mixes in the breaker's address
    for _ in 0..40 {
        let (b, _) = breaker(Config::builder().failures(1).open_for(secs(10)).jitter(0.2));
        fail(&b);
        alive.push(b.clone());
        let wait = b.metrics().retry_after.unwrap();
        assert!((secs(8)..=secs(12)).contains(&wait), "{wait:?}");
        longer += usize::from(wait > secs(10));
    }
    assert!(longer > 5, "only {longer} of 40 open times were lengthened");
}

#[test]
fn full_jitter_never_gives_a_zero_open_time() {
    for _ in 0..50 {
        let (b, _) = breaker(
            Config::builder()
                .failures(1)
                .open_for(NS)
                .max_open_for(ms(1))
                .jitter(1.0),
        );
        fail(&b);
        assert_eq!(b.state(), State::Open);
    }
}

// ---------------------------------------------------------------- TripFor and manual control

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
fn exported_state_imports_into_another_breaker() {
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
    // Half-open and closed import too; a closed import resets the backoff.
    let (other, other_clock) = breaker(config());
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
    let _ = other_clock;
}

// ---------------------------------------------------------------- permits

#[test]
fn a_permit_dropped_while_panicking_is_a_failure() {
    let (b, _) = breaker(Config::builder().failures(2));
    for _ in 0..2 {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _permit = b.try_acquire().unwrap();
            panic!("boom");
        }));
        assert!(r.is_err());
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.metrics().failures, 2);
}

#[test]
fn a_panic_in_call_is_a_failure_and_resumes() {
    let (b, _) = breaker(Config::builder().failures(1));
    let r = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), &str> { panic!("boom") })
    }));
    assert_eq!(*r.unwrap_err().downcast::<&str>().unwrap(), "boom");
    assert_eq!(b.state(), State::Open);
}

#[test]
fn a_permit_dropped_otherwise_is_ignored() {
    let (b, _) = breaker(Config::builder().failures(1));
    drop(b.try_acquire().unwrap());
    let m = b.metrics();
    assert_eq!((m.calls, m.ignored, m.failures), (1, 1, 0));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_dropped_call_async_future_is_ignored() {
    let (b, _) = breaker(Config::builder().failures(1));
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut fut = Box::pin(b.call_async(async {
        std::future::pending::<()>().await;
        Err::<(), _>("never")
    }));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    drop(fut);
    let m = b.metrics();
    assert_eq!((m.calls, m.ignored, m.failures), (1, 1, 0));
    assert_eq!(b.state(), State::Closed);
}

#[test]
fn a_stale_permit_does_not_affect_the_new_state_but_is_counted() {
    // Closed permit, then a reset: its failure would trip a `failures(1)` breaker.
    let (b, _) = breaker(Config::builder().failures(1));
    let held = b.try_acquire().unwrap();
    b.reset_and_check();
    held.failure();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().failures, 1);
    assert_eq!(b.metrics().consecutive_failures, 0);

    // Closed permit outliving a trip: its failure does not reopen or count again.
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)));
    let held = b.try_acquire().unwrap();
    to_half_open(&b, &clock);
    held.failure();
    assert_eq!(b.state(), State::Open, "still the first opening");
    assert_eq!(b.metrics().times_opened, 1);
    assert_eq!(b.metrics().retry_after, Some(Duration::ZERO));

    // A probe outliving its round.
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .half_open_calls(2),
    );
    to_half_open(&b, &clock);
    let p1 = b.try_acquire().unwrap();
    let p2 = b.try_acquire().unwrap();
    p1.success();
    assert_eq!(b.state(), State::Closed);
    p2.failure();
    assert_eq!(b.state(), State::Closed);
    let m = b.metrics();
    assert_eq!((m.successes, m.failures), (1, 2));

    // A rate-window permit.
    let (b, _) = breaker(rate_config(Window::Calls(10), 1, 50));
    let held = b.try_acquire().unwrap();
    b.reset();
    held.failure();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.metrics().window_calls, 0);
}

trait ResetAndCheck {
    fn reset_and_check(&self);
}
impl ResetAndCheck for Breaker {
    fn reset_and_check(&self) {
        self.reset();
        assert_eq!(self.state(), State::Closed);
    }
}

#[test]
fn metrics_add_up() {
    let (b, clock) = breaker(Config::builder().failures(2).open_for(secs(1)));
    succeed(&b);
    fail(&b);
    b.try_acquire().unwrap().ignore();
    fail(&b);
    rejected(&b);
    rejected(&b);
    clock.advance(ms(300));
    let m = b.metrics();
    assert_eq!(m.name, "b");
    assert_eq!(m.state, State::Open);
    assert_eq!(m.time_in_state, ms(300));
    assert_eq!(
        (m.calls, m.successes, m.failures, m.ignored, m.rejected),
        (6, 1, 2, 1, 2)
    );
    assert_eq!(m.calls, m.successes + m.failures + m.ignored + m.rejected);
    assert_eq!(m.times_opened, 1);
    assert_eq!(m.retry_after, Some(ms(700)));
    assert_eq!(
        (m.window_calls, m.failure_rate, m.slow_rate),
        (0, None, None)
    );
}

// ---------------------------------------------------------------- errors

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
        crate::rejected(&b).to_string(),
        "circuit breaker 'x' is open; retry in 150ms (last failure: boom)"
    );
    clock.advance(ms(150) - NS);
    assert_eq!(
        crate::rejected(&b).to_string(),
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

// ---------------------------------------------------------------- listeners and tracing

#[test]
fn listeners_receive_every_transition() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)));
    let a = events(&b);
    let c = events(&b);
    fail(&b);
    clock.advance(secs(1));
    fail(&b);
    clock.advance(secs(1));
    succeed(&b);
    b.force_open();
    b.disable();
    b.trip_for(secs(2));
    b.reset();
    let want = [
        (State::Closed, State::Open, Reason::Failures(1)),
        (State::Open, State::HalfOpen, Reason::OpenElapsed),
        (State::HalfOpen, State::Open, Reason::ProbeFailed),
        (State::Open, State::HalfOpen, Reason::OpenElapsed),
        (State::HalfOpen, State::Closed, Reason::ProbesSucceeded),
        (State::Closed, State::ForcedOpen, Reason::ForcedOpen),
        (State::ForcedOpen, State::Disabled, Reason::Disabled),
        (State::Disabled, State::Open, Reason::TripFor(secs(2))),
        (State::Open, State::Closed, Reason::Reset),
    ];
    assert_eq!(transitions(&a), want);
    assert_eq!(transitions(&c), want);
    let at: Vec<_> = a.lock().unwrap().iter().map(|e| e.at).collect();
    assert_eq!(at[0], Duration::ZERO);
    assert_eq!(at[1], secs(1));
    assert_eq!(at[4], secs(2));
    assert!(a.lock().unwrap().iter().all(|e| e.name == "b"));
}

#[test]
fn a_listener_may_change_the_state_itself() {
    // Events are delivered one at a time, in order; a listener's own transition is queued
    // behind the one it is told, not delivered inside it, and nothing deadlocks.
    let (b, _) = breaker(Config::builder().failures(1));
    let seen = events(&b);
    // A weak handle: a strong one in the breaker's own listener would keep it alive for ever.
    let handle = b.downgrade();
    b.on_state_change(move |e| {
        if e.to == State::Open
            && let Some(b) = handle.upgrade()
        {
            b.reset();
        }
    });
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        transitions(&seen),
        [
            (State::Closed, State::Open, Reason::Failures(1)),
            (State::Open, State::Closed, Reason::Reset),
        ]
    );
}

#[test]
fn a_panicking_listener_reaches_no_caller_and_stops_nothing() {
    // The listener's panic is caught and logged; the caller's call returns as usual, the
    // listener after it hears the event, and later events are told.
    let (b, _) = breaker(Config::builder().failures(1));
    b.on_state_change(|e| {
        if e.to == State::Open {
            panic!("listener: boom");
        }
    });
    let seen = events(&b);
    let logged = capture::run(|| fail(&b));
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        transitions(&seen),
        [(State::Closed, State::Open, Reason::Failures(1))]
    );
    let errors: Vec<_> = logged
        .iter()
        .filter(|e| e.level == tracing::Level::ERROR)
        .collect();
    assert_eq!(errors.len(), 1, "{logged:#?}");
    assert_eq!(errors[0].target, "breakerbox");
    assert_eq!(errors[0].fields["name"], "b");
    assert_eq!(errors[0].fields["panic"], "listener: boom");
    b.reset();
    assert_eq!(
        transitions(&seen).last(),
        Some(&(State::Open, State::Closed, Reason::Reset))
    );
}

mod capture {
    //! A `tracing` subscriber that keeps every event it sees.
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::fmt;
    use std::sync::Once;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::subscriber::Interest;
    use tracing::{Level, Metadata, Subscriber};

    #[derive(Clone, Debug)]
    pub struct Seen {
        pub target: String,
        pub level: Level,
        pub fields: BTreeMap<String, String>,
    }

    /// Installed once as the global subscriber, so that no callsite's interest is ever cached
    /// as "never" by a race between scoped subscribers of tests on other threads; it keeps the
    /// events of the threads inside [`run`].
    pub struct Capture;

    thread_local!(static SEEN: RefCell<Option<Vec<Seen>>> = const { RefCell::new(None) });

    struct Fields<'a>(&'a mut BTreeMap<String, String>);
    impl Visit for Fields<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
            self.0.insert(field.name().to_owned(), format!("{value:?}"));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.insert(field.name().to_owned(), value.to_owned());
        }
    }

    impl Subscriber for Capture {
        fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
            Interest::sometimes()
        }
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut fields = BTreeMap::new();
            event.record(&mut Fields(&mut fields));
            let seen = Seen {
                target: event.metadata().target().to_owned(),
                level: *event.metadata().level(),
                fields,
            };
            SEEN.with(|s| {
                if let Some(v) = s.borrow_mut().as_mut() {
                    v.push(seen);
                }
            });
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Runs `f` with a capturing subscriber on this thread; returns what it saw.
    pub fn run(f: impl FnOnce()) -> Vec<Seen> {
        static INIT: Once = Once::new();
        INIT.call_once(|| tracing::subscriber::set_global_default(Capture).unwrap());
        SEEN.with(|s| *s.borrow_mut() = Some(Vec::new()));
        f();
        SEEN.with(|s| s.borrow_mut().take().unwrap())
    }
}

#[test]
fn every_transition_is_a_tracing_event() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(secs(1)));
    let b = Breaker::new("traced", b.config().clone());
    let seen = capture::run(|| {
        b.call(|| Err::<(), _>("connection refused")).unwrap_err();
        clock.advance(secs(1));
        succeed(&b);
    });
    let changes: Vec<_> = seen
        .iter()
        .filter(|e| {
            e.fields.get("message").map(String::as_str) == Some("circuit breaker state changed")
        })
        .collect();
    assert_eq!(changes.len(), 3, "{seen:#?}");
    let fields = |i: usize, k: &str| changes[i].fields[k].clone();
    assert!(changes.iter().all(|e| e.target == "breakerbox"));
    assert!(
        changes
            .iter()
            .all(|e| fields(0, "name") == "traced" && e.fields["name"] == "traced")
    );
    assert_eq!(
        (fields(0, "from"), fields(0, "to"), fields(0, "reason")),
        (
            "closed".into(),
            "open".into(),
            "1 consecutive failure".into()
        )
    );
    assert_eq!(changes[0].level, tracing::Level::WARN);
    assert_eq!(
        (fields(1, "from"), fields(1, "to"), fields(1, "reason")),
        (
            "open".into(),
            "half-open".into(),
            "open time elapsed".into()
        )
    );
    assert_eq!(
        (fields(2, "from"), fields(2, "to"), fields(2, "reason")),
        (
            "half-open".into(),
            "closed".into(),
            "probes succeeded".into()
        )
    );
    assert_eq!(changes[2].level, tracing::Level::INFO);
    // Failures are logged at debug, with their cause.
    let failed: Vec<_> = seen
        .iter()
        .filter(|e| e.fields.get("message").map(String::as_str) == Some("call failed"))
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].level, tracing::Level::DEBUG);
    assert_eq!(failed[0].fields["cause"], "connection refused");
}

// ---------------------------------------------------------------- registry

/// The registry is one per process and `reset_all` reaches every breaker in it: tests that
/// change registry breakers take turns.
fn registry_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn registry_shares_one_breaker_per_name() {
    let _serial = registry_lock();
    let a = registry().get_or_create("transitions.shared", || {
        Config::builder().failures(2).build().unwrap()
    });
    let b = registry().get_or_create("transitions.shared", || {
        Config::builder().failures(2).build().unwrap()
    });
    assert!(a.ptr_eq(&b));
    assert!(registry().get("transitions.shared").unwrap().ptr_eq(&a));
    assert!(registry().get("transitions.nobody").is_none());
    fail(&a);
    fail(&b);
    assert_eq!(a.state(), State::Open);
    assert!(registry().breakers().iter().any(|x| x.ptr_eq(&a)));
    let snap = registry().snapshot();
    assert!(snap.windows(2).all(|w| w[0].name <= w[1].name));
    assert_eq!(
        snap.iter()
            .find(|m| m.name == "transitions.shared")
            .unwrap()
            .state,
        State::Open
    );
}

#[test]
fn registry_configure_wins_over_the_call_site() {
    let _serial = registry_lock();
    assert!(registry().configure(
        "transitions.preset",
        Config::builder().failures(1).build().unwrap()
    ));
    let seen = capture::run(|| {
        let b = registry().get_or_create("transitions.preset", Config::default);
        assert_eq!(b.config().failures(), Some(1));
        // The preset was chosen on purpose: no warning for call sites that differ from it.
        registry().get_or_create("transitions.preset", Config::default);
    });
    assert!(
        seen.iter().all(|e| e.level != tracing::Level::WARN),
        "{seen:#?}"
    );
    assert!(!registry().configure("transitions.preset", Config::default()));
}

#[test]
fn registry_set_clock_gives_the_breaker_that_clock() {
    let _serial = registry_lock();
    let clock = ManualClock::new();
    assert!(registry().set_clock("transitions.clock", clock.clone()));
    let b = registry().get_or_create("transitions.clock", || {
        Config::builder()
            .failures(1)
            .open_for(secs(5))
            .build()
            .unwrap()
    });
    fail(&b);
    assert_eq!(b.metrics().retry_after, Some(secs(5)));
    clock.advance(secs(5));
    succeed(&b);
    assert_eq!(b.state(), State::Closed);
    assert!(!registry().set_clock("transitions.clock", ManualClock::new()));
}

#[test]
fn registry_warns_once_when_call_sites_differ() {
    let _serial = registry_lock();
    let seen = capture::run(|| {
        let first = registry().get_or_create("transitions.differ", || {
            Config::builder().failures(2).build().unwrap()
        });
        for _ in 0..3 {
            let other = registry().get_or_create("transitions.differ", || {
                Config::builder().failures(7).build().unwrap()
            });
            assert!(other.ptr_eq(&first));
            assert_eq!(other.config().failures(), Some(2), "the first one wins");
        }
        // The same config, with another clock, is not a difference.
        registry().get_or_create("transitions.differ", || {
            Config::builder()
                .failures(2)
                .clock(ManualClock::new())
                .build()
                .unwrap()
        });
    });
    let warnings: Vec<_> = seen
        .iter()
        .filter(|e| e.level == tracing::Level::WARN && e.target == "breakerbox")
        .collect();
    assert_eq!(warnings.len(), 1, "{seen:#?}");
    assert_eq!(warnings[0].fields["name"], "transitions.differ");
}

#[test]
fn registry_listeners_receive_every_transition() {
    let _serial = registry_lock();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    registry().on_state_change(move |e| {
        if e.name == "transitions.listened" {
            log.lock().unwrap().push((e.from, e.to, e.reason));
        }
    });
    let clock = ManualClock::new();
    registry().set_clock("transitions.listened", clock.clone());
    let b = registry().get_or_create("transitions.listened", || {
        Config::builder()
            .failures(1)
            .open_for(secs(1))
            .build()
            .unwrap()
    });
    fail(&b);
    clock.advance(secs(1));
    succeed(&b);
    b.force_open();
    registry().reset_all();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (State::Closed, State::Open, Reason::Failures(1)),
            (State::Open, State::HalfOpen, Reason::OpenElapsed),
            (State::HalfOpen, State::Closed, Reason::ProbesSucceeded),
            (State::Closed, State::ForcedOpen, Reason::ForcedOpen),
            (State::ForcedOpen, State::Closed, Reason::Reset),
        ]
    );
}

// ---------------------------------------------------------------- config

#[track_caller]
fn invalid(builder: ConfigBuilder, field: &str, message: &str) {
    let err: ConfigError = builder.build().expect_err("invalid config");
    assert_eq!(err.field(), field, "{err}");
    assert_eq!(err.to_string(), message);
}

#[test]
fn every_invalid_config_names_its_field() {
    let b = Config::builder;
    invalid(
        b().failures(0),
        "failures",
        "`failures` must be at least 1, got 0",
    );
    invalid(
        b().failures_within(Duration::ZERO),
        "failures_within",
        "`failures_within` must be longer than zero, got 0ns",
    );
    invalid(
        b().failures_within(secs(1)).failure_rate(50),
        "failures_within",
        "`failures_within` cannot be combined with `failure_rate`: a failure rate already counts over its `window`",
    );
    invalid(
        b().failure_rate(0),
        "failure_rate",
        "`failure_rate` must be a percentage from 1 to 100, got 0",
    );
    invalid(
        b().failure_rate(101),
        "failure_rate",
        "`failure_rate` must be a percentage from 1 to 100, got 101",
    );
    invalid(
        b().slow(ms(1)).slow_rate(0),
        "slow_rate",
        "`slow_rate` must be a percentage from 1 to 100, got 0",
    );
    invalid(
        b().slow(ms(1)).slow_rate(255),
        "slow_rate",
        "`slow_rate` must be a percentage from 1 to 100, got 255",
    );
    invalid(
        b().failures(3).failure_rate(50),
        "failures",
        "`failures` cannot be combined with `failure_rate`: trip either on consecutive failures or on a failure rate",
    );
    invalid(
        b().failure_rate(50).window(Window::Calls(0)),
        "window",
        "`window` must be from 1 to 10000 calls, got 0",
    );
    invalid(
        b().failure_rate(50).window(Window::Calls(10_001)),
        "window",
        "`window` must be from 1 to 10000 calls, got 10001",
    );
    invalid(
        b().failure_rate(50).window(Window::Time(ms(9))),
        "window",
        "`window` must be at least 10ms, got 9ms",
    );
    invalid(
        b().failure_rate(50).min_calls(0),
        "min_calls",
        "`min_calls` must be at least 1, got 0",
    );
    invalid(
        b().failure_rate(50).window(Window::Calls(5)).min_calls(6),
        "min_calls",
        "`min_calls` must be at most the window's size, got 6 with a window of 5 calls",
    );
    invalid(
        b().window(Window::Calls(5)),
        "window",
        "`window` requires `failure_rate` or `slow_rate`",
    );
    invalid(
        b().min_calls(5),
        "min_calls",
        "`min_calls` requires `failure_rate` or `slow_rate`",
    );
    invalid(
        b().slow(Duration::ZERO),
        "slow",
        "`slow` must be longer than zero, got 0ns",
    );
    invalid(
        b().slow_rate(50),
        "slow_rate",
        "`slow_rate` requires `slow`, the duration from which a call is slow",
    );
    invalid(
        b().open_for(Duration::ZERO),
        "open_for",
        "`open_for` must be longer than zero, got 0ns",
    );
    invalid(
        b().open_for(secs(10)).max_open_for(secs(5)),
        "max_open_for",
        "`max_open_for` must be at least `open_for`, got 5s with open_for 10s",
    );
    for bad in [0.0, 0.99, 100.5, f64::NAN, f64::INFINITY, -1.0] {
        invalid(
            b().backoff(bad),
            "backoff",
            &format!("`backoff` must be a factor from 1.0 to 100.0, got {bad:?}"),
        );
    }
    for bad in [-0.1, 1.01, f64::NAN, f64::NEG_INFINITY] {
        invalid(
            b().jitter(bad),
            "jitter",
            &format!("`jitter` must be a fraction from 0.0 to 1.0, got {bad:?}"),
        );
    }
    invalid(
        b().half_open_calls(0),
        "half_open_calls",
        "`half_open_calls` must be from 1 to 65535, got 0",
    );
    invalid(
        b().half_open_calls(65_536),
        "half_open_calls",
        "`half_open_calls` must be from 1 to 65535, got 65536",
    );
    invalid(
        b().successes(0),
        "successes",
        "`successes` must be from 1 to `half_open_calls` (a round admits no more probes), got 0 with half_open_calls 1",
    );
    invalid(
        b().half_open_calls(2).successes(3),
        "successes",
        "`successes` must be from 1 to `half_open_calls` (a round admits no more probes), got 3 with half_open_calls 2",
    );
    invalid(
        b().probe_timeout(Duration::ZERO),
        "probe_timeout",
        "`probe_timeout` must be longer than zero, got 0ns",
    );
    invalid(
        b().max_concurrent(0),
        "max_concurrent",
        "`max_concurrent` must be at least 1, got 0",
    );
}

#[test]
fn valid_edge_configs_build() {
    let ok = |b: ConfigBuilder| b.build().unwrap();
    assert_eq!(
        ok(Config::builder().failure_rate(100)).failure_rate(),
        Some(100)
    );
    assert_eq!(ok(Config::builder().failure_rate(1)).failures(), None);
    // The default min_calls adapts to a smaller count window.
    assert_eq!(
        ok(Config::builder().failure_rate(50).window(Window::Calls(3))).min_calls(),
        3
    );
    ok(Config::builder()
        .failure_rate(50)
        .window(Window::Calls(10_000))
        .min_calls(10_000));
    ok(Config::builder()
        .failure_rate(50)
        .window(Window::Time(ms(10))));
    ok(Config::builder().backoff(1.0).jitter(0.0));
    ok(Config::builder().backoff(100.0).jitter(1.0));
    ok(Config::builder().half_open_calls(65_535).successes(65_535));
    ok(Config::builder().slow(NS).slow_rate(100));
    ok(Config::builder().open_for(secs(5)).max_open_for(secs(5)));
    let c = ok(Config::builder().open_for(secs(5)).backoff(2.0));
    assert_eq!(c.max_open_for(), secs(300));
    let c = ok(Config::builder().open_for(secs(500)).backoff(2.0));
    assert_eq!(c.max_open_for(), secs(500));
}

#[test]
fn extreme_configs_never_panic() {
    let huge = Duration::MAX;
    let configs = [
        Config::builder()
            .failures(1)
            .open_for(huge)
            .probe_timeout(huge)
            .backoff(100.0)
            .jitter(1.0),
        Config::builder()
            .failures(u32::MAX)
            .failures_within(huge)
            .slow(huge),
        Config::builder()
            .failure_rate(1)
            .window(Window::Time(huge))
            .min_calls(u32::MAX),
        Config::builder()
            .slow(NS)
            .slow_rate(1)
            .window(Window::Time(ms(10)))
            .min_calls(1),
        Config::builder()
            .failures(1)
            .open_for(NS)
            .backoff(100.0)
            .max_open_for(huge)
            .jitter(1.0)
            .probe_timeout(NS),
    ];
    for builder in configs {
        let (b, clock) = breaker(builder);
        for i in 0..200u64 {
            match b.try_acquire() {
                Ok(p) => {
                    clock.advance(Duration::from_nanos(i * 7919));
                    match i % 4 {
                        0 => p.failure(),
                        1 => p.success(),
                        2 => p.record(Outcome::TripFor(huge)),
                        _ => drop(p),
                    }
                }
                Err(r) => {
                    let _ = r.to_string();
                }
            }
            if i % 50 == 49 {
                b.reset();
            }
            clock.advance(Duration::from_secs(i * i * 1_000_000));
            let m = b.metrics();
            assert_eq!(m.calls, m.successes + m.failures + m.ignored + m.rejected);
        }
    }
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

/// A time window's bucket stamps are 32 bits wide. Where the bucket number crosses 2^32 (every
/// 49.7 days of uptime for a 10 ms window), ten consecutive buckets must still be ten distinct
/// slots: none written over while still in the window.
#[test]
fn a_time_window_keeps_every_bucket_where_its_stamps_wrap() {
    let (b, clock) = breaker(rate_config(
        Window::Time(Duration::from_millis(10)),
        100,
        50,
    ));
    // Buckets are 1 ms wide; the middle of bucket k is at k ms + 0.5 ms.
    let first = (1u64 << 32) - 6;
    for k in first..first + 10 {
        clock.set(Duration::from_nanos(k * 1_000_000 + 500_000));
        succeed(&b);
        fail(&b);
    }
    let m = b.metrics();
    assert_eq!(m.window_calls, 20);
    assert_eq!(m.failure_rate, Some(50.0));
    // One bucket later the oldest has slid out, and only it.
    clock.set(Duration::from_nanos((first + 10) * 1_000_000 + 500_000));
    assert_eq!(b.metrics().window_calls, 18);
}
