//! Keyed families in the `metrics` export and in serde: by default aggregates, the number of
//! open keys and the top open keys; a series per key only when asked. One test, because the
//! export settings (`set_top_open`, `set_per_key`) are process-wide; it holds
//! [`settings`](crate::settings) throughout.

use std::time::Duration;

use breakerbox_runtime::{BreakerMap, Config, ManualClock, registry};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::export;

/// One reading: `(metric, labels sorted by name, value)`.
type Reading = (String, Vec<(String, String)>, f64);

fn take(snapshotter: &Snapshotter) -> Vec<Reading> {
    let mut all: Vec<Reading> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            let value = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(g) => g.0,
                DebugValue::Histogram(_) => return None,
            };
            Some((key.name().to_owned(), labels, value))
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    all
}

/// The readings of `family`'s metrics (label `name` = `family`), without that label.
fn of(readings: &[Reading], family: &str) -> Vec<Reading> {
    readings
        .iter()
        .filter(|(_, labels, _)| labels.iter().any(|(k, v)| k == "name" && v == family))
        .map(|(m, labels, v)| {
            let rest = labels
                .iter()
                .filter(|(k, _)| k != "name")
                .cloned()
                .collect();
            (m.clone(), rest, *v)
        })
        .collect()
}

fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn r(metric: &str, labels: &[(&str, &str)], value: f64) -> Reading {
    (metric.to_owned(), l(labels), value)
}

/// `calls`: successes, failures, ignored, rejected, slow, timeouts.
fn family_rows(calls: [f64; 6], evicted: f64, keys: f64, open: f64) -> Vec<Reading> {
    let mut rows = Vec::new();
    for (outcome, v) in [
        "failure", "ignored", "rejected", "slow", "success", "timeout",
    ]
    .into_iter()
    .zip([calls[1], calls[2], calls[3], calls[4], calls[0], calls[5]])
    {
        rows.push(r(
            "breakerbox_family_calls_total",
            &[("outcome", outcome)],
            v,
        ));
    }
    rows.push(r("breakerbox_family_evicted_total", &[], evicted));
    rows.push(r("breakerbox_family_keys", &[], keys));
    rows.push(r("breakerbox_family_open_keys", &[], open));
    rows
}

