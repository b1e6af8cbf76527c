//! Config validation: every invalid config names its field; edge and extreme configs work.

use crate::support::{NS, breaker, ms, secs};
use breakerbox_runtime::{Config, ConfigBuilder, ConfigError, Outcome, Window};
use std::time::Duration;

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
