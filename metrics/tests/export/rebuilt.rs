//! The `metrics` export of a keyed family made again under the name of a dropped one: its
//! counters go on from the old family's totals.

use breakerbox_runtime::{BreakerMap, Config};

use crate::export;

/// `breakerbox_family_calls_total{name=family, outcome}` in Prometheus text.
fn family_calls(text: &str, family: &str, outcome: &str) -> Option<u64> {
    let series =
        format!("breakerbox_family_calls_total{{name=\"{family}\",outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map(|v| v.parse().unwrap())
}

fn down() -> Result<(), &'static str> {
    Err("down")
}

/// `record_family` keeps, in a process-wide map keyed by the family's name, the highest value
/// each family counter was exported with, so that a snapshot taken during an eviction never
/// shows a counter going down. That map also remembers which family it was of: a `BreakerMap`
/// rebuilt under the same name (an application that rebuilds its client on a config change)
/// counts on from the old family's totals. A counter set lower than it reads stays where it is
/// (the Prometheus exporter keeps the highest value), so exporting the new family's own counts
/// would leave its failures invisible until they outnumbered the old family's.
#[test]
fn a_rebuilt_family_of_the_same_name_counts_on_from_the_old_totals() {
    let _settings = crate::settings();
    // A recorder that keeps each series between scrapes, as Prometheus's does.
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let export = |family: &BreakerMap<u64>| {
        metrics::with_local_recorder(&recorder, || export::record_family(family));
        family_calls(&handle.render(), "export-rebuilt", "failure")
    };
    let config = || Config::builder().failures(1).build().unwrap();

    let old: BreakerMap<u64> = BreakerMap::new("export-rebuilt", config());
    for key in 0..5 {
        let _ = old.call(&key, down);
    }
    assert_eq!(export(&old), Some(5));
    drop(old);

    let new: BreakerMap<u64> = BreakerMap::new("export-rebuilt", config());
    for key in 100..102 {
        let _ = new.call(&key, down);
    }
    assert_eq!(new.snapshot(0).totals.failures, 2);
    assert_eq!(
        export(&new),
        Some(7),
        "the new family failed twice: the counter must go up by 2"
    );
    let _ = new.call(&102, down);
    assert_eq!(export(&new), Some(8));
}

/// `breakerbox_calls_total{name, outcome}` and `breakerbox_call_duration_seconds_count{name}`
/// in Prometheus text.
fn breaker_counts(text: &str, name: &str) -> (Option<u64>, Option<u64>) {
    let read = |series: String| {
        text.lines()
            .find_map(|line| line.strip_prefix(&series))
            .map(|v| v.parse().unwrap())
    };
    (
        read(format!(
            "breakerbox_calls_total{{name=\"{name}\",outcome=\"success\"}} "
        )),
        read(format!(
            "breakerbox_call_duration_seconds_count{{name=\"{name}\"}} "
        )),
    )
}

/// A `Breaker::new` made again under the name of a dropped one (a client rebuilt on a config
/// change), exported with `record`: its calls are counted on from the old one's, in the
/// counters and in the histogram.
#[test]
fn a_rebuilt_breaker_of_the_same_name_counts_on_from_the_old_totals() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let config = || Config::builder().latency(true).build().unwrap();
    let export = |b: &breakerbox_runtime::Breaker| {
        metrics::with_local_recorder(&recorder, || export::record(b));
        breaker_counts(&handle.render(), "export-rebuilt-breaker")
    };
    let ok = || Ok::<_, &str>(());

    let old = breakerbox_runtime::Breaker::new("export-rebuilt-breaker", config());
    for _ in 0..3 {
        old.call(ok).unwrap();
    }
    assert_eq!(export(&old), (Some(3), Some(3)));
    drop(old);

    let new = breakerbox_runtime::Breaker::new("export-rebuilt-breaker", config());
    for _ in 0..4 {
        new.call(ok).unwrap();
    }
    assert_eq!(
        export(&new),
        (Some(7), Some(7)),
        "the new breaker made 4 calls: each count must go up by 4"
    );
}

/// Two live breakers of one name (one per pool, say), each exported with `record`, and two
/// live families of one name with `record_family`: the counters add up what each counted, and
/// exporting again without a call changes nothing.
#[test]
fn live_breakers_or_families_of_one_name_add_up_however_often_exported() {
    let _settings = crate::settings();
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let ok = || Ok::<_, &str>(());
    let pools = [
        breakerbox_runtime::Breaker::new("export-twins", Config::default()),
        breakerbox_runtime::Breaker::new("export-twins", Config::default()),
    ];
    for pool in &pools {
        for _ in 0..2 {
            pool.call(ok).unwrap();
        }
    }
    let families: [BreakerMap<u64>; 2] = [
        BreakerMap::new("export-twins-family", Config::default()),
        BreakerMap::new("export-twins-family", Config::default()),
    ];
    for family in &families {
        let _ = family.call(&1, down);
    }
    let mut read = Vec::new();
    for _ in 0..3 {
        metrics::with_local_recorder(&recorder, || {
            for pool in &pools {
                export::record(pool);
            }
            for family in &families {
                export::record_family(family);
            }
        });
        let text = handle.render();
        read.push((
            breaker_counts(&text, "export-twins").0,
            family_calls(&text, "export-twins-family", "failure"),
        ));
    }
    assert_eq!(read, [(Some(4), Some(2)); 3]);
}

/// Two live breakers of one name that time their calls: the histogram is fed each one's calls
/// once.
#[test]
fn live_breakers_of_one_name_feed_the_histogram_each_call_once() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let config = || Config::builder().latency(true).build().unwrap();
    let ok = || Ok::<_, &str>(());
    let pools = [
        breakerbox_runtime::Breaker::new("export-twins-timed", config()),
        breakerbox_runtime::Breaker::new("export-twins-timed", config()),
    ];
    for (pool, calls) in pools.iter().zip([2, 3]) {
        for _ in 0..calls {
            pool.call(ok).unwrap();
        }
    }
    let export = || {
        metrics::with_local_recorder(&recorder, || {
            for pool in &pools {
                export::record(pool);
            }
        });
        breaker_counts(&handle.render(), "export-twins-timed")
    };
    assert_eq!(export(), (Some(5), Some(5)));
    assert_eq!(export(), (Some(5), Some(5)));
    pools[0].call(ok).unwrap();
    assert_eq!(export(), (Some(6), Some(6)));
}