#[test]
fn families_export_aggregates_and_top_open_keys_and_per_key_only_when_asked() {
    let _settings = crate::settings();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let clock = ManualClock::new();
    registry().set_clock("export-keyed", clock.clone());
    let hosts = registry()
        .family::<String>("export-keyed", || {
            Config::builder()
                .failures(2)
                .open_for(Duration::from_secs(60))
                .build()
                .unwrap()
        })
        .unwrap();
    let down = || Err::<(), _>("down");
    hosts
        .try_acquire("a")
        .unwrap()
        .timed_out(&breakerbox_runtime::Timeout::new(
            "export-keyed",
            Duration::from_secs(1),
        ));
    for key in ["b", "b", "c", "c", "c"] {
        let _ = hosts.call(key, down);
    }
    // `a` closed with 1 failure, a timeout; `b` open (2); `c` open (2 failures, then 1
    // rejection).
    hosts.call("d", || Ok::<_, &str>(())).unwrap();

    export::set_top_open(1);
    metrics::with_local_recorder(&recorder, export::record_all);
    let mut want = family_rows([1.0, 5.0, 0.0, 1.0, 0.0, 1.0], 0.0, 4.0, 2.0);
    // The top one of the two open keys: equal failures, so by key.
    want.push(r("breakerbox_key_state", &[("key", "b")], 1.0));
    want.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    assert_eq!(of(&take(&snapshotter), "export-keyed"), want);

    // `b` closes: it leaves the top (0), and `c` enters it.
    hosts.get("b").unwrap().reset();
    metrics::with_local_recorder(&recorder, export::record_all);
    let got = of(&take(&snapshotter), "export-keyed");
    let keys: Vec<_> = got
        .iter()
        .filter(|(m, _, _)| m == "breakerbox_key_state")
        .cloned()
        .collect();
    assert_eq!(
        keys,
        [
            r("breakerbox_key_state", &[("key", "b")], 0.0),
            r("breakerbox_key_state", &[("key", "c")], 1.0)
        ]
    );
    assert!(got.contains(&r("breakerbox_family_open_keys", &[], 1.0)));

    // Per key, when asked: every key's counts, openings and state.
    export::set_per_key(true);
    metrics::with_local_recorder(&recorder, export::record_all);
    export::set_per_key(false);
    let got = of(&take(&snapshotter), "export-keyed");
    let a: Vec<_> = got
        .iter()
        .filter(|(_, labels, _)| labels.contains(&("key".to_owned(), "a".to_owned())))
        .cloned()
        .collect();
    assert_eq!(
        a,
        [
            r(
                "breakerbox_key_calls_total",
                &[("key", "a"), ("outcome", "failure")],
                1.0
            ),
            r(
                "breakerbox_key_calls_total",
                &[("key", "a"), ("outcome", "ignored")],
                0.0
            ),
            r(
                "breakerbox_key_calls_total",
                &[("key", "a"), ("outcome", "rejected")],
                0.0
            ),
            r(
                "breakerbox_key_calls_total",
                &[("key", "a"), ("outcome", "slow")],
                0.0
            ),
            r(
                "breakerbox_key_calls_total",
                &[("key", "a"), ("outcome", "success")],
                0.0
            ),
            r(
                "breakerbox_key_calls_total",
                &[("key", "a"), ("outcome", "timeout")],
                1.0
            ),
            r("breakerbox_key_opened_total", &[("key", "a")], 0.0),
            r("breakerbox_key_state", &[("key", "a")], 0.0),
        ]
    );
    export::set_top_open(10);

    // A family outside the registry, exported by hand.
    let own: BreakerMap<u64> = BreakerMap::new(
        "export-keyed-own",
        Config::builder().failures(1).build().unwrap(),
    );
    let _ = own.call(&7, down);
    metrics::with_local_recorder(&recorder, || export::record_family(&own));
    let mut want = family_rows([0.0, 1.0, 0.0, 0.0, 0.0, 0.0], 0.0, 1.0, 1.0);
    want.push(r("breakerbox_key_state", &[("key", "7")], 1.0));
    want.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    assert_eq!(of(&take(&snapshotter), "export-keyed-own"), want);

    // The same snapshot as data, for an admin page, and through serde.
    let s = registry()
        .family_snapshots(1)
        .into_iter()
        .find(|s| s.name == "export-keyed")
        .unwrap();
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["keys"], 4);
    assert_eq!(json["open_keys"], 1);
    assert_eq!(
        json["totals"],
        serde_json::json!({
            "calls": 7, "successes": 1, "failures": 5, "ignored": 0, "rejected": 1, "slow": 0,
            "timeouts": 1
        })
    );
    assert_eq!(json["top_open"][0]["key"], "c");
    assert_eq!(json["top_open"][0]["metrics"]["state"], "open");
    assert_eq!(json["top_open"][0]["metrics"]["failures"], 2);
    assert_eq!(json["evicted"]["keys"], 0);
    assert!(json["overflow"].is_null());
    let back: breakerbox_runtime::FamilySnapshot = serde_json::from_value(json).unwrap();
    assert_eq!(back, s);
}

