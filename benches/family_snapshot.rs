//! What reading a keyed family costs: `BreakerMap::snapshot`, which the admin
//! page's tick and the metrics export read, for a family whose keys time their calls
//! (`latency = true`: each key's histogram merged into the family's) and for one whose keys
//! do not, at 1 000 and 10 000 keys. Each key has had one call; nothing runs meanwhile.
//!
//! `cargo bench -p breakerbox-benches --bench family_snapshot`.

use std::hint::black_box;
use std::time::Duration;

use breakerbox::{BreakerMap, Config};
use criterion::{Criterion, criterion_group, criterion_main};

fn family(keys: usize, latency: bool) -> BreakerMap<String> {
    let config = Config::builder()
        .latency(latency)
        .max_keys(keys as u32)
        .idle_for(Duration::from_secs(3600))
        .build()
        .unwrap();
    let f = BreakerMap::new("snapshot", config);
    for i in 0..keys {
        f.call(&format!("key-{i}"), || Ok::<_, &str>(())).unwrap();
    }
    f
}

fn snapshot(c: &mut Criterion) {
    let mut g = c.benchmark_group("family_snapshot");
    for keys in [1_000, 10_000] {
        for (what, latency) in [("untimed", false), ("latency", true)] {
            let f = family(keys, latency);
            assert_eq!(f.snapshot(10).latency.is_some(), latency);
            g.bench_function(format!("{what}_{keys}"), |b| {
                b.iter(|| black_box(f.snapshot(black_box(10))).keys)
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = snapshot
}
criterion_main!(benches);
