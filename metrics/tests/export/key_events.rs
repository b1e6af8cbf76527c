//! `export::install`'s listener keeps `breakerbox_state` for registry breakers: a registry
//! family's key, whose changes the registry's listeners hear too, sets no `breakerbox_state`
//! series of its family's name (families are exported by `record_all`, per family and top
//! open keys).

use breakerbox_runtime::{Config, registry};

use crate::export;
use metrics_util::debugging::DebuggingRecorder;

#[test]
fn a_keys_change_sets_no_breaker_state_of_its_familys_name() {
    export::install();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let hosts = registry()
        .family::<String>("export-keys.hosts", || {
            Config::builder().failures(1).build().unwrap()
        })
        .unwrap();
    let single = registry().get_or_create("export-keys.single", Config::default);
    metrics::with_local_recorder(&recorder, || {
        let _ = hosts.call("a.example", || Err::<(), _>("refused"));
        single.force_open();
    });
    let names: Vec<String> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == "breakerbox_state")
        .flat_map(|(key, ..)| {
            key.key()
                .labels()
                .filter(|l| l.key() == "name")
                .map(|l| l.value().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(names, ["export-keys.single"]);
}
