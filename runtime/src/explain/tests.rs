//! `Breaker::explain`: the data and the sentences it gives for each way into each state.

use super::text::{Factor, Human, TimeOfDay, ordinal};
use super::*;
use crate::state::State;
use crate::{Breaker, Config, ConfigBuilder, ManualClock, Outcome, SharedState};
use core::time::Duration;
use std::time::SystemTime;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn breaker(config: ConfigBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let config = config.clock(clock.clone()).build().unwrap();
    (Breaker::new("explained", config), clock)
}

fn fail(b: &Breaker, why: &str) {
    b.call(|| Err::<(), _>(why)).unwrap_err();
}

fn ok(b: &Breaker) {
    b.call(|| Ok::<_, &str>(())).unwrap();
}

/// The sentence, with the wall time of the change written as `T`.
fn sentence(e: &Explanation) -> String {
    let text = e.to_string();
    match e.since_wall {
        Some(wall) => text.replacen(&TimeOfDay(wall).to_string(), "T", 1),
        None => text,
    }
}

#[test]
fn a_new_breaker_is_closed_since_it_was_created() {
    let (b, clock) = breaker(Config::builder().failures(5));
    clock.advance(ms(1500));
    fail(&b, "boom");
    let e = b.explain();
    assert_eq!(e.cause, Cause::Created);
    assert_eq!(e.since_wall, None);
    assert_eq!((e.since, e.elapsed), (Duration::ZERO, ms(1500)));
    assert_eq!(
        e.progress,
        Progress::Failures {
            failures: 1,
            threshold: 5
        }
    );
    assert_eq!(
        sentence(&e),
        "closed since it was created (1.5 s ago); 1 of 5 failures in a row so far"
    );
}

#[test]
fn open_by_consecutive_failures() {
    let (b, clock) = breaker(Config::builder().failures(2).open_for(ms(10_000)));
    clock.advance(ms(500));
    fail(&b, "refused");
    fail(&b, "server answered 500");
    clock.advance(ms(2100));
    let e = b.explain();
    assert_eq!(e.state, State::Open);
    assert_eq!((e.since, e.elapsed), (ms(500), ms(2100)));
    assert!(e.since_wall.is_some());
    assert_eq!(e.next_probe_in, Some(ms(7900)));
    assert_eq!(e.open_for, Some(ms(10_000)));
    assert_eq!((e.backoff, e.reopens), (None, 0));
    assert_eq!(e.last_failure.as_deref(), Some("server answered 500"));
    assert_eq!(
        sentence(&e),
        "open since T (2.1 s ago) because 2 calls failed in a row (threshold 2); \
         last failure: 'server answered 500'; next probe in 7.9 s"
    );
    assert_eq!(
        e.short().to_string(),
        "2 calls failed in a row (threshold 2); last failure: 'server answered 500'"
    );
}

#[test]
fn open_by_failures_within_a_span() {
    let (b, _) = breaker(Config::builder().failures(3).failures_within(ms(10_000)));
    for _ in 0..3 {
        fail(&b, "timeout");
    }
    assert_eq!(
        b.explain().short().to_string(),
        "3 calls failed in a row within 10 s (threshold 3); last failure: 'timeout'"
    );
}

/// A whole explanation, to the letter (every time in it but the wall clock's).
#[test]
fn open_by_a_failure_rate_with_backoff_after_re_opens() {
    let (b, clock) = breaker(
        Config::builder()
            .failure_rate(50)
            .window(crate::Window::Time(ms(10_000)))
            .min_calls(5)
            .open_for(ms(1000))
            .backoff(2.0)
            .max_open_for(ms(60_000)),
    );
    // 4 successes, then failures: judged from the 5th call, 50 % is reached at 4 of 8.
    for _ in 0..4 {
        ok(&b);
    }
    for _ in 0..4 {
        fail(&b, "server answered 500");
    }
    let e = b.explain();
    assert_eq!(
        e.cause,
        Cause::FailureRate {
            failed: Some(4),
            calls: Some(8),
            rate: 50,
            threshold: 50,
            window: crate::Window::Time(ms(10_000)),
            min_calls: 5
        }
    );
    // Three re-opens: each open time ends (the timer half-opens it), the probe fails.
    for open_for in [1000, 2000, 4000] {
        clock.advance(ms(open_for));
        assert_eq!(b.state(), State::HalfOpen);
        fail(&b, "server answered 500");
    }
    clock.advance(ms(2100));
    let e = b.explain();
    assert_eq!(e.cause, Cause::ProbeFailed);
    assert_eq!((e.reopens, e.backoff), (3, Some(2.0)));
    assert_eq!(e.open_for, Some(ms(8000)));
    assert_eq!(
        sentence(&e),
        "open since T (2.1 s ago) because a probe failed; last failure: 'server answered \
         500'; next probe in 5.9 s (backoff ×2, 3rd re-open)"
    );
}

