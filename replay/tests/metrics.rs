//! The journal's counts through the `metrics` crate (feature `metrics`).

use std::collections::HashMap;
use std::time::Duration;

use breakerbox_replay::{Replay, ReplayConfig};
use breakerbox_runtime::{Breaker, Config, TokioClock};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// Runs `test` on a current-thread runtime with paused time, recording into `recorder`.
fn with_metrics<F: std::future::Future<Output = ()>>(recorder: &DebuggingRecorder, test: F) {
    metrics::with_local_recorder(recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
            .block_on(test)
    });
}

/// A breaker that trips on its tenth failure in a row, on tokio's (paused) clock.
fn breaker(name: &str) -> Breaker {
    let config = Config::builder()
        .failures(10)
        .clock(TokioClock)
        .build()
        .unwrap();
    Breaker::new(name, config)
}

#[test]
fn queued_deduplicated_refused_replayed_and_failed_entries_are_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    with_metrics(&recorder, async {
        let breaker = breaker("metered");
        let replay = Replay::builder(&breaker)
            .clock(TokioClock)
            .config(ReplayConfig::new().max_entries(3).attempts(1))
            .key(|n: &u32| n.to_string())
            .memory(|n: u32| async move { if n == 2 { Err("down") } else { Ok(()) } })
            .unwrap();
        breaker.force_open();
        for n in [1, 1, 2, 3, 4] {
            let _ = replay.call(n, |_| Ok::<(), &str>(()));
        }
        breaker.reset();
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let mut counts = HashMap::new();
    let mut entries = None;
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_owned())
        };
        assert_eq!(label("journal").as_deref(), Some("metered"));
        match (key.name(), value) {
            ("breakerbox_replay_total", DebugValue::Counter(n)) => {
                counts.insert(label("event").unwrap(), n);
            }
            ("breakerbox_replay_entries", DebugValue::Gauge(g)) => entries = Some(g.into_inner()),
            _ => {}
        }
    }
    let expected: HashMap<String, u64> = [
        ("queued", 3),
        ("deduplicated", 1),
        ("refused", 1),
        ("replayed", 2),
        ("failed", 1),
        ("dead_lettered", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(counts, expected);
    assert_eq!(entries, Some(0.0));
}

/// The gauges follow the journal while no replay runs: calls journaled while the breaker is
/// open show within a second.
#[test]
fn the_entries_gauge_follows_calls_journaled_while_the_breaker_is_open() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let entries = || {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find_map(|(key, _, _, value)| match (key.key().name(), value) {
                ("breakerbox_replay_entries", DebugValue::Gauge(g)) => Some(g.into_inner()),
                _ => None,
            })
    };
    with_metrics(&recorder, async {
        let breaker = breaker("gauged");
        let replay = Replay::builder(&breaker)
            .clock(TokioClock)
            .key(|n: &u32| n.to_string())
            .memory(|_: u32| async move { Ok::<(), &str>(()) })
            .unwrap();
        breaker.force_open();
        for n in [1, 2, 3] {
            let _ = replay.call(n, |_| Ok::<(), &str>(()));
        }
        assert_eq!(entries(), None, "no gauge before the first report");
        tokio::time::sleep(Duration::from_millis(1_100)).await;
        assert_eq!(entries(), Some(3.0));
        let _ = replay.call(4, |_| Ok::<(), &str>(()));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(entries(), Some(4.0));
    });
}
