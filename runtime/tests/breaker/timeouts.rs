//! Calls that ran past their timeout (`Permit::timed_out`): failures that count toward
//! tripping, counted among the timeouts too, with the timeout's text as their message and at
//! least the timeout as their latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use breakerbox_runtime::{BreakerMap, Config, ManualClock, State, Timeout, Window};

use crate::support::{breaker, ms, rate_config, rejected, secs, succeed, to_half_open};

fn time_out(b: &breakerbox_runtime::Breaker, after: Duration) {
    b.try_acquire()
        .expect("admitted")
        .timed_out(&Timeout::new(b.name(), after));
}

#[test]
fn a_timeout_is_a_failure_and_a_timeout_and_trips_as_one() {
    let (b, _clock) = breaker(Config::builder().failures(2));
    succeed(&b);
    time_out(&b, secs(2));
    let m = b.metrics();
    assert_eq!(
        (
            m.calls,
            m.successes,
            m.failures,
            m.timeouts,
            m.consecutive_failures
        ),
        (2, 1, 1, 1, 1)
    );
    assert_eq!(b.state(), State::Closed);
    time_out(&b, secs(2));
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!((m.failures, m.timeouts), (2, 2));
    // The message says what happened, everywhere the last failure shows.
    let text = "call through circuit breaker 'b' timed out after 2.0s";
    assert_eq!(b.last_failure().as_deref(), Some(text));
    assert_eq!(m.last_failure.as_deref(), Some(text));
    let explained = b.explain().to_string();
    assert!(
        explained.contains(&format!("last failure: '{text}'")),
        "{explained}"
    );
    assert!(
        rejected(&b)
            .to_string()
            .ends_with(&format!("(last failure: {text})")),
        "{}",
        rejected(&b)
    );
    // Rejections are not timeouts.
    assert_eq!(b.metrics().timeouts, 2);
}

#[test]
fn an_owned_permit_records_a_timeout_too() {
    let (b, _clock) = breaker(Config::builder().failures(5));
    b.try_acquire_owned()
        .unwrap()
        .timed_out(&Timeout::new("b", ms(250)));
    let m = b.metrics();
    assert_eq!((m.failures, m.timeouts), (1, 1));
}

#[test]
fn timeouts_count_in_a_failure_rate() {
    let (b, _clock) = breaker(rate_config(Window::Calls(4), 4, 50));
    succeed(&b);
    succeed(&b);
    time_out(&b, ms(100));
    assert_eq!(b.state(), State::Closed);
    time_out(&b, ms(100));
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!((m.successes, m.failures, m.timeouts), (2, 2, 2));
}

#[test]
fn a_probe_that_times_out_reopens() {
    let (b, clock) = breaker(Config::builder().failures(1));
    to_half_open(&b, &clock);
    time_out(&b, secs(1));
    assert_eq!(b.state(), State::Open);
    let m = b.metrics();
    assert_eq!((m.failures, m.timeouts), (2, 1));
}

#[test]
fn a_disabled_breaker_still_counts_its_timeouts_among_its_failures() {
    let (b, _clock) = breaker(Config::builder().failures(1));
    b.disable();
    time_out(&b, secs(1));
    assert_eq!(b.state(), State::Disabled);
    let m = b.metrics();
    assert_eq!((m.failures, m.timeouts), (1, 1));
}

#[test]
fn a_timed_out_call_takes_at_least_its_timeout_in_the_latency_histogram() {
    let (b, clock) = breaker(Config::builder().latency(true).failures(100));
    // The clock did not move (a timer on another clock fired): the call took its timeout.
    time_out(&b, secs(2));
    let l = b.latency().unwrap();
    assert_eq!(l.calls, 1);
    assert_eq!(l.sum, secs(2));
    // The timer fired late: the call took what the clock saw.
    let permit = b.try_acquire().unwrap();
    clock.advance(secs(3));
    permit.timed_out(&Timeout::new("b", secs(2)));
    let l = b.latency().unwrap();
    assert_eq!((l.calls, l.sum), (2, secs(5)));
    let p99 = l.p99.unwrap().as_secs_f64();
    assert!((p99 - 3.0).abs() <= 3.0 / 16.0, "{l:?}");
}

#[test]
fn a_timeout_is_slow_when_its_timeout_is_past_the_slow_threshold() {
    let (b, _clock) = breaker(Config::builder().slow(ms(500)).failures(100));
    time_out(&b, secs(1));
    let m = b.metrics();
    assert_eq!((m.failures, m.timeouts, m.slow), (1, 1, 1));
}

#[test]
fn a_familys_totals_count_its_keys_timeouts_evicted_ones_included() {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(10)
        .idle_for(secs(10))
        .clock(clock.clone())
        .build()
        .unwrap();
    let family: BreakerMap<String> = BreakerMap::new("timeouts", config);
    for key in ["a", "b", "b"] {
        family
            .try_acquire(key)
            .unwrap()
            .timed_out(&Timeout::new("timeouts", ms(10)));
    }
    family.call("a", || Ok::<_, &str>(())).unwrap();
    let s = family.snapshot(10);
    assert_eq!(
        (s.totals.calls, s.totals.failures, s.totals.timeouts),
        (4, 3, 3)
    );
    // Sweeps see calls as of the sweep after them: this one, then one past `idle_for`.
    assert_eq!(family.sweep(), 0);
    clock.advance(secs(11));
    assert_eq!(family.sweep(), 2);
    let s = family.snapshot(10);
    assert_eq!(
        (
            s.keys,
            s.evicted.keys,
            s.evicted.timeouts,
            s.totals.timeouts
        ),
        (0, 2, 3, 3)
    );
}

/// Threads time out and succeed at once: every reader sees no more timeouts than failures,
/// and the counts add up exactly at the end.
#[test]
fn concurrent_timeouts_add_up_and_never_outnumber_the_failures() {
    const THREADS: usize = 4;
    const EACH: u64 = 20_000;
    let (b, _clock) = breaker(Config::builder().failures(u32::MAX));
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (b, done) = (b.clone(), done.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) {
                let m = b.metrics();
                assert!(m.timeouts <= m.failures, "{m:?}");
                reads += 1;
            }
            reads
        })
    };
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let b = b.clone();
            s.spawn(move || {
                for i in 0..EACH {
                    if (i + t as u64).is_multiple_of(3) {
                        time_out(&b, ms(1));
                    } else {
                        succeed(&b);
                    }
                }
            });
        }
    });
    done.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    let m = b.metrics();
    let timeouts: u64 = (0..THREADS as u64)
        .map(|t| (0..EACH).filter(|i| (i + t).is_multiple_of(3)).count() as u64)
        .sum();
    assert_eq!(m.timeouts, timeouts);
    assert_eq!(m.failures, timeouts);
    assert_eq!(m.successes, THREADS as u64 * EACH - timeouts);
}