#[test]
fn the_example_sentence_of_a_rate_trip() {
    let (b, clock) = breaker(
        Config::builder()
            .failure_rate(60)
            .window(crate::Window::Time(ms(10_000)))
            .min_calls(5)
            .open_for(ms(3000)),
    );
    // Judged from the 5th call: 1 of 5, 2 of 6, …, 5 of 9 (55 %), 6 of 10 trips.
    for _ in 0..4 {
        ok(&b);
    }
    for _ in 0..5 {
        fail(&b, "server answered 500");
        assert_eq!(b.state(), State::Closed);
    }
    fail(&b, "server answered 500");
    clock.advance(ms(2100));
    let e = b.explain();
    assert_eq!(
        sentence(&e),
        "open since T (2.1 s ago) because 6 of the last 10 calls failed (60 % ≥ 60 %, \
         window 10 s, min 5); last failure: 'server answered 500'; next probe in 900 ms"
    );
}

#[test]
fn open_by_a_slow_rate_in_a_count_window() {
    let (b, clock) = breaker(
        Config::builder()
            .slow(ms(100))
            .slow_rate(50)
            .window(crate::Window::Calls(4))
            .min_calls(4),
    );
    for took in [10, 200, 10, 200] {
        let p = b.try_acquire().unwrap();
        clock.advance(ms(took));
        p.success();
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.explain().short().to_string(),
        "2 of the last 4 calls took 100 ms or more (50 % ≥ 50 %, window 4 calls, min 4)"
    );
}

#[test]
fn half_open_then_closed_by_probes() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(ms(1000))
            .half_open_calls(2)
            .successes(2),
    );
    fail(&b, "down");
    clock.advance(ms(1000));
    let e = b.explain();
    assert_eq!(
        (e.state, e.cause.clone()),
        (State::HalfOpen, Cause::OpenElapsed)
    );
    assert_eq!(
        e.since,
        ms(1000),
        "half-open from the moment the open time ended"
    );
    ok(&b);
    assert_eq!(
        sentence(&b.explain()),
        "half-open since T (0 ms ago) because its open time ended; last failure: 'down'; \
         1 of 2 probes succeeded so far"
    );
    ok(&b);
    clock.advance(ms(300));
    let e = b.explain();
    assert_eq!(e.cause, Cause::ProbesSucceeded(2));
    assert_eq!(
        sentence(&e),
        "closed since T (300 ms ago) because 2 probes succeeded; 0 of 1 failures in a row \
         so far"
    );
}

#[test]
fn re_opened_by_a_probe_timeout() {
    let (b, clock) = breaker(
        Config::builder()
            .failures(1)
            .open_for(ms(1000))
            .probe_timeout(ms(500)),
    );
    fail(&b, "down");
    clock.advance(ms(1000));
    let hung = b.try_acquire().unwrap();
    clock.advance(ms(500));
    b.try_acquire().unwrap_err();
    assert_eq!(b.explain().cause, Cause::ProbeTimeout(ms(500)));
    // A re-open with no failure of its own names none (as `last_failure` documents).
    assert_eq!(
        b.explain().short().to_string(),
        "no probe finished within 500 ms"
    );
    hung.ignore();
}

#[test]
fn manual_states() {
    let (b, clock) = breaker(Config::builder());
    b.force_open();
    clock.advance(ms(61_000));
    assert_eq!(
        sentence(&b.explain()),
        "forced-open since T (1 min 1 s ago) because it was forced open by hand"
    );
    b.disable();
    assert_eq!(
        sentence(&b.explain()),
        "disabled since T (0 ms ago) because it was disabled by hand"
    );
    b.reset();
    assert_eq!(
        sentence(&b.explain()),
        "closed since T (0 ms ago) because it was reset by hand; 0 of 5 failures in a row \
         so far"
    );
    b.trip_for(ms(30_000));
    assert_eq!(
        sentence(&b.explain()),
        "open since T (0 ms ago) because it was tripped for 30 s; next probe in 30 s"
    );
    b.call_with(|| (), |_| Outcome::TripFor(ms(5000)))
        .unwrap_err();
}

