//! The `metrics` export of a keyed family made again under the name of a dropped one: its
//! counters start from its own counts.

use breakerbox_runtime::{BreakerMap, Config};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

use crate::export;

/// `breakerbox_family_calls_total{name=family, outcome}` in one snapshot.
fn family_calls(snapshotter: &Snapshotter, family: &str, outcome: &str) -> Option<u64> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .find_map(|(key, _, _, value)| {
            let key = key.key();
            let has = |k: &str, v: &str| key.labels().any(|l| l.key() == k && l.value() == v);
            if key.name() == "breakerbox_family_calls_total"
                && has("name", family)
                && has("outcome", outcome)
            {
                match value {
                    DebugValue::Counter(n) => Some(n),
                    _ => None,
                }
            } else {
                None
            }
        })
}

fn down() -> Result<(), &'static str> {
    Err("down")
}

/// `record_family` keeps, in a process-wide map keyed by the family's name, the highest value
/// each family counter was exported with, so that a snapshot taken during an eviction never
/// shows a counter going down. That map also remembers which family it was of: a `BreakerMap`
/// rebuilt under the same name (an application that rebuilds its client on a config change)
/// exports its own counts, a counter reset to Prometheus, rather than stay pinned at the old
/// family's totals, its failures invisible until they outnumber the old family's.
#[test]
fn a_rebuilt_family_of_the_same_name_exports_its_own_counts() {
    let _settings = crate::settings();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let config = || Config::builder().failures(1).build().unwrap();
    let name = "export-rebuilt";

    let old: BreakerMap<u64> = BreakerMap::new(name, config());
    for key in 0..5 {
        let _ = old.call(&key, down);
    }
    metrics::with_local_recorder(&recorder, || export::record_family(&old));
    assert_eq!(family_calls(&snapshotter, name, "failure"), Some(5));
    drop(old);

    let new: BreakerMap<u64> = BreakerMap::new(name, config());
    for key in 100..102 {
        let _ = new.call(&key, down);
    }
    assert_eq!(new.snapshot(0).totals.failures, 2);
    metrics::with_local_recorder(&recorder, || export::record_family(&new));
    assert_eq!(
        family_calls(&snapshotter, name, "failure"),
        Some(2),
        "the new family failed twice; the export should say so (a counter reset), not the \
         old family's 5"
    );
}
