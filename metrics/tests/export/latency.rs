//! Latency in the export: `breakerbox_call_duration_seconds` fed with the calls timed since
//! the last export, and the last minute's quantiles as gauges.

use std::time::Duration;

use breakerbox_runtime::{Config, ManualClock, registry};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::export;

/// The histogram's values and the quantile gauges of breaker `name` in one snapshot.
fn read(snapshotter: &Snapshotter, name: &str) -> (Vec<f64>, Vec<(String, f64)>) {
    let (mut values, mut quantiles) = (Vec::new(), Vec::new());
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let label = |k: &str| {
            key.labels()
                .find(|l| l.key() == k)
                .map(|l| l.value().to_owned())
        };
        if label("name").as_deref() != Some(name) {
            continue;
        }
        match (key.name(), value) {
            ("breakerbox_call_duration_seconds", DebugValue::Histogram(v)) => {
                values.extend(v.into_iter().map(|f| f.0));
            }
            ("breakerbox_call_duration_last_minute_seconds", DebugValue::Gauge(g)) => {
                quantiles.push((label("quantile").unwrap(), g.0));
            }
            _ => {}
        }
    }
    values.sort_by(f64::total_cmp);
    quantiles.sort_by(|a, b| a.0.cmp(&b.0));
    (values, quantiles)
}

fn near(got: f64, want: f64) -> bool {
    (got - want).abs() <= want / 16.0
}

#[test]
fn each_timed_call_is_exported_once_near_its_duration() {
    let _settings = crate::settings();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    registry().set_clock("export-latency", clock.clone());
    let b = registry().get_or_create("export-latency", || {
        Config::builder().latency(true).build().unwrap()
    });
    let call = |ms| {
        let _ = b.call(|| {
            clock.advance(Duration::from_millis(ms));
            Ok::<_, &str>(())
        });
    };
    metrics::with_local_recorder(&recorder, || {
        for ms in [2, 2, 40] {
            call(ms);
        }
        export::record_all();
        let (values, quantiles) = read(&snapshotter, "export-latency");
        assert_eq!(values.len(), 3, "{values:?}");
        assert!(
            near(values[0], 0.002) && near(values[1], 0.002) && near(values[2], 0.040),
            "{values:?}"
        );
        let q: Vec<&str> = quantiles.iter().map(|(q, _)| q.as_str()).collect();
        assert_eq!(q, ["0.5", "0.9", "0.99"]);
        assert!(
            near(quantiles[0].1, 0.002) && near(quantiles[2].1, 0.040),
            "{quantiles:?}"
        );

        // Exported again with one call more: only that one is new.
        call(7);
        export::record_all();
        let (values, _) = read(&snapshotter, "export-latency");
        assert_eq!(values.len(), 1, "{values:?}");
        assert!(near(values[0], 0.007), "{values:?}");
        export::record_all();
        assert!(read(&snapshotter, "export-latency").0.is_empty());
    });
}

#[test]
fn a_breaker_that_times_nothing_exports_no_latency() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let b = registry().get_or_create("export-no-latency", Config::default);
    metrics::with_local_recorder(&recorder, || {
        b.call(|| Ok::<_, &str>(())).unwrap();
        export::record(&b);
        let (values, quantiles) = read(&snapshotter, "export-no-latency");
        assert!(values.is_empty() && quantiles.is_empty());
    });
}

#[test]
fn a_family_exports_its_keys_latency_as_one_each_call_once() {
    let _settings = crate::settings();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    let family = breakerbox_runtime::BreakerMap::<String>::new(
        "export-family-latency",
        Config::builder()
            .latency(true)
            .idle_for(Duration::from_secs(10))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let call = |key: &str, ms| {
        let _ = family.call(key, || {
            clock.advance(Duration::from_millis(ms));
            Ok::<_, &str>(())
        });
    };
    metrics::with_local_recorder(&recorder, || {
        call("a.example", 2);
        call("a.example", 2);
        call("b.example", 40);
        export::record_family(&family);
        let (values, quantiles) = read(&snapshotter, "export-family-latency");
        assert_eq!(values.len(), 3, "{values:?}");
        assert!(
            near(values[0], 0.002) && near(values[1], 0.002) && near(values[2], 0.040),
            "{values:?}"
        );
        assert!(
            near(quantiles[0].1, 0.002) && near(quantiles[2].1, 0.040),
            "{quantiles:?}"
        );
        // `b.example` is evicted: its call is not exported again, nor taken back.
        assert_eq!(family.sweep(), 0);
        clock.advance(Duration::from_secs(11));
        call("a.example", 7);
        assert_eq!(family.sweep(), 1);
        assert!(family.get("b.example").is_none());
        export::record_family(&family);
        let (values, _) = read(&snapshotter, "export-family-latency");
        assert_eq!(values.len(), 1, "{values:?}");
        assert!(near(values[0], 0.007), "{values:?}");
    });
}

/// The value of `breakerbox_call_duration_last_minute_seconds` of breaker `name` at quantile
/// `q` in Prometheus text, as a scrape reads it.
fn last_minute(text: &str, name: &str, q: &str) -> Option<String> {
    let series = format!(
        "breakerbox_call_duration_last_minute_seconds{{name=\"{name}\",quantile=\"{q}\"}} "
    );
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(str::to_owned)
}

#[test]
fn the_last_minutes_quantiles_read_nan_once_the_minute_had_no_call() {
    // A recorder that keeps each series' value between scrapes, as Prometheus's does.
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let clock = ManualClock::new();
    registry().set_clock("export-latency-idle", clock.clone());
    let b = registry().get_or_create("export-latency-idle", || {
        Config::builder().latency(true).build().unwrap()
    });
    let _ = b.call(|| {
        clock.advance(Duration::from_secs(2));
        Ok::<_, &str>(())
    });
    metrics::with_local_recorder(&recorder, || export::record(&b));
    let p99 = last_minute(&handle.render(), "export-latency-idle", "0.99");
    let p99: f64 = p99.expect("a p99 after a call").parse().unwrap();
    assert!(near(p99, 2.0), "{p99}");

    // Two minutes without a call: there is no p99 of the last minute, and a `p99 > 1s` alert
    // must not go on firing for a call long gone.
    clock.advance(Duration::from_secs(120));
    assert_eq!(b.latency().unwrap().p99, None);
    metrics::with_local_recorder(&recorder, || export::record(&b));
    let text = handle.render();
    for q in ["0.5", "0.9", "0.99"] {
        assert_eq!(
            last_minute(&text, "export-latency-idle", q).as_deref(),
            Some("NaN"),
            "quantile {q}"
        );
    }
}
