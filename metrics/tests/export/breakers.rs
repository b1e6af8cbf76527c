//! Single breakers in the export: names, labels and values, read back from a debugging
//! recorder.

use std::time::Duration;

use breakerbox_runtime::{Config, ManualClock, Outcome, Timeout, Window, registry};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::export;

/// One reading of every metric: `(metric, name label, outcome label, value)`.
/// (A debugging snapshot drains the counters, so take one per export.)
struct Readings(Vec<(String, Option<String>, Option<String>, f64)>);

impl Readings {
    fn take(snapshotter: &Snapshotter) -> Readings {
        let all = snapshotter.snapshot().into_vec().into_iter();
        Readings(
            all.filter_map(|(key, _, _, value)| {
                let key = key.key();
                let label = |k: &str| {
                    key.labels()
                        .find(|l| l.key() == k)
                        .map(|l| l.value().to_owned())
                };
                let value = match value {
                    DebugValue::Counter(n) => n as f64,
                    DebugValue::Gauge(g) => g.0,
                    DebugValue::Histogram(_) => return None,
                };
                Some((
                    key.name().to_owned(),
                    label("name"),
                    label("outcome"),
                    value,
                ))
            })
            .collect(),
        )
    }

    fn get(&self, metric: &str, name: &str) -> Option<f64> {
        self.find(metric, name, None)
    }

    fn calls(&self, name: &str, outcome: &str) -> Option<f64> {
        self.find("breakerbox_calls_total", name, Some(outcome))
    }

    fn find(&self, metric: &str, name: &str, outcome: Option<&str>) -> Option<f64> {
        self.0
            .iter()
            .find(|(m, n, o, _)| {
                m == metric && n.as_deref() == Some(name) && o.as_deref() == outcome
            })
            .map(|r| r.3)
    }
}

#[test]
fn record_all_exports_counts_state_and_times_opened() {
    let _settings = crate::settings();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    registry().set_clock("export-counts", clock.clone());
    let breaker = registry().get_or_create("export-counts", || {
        Config::builder()
            .failures(2)
            .open_for(Duration::from_secs(1))
            .slow(Duration::from_millis(100))
            .build()
            .unwrap()
    });

    metrics::with_local_recorder(&recorder, || {
        let _ = breaker.call(|| Ok::<_, &str>(()));
        let permit = breaker.try_acquire().unwrap();
        clock.advance(Duration::from_millis(150)); // a slow success
        permit.record(Outcome::Success);
        let _ = breaker.call(|| Ok::<_, &str>(()));
        breaker.try_acquire().unwrap().ignore();
        // Two failures, one of them a timeout.
        breaker
            .try_acquire()
            .unwrap()
            .timed_out(&Timeout::new("export-counts", Duration::from_secs(1)));
        let _ = breaker.call(|| Err::<(), _>("down"));
        let _ = breaker.call(|| Ok::<_, &str>(())); // rejected
        export::record_all();
        // Counters are set to totals: exporting twice does not count twice.
        export::record_all();
    });

    let r = Readings::take(&snapshotter);
    assert_eq!(r.calls("export-counts", "success"), Some(3.0));
    assert_eq!(r.calls("export-counts", "failure"), Some(2.0));
    assert_eq!(r.calls("export-counts", "ignored"), Some(1.0));
    assert_eq!(r.calls("export-counts", "rejected"), Some(1.0));
    // The timeout took its timeout: past the slow threshold too.
    assert_eq!(r.calls("export-counts", "slow"), Some(2.0));
    assert_eq!(r.calls("export-counts", "timeout"), Some(1.0));
    assert_eq!(r.get("breakerbox_state", "export-counts"), Some(1.0));
    assert_eq!(r.get("breakerbox_opened_total", "export-counts"), Some(1.0));
    // No rate policy: no rate gauges.
    assert_eq!(r.get("breakerbox_failure_rate", "export-counts"), None);
    assert_eq!(r.get("breakerbox_slow_rate", "export-counts"), None);
}

