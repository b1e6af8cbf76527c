//! Call latency through the public API: which breakers time their calls, which calls are
//! timed, the percentiles of the last minute, the `latency` config key, and counts that add up
//! when threads record at once.

use std::sync::Arc;
use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, ManualClock, Outcome, State};

/// Whether `got` is within 6.25% of `want`, the histogram's resolution.
fn near(got: Option<Duration>, want: Duration) -> bool {
    let got = got.expect("a percentile").as_secs_f64();
    (got - want.as_secs_f64()).abs() <= want.as_secs_f64() / 16.0
}

/// A call on `b` that takes `d` on `clock` and ends as `outcome`.
fn call(b: &Breaker, clock: &ManualClock, d: Duration, outcome: Outcome) {
    let _ = b.call_with(|| clock.advance(d), |_| outcome);
}

#[test]
fn a_latency_breaker_gives_the_percentiles_of_its_calls() {
    let clock = Arc::new(ManualClock::new());
    let config = Config::builder()
        .latency(true)
        .failures(1000)
        .clock(clock.clone())
        .build()
        .unwrap();
    let b = Breaker::new("latency-percentiles", config);
    // 90 calls of 2 ms, 9 of 30 ms, 1 of 800 ms: p50 2 ms, p90 2 ms, p99 30 ms.
    for i in 0..100 {
        let d = match i {
            0..90 => Duration::from_millis(2),
            90..99 => Duration::from_millis(30),
            _ => Duration::from_millis(800),
        };
        let outcome = if i % 10 == 0 {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        call(&b, &clock, d, outcome);
    }
    let l = b.latency().unwrap();
    assert_eq!((l.recent_calls, l.calls), (100, 100));
    assert!(near(l.p50, Duration::from_millis(2)), "{l:?}");
    assert!(near(l.p90, Duration::from_millis(2)), "{l:?}");
    assert!(near(l.p99, Duration::from_millis(30)), "{l:?}");
    assert!(near(l.quantile(1.0), Duration::from_millis(800)), "{l:?}");
    assert_eq!(l.sum, Duration::from_millis(90 * 2 + 9 * 30 + 800));
    assert_eq!(l.buckets().map(|(_, n)| n).sum::<u64>(), 100);
    // A minute later the last minute is empty; the histogram since the start is not.
    clock.advance(Duration::from_secs(61));
    let l = b.latency().unwrap();
    assert_eq!((l.recent_calls, l.calls, l.p50), (0, 100, None));
}

#[test]
fn rejected_ignored_and_disabled_calls_are_not_timed() {
    let clock = Arc::new(ManualClock::new());
    let config = Config::builder()
        .latency(true)
        .failures(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let b = Breaker::new("latency-untimed", config);
    assert_eq!(b.latency().unwrap().calls, 0);
    call(&b, &clock, Duration::from_millis(5), Outcome::Ignored);
    assert_eq!(b.latency().unwrap().calls, 0);
    call(&b, &clock, Duration::from_millis(5), Outcome::Failure);
    assert_eq!(b.state(), State::Open);
    assert!(b.call(|| Ok::<_, &str>(())).is_err());
    assert_eq!(b.latency().unwrap().calls, 1);
    b.disable();
    call(&b, &clock, Duration::from_millis(5), Outcome::Success);
    assert_eq!(b.latency().unwrap().calls, 1);
    assert_eq!(b.metrics().successes, 1);
}

#[test]
fn a_slow_threshold_times_calls_without_the_latency_key() {
    let clock = Arc::new(ManualClock::new());
    let config = Config::builder()
        .slow(Duration::from_millis(100))
        .clock(clock.clone())
        .build()
        .unwrap();
    let b = Breaker::new("latency-slow", config);
    call(&b, &clock, Duration::from_millis(150), Outcome::Success);
    let l = b.latency().unwrap();
    assert_eq!(l.calls, 1);
    assert!(near(l.p50, Duration::from_millis(150)), "{l:?}");
    assert_eq!(b.metrics().slow, 1);
}

#[test]
fn a_breaker_that_times_nothing_has_no_latency() {
    let b = Breaker::new("latency-none", Config::default());
    b.call(|| Ok::<_, &str>(())).unwrap();
    assert_eq!(b.latency(), None);
    assert!(!b.config().latency());
}

#[test]
fn latency_cannot_be_turned_on_for_a_live_breaker_without_slow() {
    let b = Breaker::new("latency-live", Config::default());
    let e = b
        .reconfigure(Config::builder().latency(true).build().unwrap())
        .unwrap_err();
    assert_eq!(e.field, "latency");
    // With `slow` its calls are timed already: the key may change.
    let slow = || Config::builder().slow(Duration::from_secs(1));
    let b = Breaker::new("latency-live-slow", slow().build().unwrap());
    b.reconfigure(slow().latency(true).build().unwrap())
        .unwrap();
    assert!(b.config().latency());
}

#[cfg(feature = "serde")]
#[test]
fn the_latency_key_reads_from_a_file_as_a_boolean() {
    use breakerbox_runtime::registry;
    registry()
        .load_toml_str(
            "l.toml",
            "[breakers.latency-file]\ndynamic = true\nlatency = true\n",
        )
        .unwrap();
    let b = registry().get_or_create("latency-file", Config::default);
    assert!(b.config().latency());
    b.call(|| Ok::<_, &str>(())).unwrap();
    assert_eq!(b.latency().unwrap().calls, 1);
    let e = registry()
        .load_toml_str(
            "l2.toml",
            "[breakers.latency-file-bad]\ndynamic = true\nlatency = 1\n",
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`latency` must be true or false, got an integer"),
        "{e}"
    );
    let config: Config = toml::from_str("latency = true").unwrap();
    assert!(config.latency());
    assert_eq!(serde_json::to_value(&config).unwrap()["latency"], true);
}

#[test]
fn threads_timing_calls_at_once_lose_none() {
    let b = Breaker::new(
        "latency-threads",
        Config::builder().latency(true).build().unwrap(),
    );
    const THREADS: u64 = 4;
    const CALLS: u64 = 20_000;
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..CALLS {
                    b.call(|| Ok::<_, &str>(())).unwrap();
                }
            });
        }
    });
    let l = b.latency().unwrap();
    assert_eq!(l.calls, THREADS * CALLS);
    assert_eq!(l.buckets().map(|(_, n)| n).sum::<u64>(), THREADS * CALLS);
    assert_eq!(b.metrics().successes, THREADS * CALLS);
}