/// `breakerbox_key_state` of `family`'s `key` in Prometheus text, as a scrape reads it.
fn key_state(text: &str, family: &str, key: &str) -> Option<f64> {
    let series = format!("breakerbox_key_state{{name=\"{family}\",key=\"{key}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|v| v.parse().unwrap())
}

#[test]
fn a_key_exported_per_key_reads_0_once_evicted_or_per_key_is_turned_off() {
    let _settings = crate::settings();
    // A recorder that keeps each series' value between scrapes, as Prometheus's does.
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let clock = ManualClock::new();
    registry().set_clock("export-keyed-gone", clock.clone());
    let hosts = registry()
        .family::<String>("export-keyed-gone", || {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(1))
                .idle_for(Duration::from_secs(5))
                .build()
                .unwrap()
        })
        .unwrap();
    let _ = hosts.call("a", || Err::<(), _>("down"));
    let _ = hosts.call("b", || Err::<(), _>("down"));
    // Per key only: no top open key is exported for itself.
    export::set_top_open(0);
    export::set_per_key(true);
    metrics::with_local_recorder(&recorder, export::record_all);
    assert_eq!(
        key_state(&handle.render(), "export-keyed-gone", "a"),
        Some(1.0)
    );

    // `a`'s open time runs, it stays idle and is evicted: no key `a` is open any more.
    clock.advance(Duration::from_secs(10));
    let _ = hosts.call("b", || Err::<(), _>("down"));
    hosts.sweep();
    assert!(hosts.get("a").is_none());
    metrics::with_local_recorder(&recorder, export::record_all);
    let gone = key_state(&handle.render(), "export-keyed-gone", "a");

    // Per key turned off: `b` is exported no more, and must not read open for ever.
    export::set_per_key(false);
    metrics::with_local_recorder(&recorder, export::record_all);
    let off = key_state(&handle.render(), "export-keyed-gone", "b");
    export::set_top_open(10);
    assert_eq!(gone, Some(0.0), "an evicted key reads its last state");
    assert_eq!(
        off,
        Some(0.0),
        "a key no longer exported reads its last state"
    );
}

/// `breakerbox_key_calls_total` of `family`'s `key` for `outcome` in Prometheus text.
fn key_calls(text: &str, family: &str, key: &str, outcome: &str) -> Option<f64> {
    let series = format!(
        "breakerbox_key_calls_total{{name=\"{family}\",key=\"{key}\",outcome=\"{outcome}\"}} "
    );
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|v| v.parse().unwrap())
}

#[test]
fn a_keys_calls_per_key_go_on_counting_across_its_eviction() {
    let _settings = crate::settings();
    // A recorder that keeps each series between scrapes, as Prometheus's does: a counter set
    // lower than it reads stays where it is.
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let clock = ManualClock::new();
    registry().set_clock("export-keyed-back", clock.clone());
    let hosts = registry()
        .family::<String>("export-keyed-back", || {
            Config::builder()
                .idle_for(Duration::from_secs(5))
                .build()
                .unwrap()
        })
        .unwrap();
    let ok = || Ok::<_, &str>(());
    for _ in 0..3 {
        hosts.call("a", ok).unwrap();
    }
    export::set_per_key(true);
    let export = || {
        metrics::with_local_recorder(&recorder, export::record_all);
        key_calls(&handle.render(), "export-keyed-back", "a", "success")
    };
    assert_eq!(export(), Some(3.0));

    // `a` is idle, evicted, then called twice: a new breaker counts its calls from 0.
    hosts.sweep();
    clock.advance(Duration::from_secs(10));
    hosts.sweep();
    assert!(hosts.get("a").is_none());
    let evicted = export();
    for _ in 0..2 {
        hosts.call("a", ok).unwrap();
    }
    let back = export();
    // Evicted and back between two exports, with fewer calls than before.
    hosts.sweep();
    clock.advance(Duration::from_secs(10));
    hosts.sweep();
    assert!(hosts.get("a").is_none());
    hosts.call("a", ok).unwrap();
    let again = export();
    export::set_per_key(false);
    assert_eq!(evicted, Some(3.0));
    assert_eq!(back, Some(5.0), "the calls after the eviction are counted");
    assert_eq!(again, Some(6.0), "the calls after the eviction are counted");
}