#[test]
fn rate_gauges_for_rate_policies() {
    let _settings = crate::settings();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let breaker = registry().get_or_create("export-rates", || {
        Config::builder()
            .failure_rate(60)
            .window(Window::Calls(10))
            .min_calls(10)
            .slow(Duration::from_secs(10))
            .slow_rate(50)
            .build()
            .unwrap()
    });
    metrics::with_local_recorder(&recorder, export::record_all);
    let r = Readings::take(&snapshotter);
    assert_eq!(
        r.get("breakerbox_failure_rate", "export-rates"),
        Some(0.0),
        "empty window"
    );

    for i in 0..4 {
        let _ = breaker.call(|| if i % 2 == 0 { Err("no") } else { Ok(()) });
    }
    metrics::with_local_recorder(&recorder, export::record_all);
    let r = Readings::take(&snapshotter);
    assert_eq!(r.get("breakerbox_failure_rate", "export-rates"), Some(50.0));
    assert_eq!(r.get("breakerbox_slow_rate", "export-rates"), Some(0.0));
}

#[test]
fn the_state_gauge_follows_transitions_without_an_export() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let breaker = registry().get_or_create("export-listener", Config::default);
    let state = || Readings::take(&snapshotter).get("breakerbox_state", "export-listener");
    metrics::with_local_recorder(&recorder, || {
        export::install();
        export::install(); // idempotent: one listener
        breaker.force_open();
        assert_eq!(state(), Some(3.0));
        breaker.disable();
        assert_eq!(state(), Some(4.0));
        breaker.reset();
        assert_eq!(state(), Some(0.0));
    });
}

#[test]
fn watch_covers_breakers_outside_the_registry() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let breaker = breakerbox_runtime::Breaker::new("export-own", Config::default());
    export::watch(&breaker);
    metrics::with_local_recorder(&recorder, || breaker.force_open());
    let r = Readings::take(&snapshotter);
    assert_eq!(r.get("breakerbox_state", "export-own"), Some(3.0));
    assert_eq!(
        r.get("breakerbox_calls_total", "export-own"),
        None,
        "not exported yet"
    );

    metrics::with_local_recorder(&recorder, || export::record(&breaker));
    let r = Readings::take(&snapshotter);
    assert_eq!(r.calls("export-own", "rejected"), Some(0.0));

    // Watching holds no handle: the breaker (and what its listeners hold) is freed with its
    // last handle.
    let alive = std::sync::Arc::new(());
    let held = alive.clone();
    breaker.on_state_change(move |_| {
        let _ = &held;
    });
    drop(breaker);
    assert_eq!(
        std::sync::Arc::strong_count(&alive),
        1,
        "watch kept the breaker alive"
    );
}

#[test]
fn transitions_are_counted_by_state_entered_and_reason_with_a_familys_keys_under_its_name() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let breaker = registry().get_or_create("export-transitions", || {
        Config::builder().failures(1).build().unwrap()
    });
    let family = registry()
        .family::<String>("export-transitions-family", || {
            Config::builder().failures(1).build().unwrap()
        })
        .unwrap();
    let elsewhere = breakerbox_runtime::Breaker::new(
        "export-transitions",
        Config::builder().failures(1).build().unwrap(),
    );
    let _ = elsewhere.call(|| Err::<(), _>("down"));
    let mut seen = Vec::new();
    metrics::with_local_recorder(&recorder, || {
        export::install();
        let _ = breaker.call(|| Err::<(), _>("down"));
        breaker.reset();
        breaker.import_state(&elsewhere.export_state());
        breaker.reset();
        for key in ["a", "b"] {
            let _ = family.call(&key.to_owned(), || Err::<(), _>("down"));
        }
        for (key, _, _, value) in snapshotter.snapshot().into_vec() {
            let key = key.key();
            if key.name() != "breakerbox_transitions_total" {
                continue;
            }
            let label = |k: &str| {
                key.labels()
                    .find(|l| l.key() == k)
                    .map(|l| l.value().to_owned())
                    .unwrap()
            };
            if let DebugValue::Counter(n) = value {
                seen.push((label("name"), label("to"), label("reason"), n));
            }
        }
    });
    seen.sort();
    let row = |name: &str, to: &str, reason: &str, n: u64| {
        (name.to_owned(), to.to_owned(), reason.to_owned(), n)
    };
    assert_eq!(
        seen,
        [
            row("export-transitions", "closed", "reset", 2),
            row("export-transitions", "open", "failures", 1),
            row("export-transitions", "open", "imported", 1),
            row("export-transitions-family", "open", "failures", 2),
        ]
    );
}
