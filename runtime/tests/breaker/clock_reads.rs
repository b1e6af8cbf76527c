//! Claims of the README that no other test showed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Clock, Config, ConfigBuilder, ManualClock, State, Window};

/// A manual clock that counts its reads.
struct CountingClock {
    time: ManualClock,
    reads: Arc<AtomicU64>,
}

impl Clock for CountingClock {
    fn now(&self) -> Duration {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.time.now()
    }
}

fn counted(builder: ConfigBuilder) -> (Breaker, Arc<AtomicU64>) {
    let reads = Arc::new(AtomicU64::new(0));
    let clock = CountingClock {
        time: ManualClock::new(),
        reads: reads.clone(),
    };
    let config = builder.clock(clock).build().expect("valid config");
    (Breaker::new("doc-claims", config), reads)
}

/// README, "Cost per call": under consecutive failures (also with `failures_within`) a
/// closed-state success reads no clock.
#[test]
fn a_closed_success_reads_no_clock() {
    let shapes = [
        ("failures", Config::builder().failures(3)),
        (
            "failures_within",
            Config::builder()
                .failures(3)
                .failures_within(Duration::from_secs(10)),
        ),
    ];
    for (shape, builder) in shapes {
        let (b, reads) = counted(builder);
        let before = reads.load(Ordering::SeqCst);
        for _ in 0..1000 {
            b.call(|| Ok::<_, &str>(())).unwrap();
        }
        b.try_acquire().unwrap().success();
        assert_eq!(reads.load(Ordering::SeqCst), before, "{shape}");
        assert_eq!(b.metrics().successes, 1001, "{shape}");
    }
}

/// The README's qualification: a count window reads the clock only when it trips, so not in
/// these 1000 successes (it judges the first `min_calls` of them, without the clock).
#[test]
fn a_count_window_reads_the_clock_only_to_trip() {
    let (b, reads) = counted(
        Config::builder()
            .failure_rate(50)
            .window(Window::Calls(100))
            .min_calls(10),
    );
    let before = reads.load(Ordering::SeqCst);
    for _ in 0..1000 {
        b.call(|| Ok::<_, &str>(())).unwrap();
    }
    assert_eq!(reads.load(Ordering::SeqCst) - before, 0);
    // Its trip reads it once (for the opening's time).
    for _ in 0..100 {
        if b.call(|| Err::<(), _>("down")).is_err() && b.state() == State::Open {
            break;
        }
    }
    assert_eq!(b.state(), State::Open);
    assert!(reads.load(Ordering::SeqCst) - before >= 1);
}

/// The other qualification: with `slow` or a time window, every call reads the clock.
#[test]
fn a_closed_success_with_slow_or_a_time_window_reads_the_clock() {
    let shapes = [
        ("slow", Config::builder().slow(Duration::from_secs(1))),
        (
            "time window",
            Config::builder()
                .failure_rate(50)
                .window(Window::Time(Duration::from_secs(10))),
        ),
    ];
    for (shape, builder) in shapes {
        let (b, reads) = counted(builder);
        let before = reads.load(Ordering::SeqCst);
        for _ in 0..5 {
            b.call(|| Ok::<_, &str>(())).unwrap();
        }
        assert!(reads.load(Ordering::SeqCst) - before >= 5, "{shape}");
    }
}

/// BENCHMARKS.md, "Latency": `latency = false` (the default) reads no clock on a call, and
/// `latency = true` reads it twice (admission and record) and nothing more.
#[test]
fn only_a_timed_breaker_reads_the_clock_for_latency() {
    for (latency, per_call) in [(false, 0), (true, 2)] {
        let (b, reads) = counted(Config::builder().failures(3).latency(latency));
        let before = reads.load(Ordering::SeqCst);
        for _ in 0..100 {
            b.call(|| Ok::<_, &str>(())).unwrap();
        }
        assert_eq!(
            reads.load(Ordering::SeqCst) - before,
            100 * per_call,
            "latency = {latency}"
        );
        assert_eq!(b.latency().map(|l| l.calls), latency.then_some(100));
    }
}