#[test]
fn a_trip_for_by_an_outcome_and_an_imported_state() {
    let (b, _) = breaker(Config::builder());
    b.call_with(|| 503, |_| Outcome::TripFor(ms(5000))).unwrap();
    assert_eq!(b.explain().cause, Cause::TripFor(ms(5000)));
    let (other, _) = breaker(Config::builder());
    other.import_state(&SharedState::new(State::Open, Some(ms(4000)), 2));
    let e = other.explain();
    assert_eq!((e.cause.clone(), e.reopens), (Cause::Imported, 2));
    assert_eq!(
        sentence(&e),
        "open since T (0 ms ago) because its state was imported; next probe in 4 s \
         (2nd re-open)"
    );
}

#[test]
fn a_closed_rate_breaker_shows_its_window() {
    let (b, _) = breaker(
        Config::builder()
            .failure_rate(50)
            .window(crate::Window::Calls(10)),
    );
    ok(&b);
    fail(&b, "x");
    assert_eq!(
        sentence(&b.explain()),
        "closed since it was created (0 ms ago); window now: 2 calls, 1 failed"
    );
}

/// A keyed family's entries are breakers: each explains itself.
#[test]
fn a_keyed_familys_entry_explains_itself() {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let map: crate::BreakerMap<&str> = crate::BreakerMap::new("hosts", config);
    map.call(&"a.example", || Err::<(), _>("refused"))
        .unwrap_err();
    let e = map.get(&"a.example").unwrap().explain();
    assert_eq!(e.state, State::Open);
    assert_eq!(
        e.short().to_string(),
        "1 call failed in a row (threshold 1); last failure: 'refused'"
    );
}

#[test]
fn human_durations() {
    let h = |ms: u64| Human(Duration::from_millis(ms)).to_string();
    assert_eq!(h(0), "0 ms");
    assert_eq!(h(900), "900 ms");
    assert_eq!(h(1000), "1 s");
    assert_eq!(h(2100), "2.1 s");
    assert_eq!(h(2149), "2.1 s");
    assert_eq!(h(2150), "2.2 s");
    assert_eq!(h(59_949), "59.9 s");
    assert_eq!(h(59_950), "1 min");
    assert_eq!(h(200_000), "3 min 20 s");
    assert_eq!(h(7_500_000), "2 h 5 min");
    assert_eq!(Human(Duration::from_nanos(5)).to_string(), "< 1 ms");
}

#[test]
fn time_of_day_and_ordinals_and_factors() {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(86_400 * 20_000 + 12 * 3600 + 3);
    assert_eq!(TimeOfDay(t).to_string(), "12:00:03 UTC");
    let ords: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
        .map(ordinal)
        .into();
    assert_eq!(
        ords,
        [
            "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"
        ]
    );
    assert_eq!(Factor(2.0).to_string(), "2");
    assert_eq!(Factor(1.5).to_string(), "1.5");
    assert_eq!(Factor(2.25).to_string(), "2.25");
}

/// The JSON shape an admin endpoint or a log pipeline gets: durations as text, `cause` and
/// `progress` tagged by `kind` with their numbers in `detail`.
#[cfg(feature = "serde")]
#[test]
fn serializes_to_a_stable_json_shape() {
    let (b, clock) = breaker(Config::builder().failures(2).open_for(ms(10_000)));
    clock.advance(ms(1000));
    fail(&b, "connection refused");
    fail(&b, "connection refused");
    clock.advance(ms(2100));
    let mut json = serde_json::to_value(b.explain()).unwrap();
    let wall = json.as_object_mut().unwrap().remove("since_wall").unwrap();
    assert!(wall["secs_since_epoch"].as_u64().unwrap() > 0, "{wall}");
    assert_eq!(
        json,
        serde_json::json!({
            "name": "explained",
            "state": "open",
            "since": "1s",
            "elapsed": "2.1s",
            "cause": {"kind": "failures", "detail": {"failures": 2, "threshold": 2, "within": null}},
            "last_failure": "connection refused",
            "next_probe_in": "7.9s",
            "open_for": "10s",
            "backoff": null,
            "reopens": 0,
            "progress": {"kind": "none"},
        })
    );

    b.reset();
    ok(&b);
    fail(&b, "timeout");
    let json = serde_json::to_value(b.explain()).unwrap();
    assert_eq!(json["cause"], serde_json::json!({"kind": "reset"}));
    assert_eq!(
        json["progress"],
        serde_json::json!({"kind": "failures", "detail": {"failures": 1, "threshold": 2}})
    );
    // The failure that last tripped it, as `Breaker::last_failure`, even while closed.
    assert_eq!(json["last_failure"], "connection refused");
}
