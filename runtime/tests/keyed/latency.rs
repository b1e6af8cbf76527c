//! A family's latency (`FamilySnapshot::latency`): its keys' histograms merged when the
//! snapshot is read, evicted keys kept in the calls since the family was made.

use std::time::Duration;

use breakerbox_runtime::{BreakerMap, Config, ManualClock, Outcome};

use crate::support::serial;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Whether `got` is within 6.25% of `want`, the histogram's resolution.
fn near(got: Option<Duration>, want: Duration) -> bool {
    let got = got.expect("a percentile").as_secs_f64();
    (got - want.as_secs_f64()).abs() <= want.as_secs_f64() / 16.0
}

fn family(clock: &ManualClock, latency: bool) -> BreakerMap<String> {
    let config = Config::builder()
        .latency(latency)
        .failures(100)
        .idle_for(Duration::from_secs(10))
        .clock(clock.clone())
        .build()
        .unwrap();
    BreakerMap::new("family-latency", config)
}

/// A call through `key` that takes `d` on `clock`.
fn call(f: &BreakerMap<String>, clock: &ManualClock, key: &str, d: Duration) {
    let _ = f.call_with(key, || clock.advance(d), |_| Outcome::Success);
}

#[test]
fn a_familys_percentiles_are_over_all_its_keys() {
    let _s = serial();
    let clock = ManualClock::new();
    let f = family(&clock, true);
    // 18 calls of 2 ms on `fast`, 2 of 800 ms on `hung`: no one key's p90 is the family's.
    for _ in 0..18 {
        call(&f, &clock, "fast", ms(2));
    }
    for _ in 0..2 {
        call(&f, &clock, "hung", ms(800));
    }
    let l = f
        .snapshot(10)
        .latency
        .expect("a timed family has a latency");
    assert_eq!((l.recent_calls, l.calls), (20, 20));
    assert!(near(l.p50, ms(2)), "{l:?}");
    assert!(near(l.p90, ms(2)), "{l:?}");
    assert!(near(l.p99, ms(800)), "{l:?}");
    assert_eq!(l.sum, ms(18 * 2 + 2 * 800));
    // Each key's own view is unchanged by the merge.
    assert_eq!(f.get("hung").unwrap().latency().unwrap().calls, 2);
}

#[test]
fn an_evicted_keys_calls_stay_in_the_familys_total_and_leave_its_last_minute() {
    let _s = serial();
    let clock = ManualClock::new();
    let f = family(&clock, true);
    call(&f, &clock, "gone", ms(300));
    call(&f, &clock, "kept", ms(5));
    // Sweeps see calls as of the sweep after them.
    assert_eq!(f.sweep(), 0);
    clock.advance(Duration::from_secs(11));
    call(&f, &clock, "kept", ms(5));
    assert_eq!(f.sweep(), 1, "`gone` is idle");
    assert!(f.get("gone").is_none());
    let l = f.snapshot(10).latency.unwrap();
    assert_eq!(l.calls, 3, "{l:?}");
    assert_eq!(l.sum, ms(310));
    // The last minute is the keys held: `kept`'s two calls.
    assert_eq!(l.recent_calls, 2, "{l:?}");
    assert!(near(l.p99, ms(5)), "{l:?}");
    // A minute on, the last minute is empty; the calls since the start are not.
    clock.advance(Duration::from_secs(61));
    let l = f.snapshot(10).latency.unwrap();
    assert_eq!((l.recent_calls, l.calls, l.p50), (0, 3, None));
}

#[test]
fn a_family_that_does_not_time_its_calls_has_no_latency() {
    let _s = serial();
    let clock = ManualClock::new();
    let f = family(&clock, false);
    call(&f, &clock, "a", ms(5));
    assert_eq!(f.snapshot(10).latency, None);
}
