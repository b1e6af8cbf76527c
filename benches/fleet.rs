//! Fleet mode's cost on the call path: a closed call through a breaker the fleet shares,
//! against the same call through the same breaker before the fleet shared it.
//!
//! The fleet adds one state-change listener to a shared breaker and nothing to a call that
//! changes no state, so the two rows should match. With `BREAKERBOX_TEST_REDIS_URL` set (as
//! `scripts/test` does) the fleet is connected to that server; without it, it points at a
//! closed port and keeps retrying in the background, which the call path does not see either.
//!
//!   cargo bench -p breakerbox-benches --bench fleet -- --warm-up-time 1 --measurement-time 3

use std::hint::black_box;
use std::time::Instant;

use breakerbox::fleet::{Fleet, FleetConfig};
use breakerbox::{Breaker, State};
use criterion::{Criterion, criterion_group, criterion_main};

mod common;
use common::*;

fn closed_call(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = std::env::var("BREAKERBOX_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:1/".to_owned());
    let fleet = {
        let _guard = runtime.enter();
        Fleet::start(FleetConfig::new(url).prefix("bench")).unwrap()
    };
    // One breaker, timed before and after the fleet shares it: two breakers would sit at two
    // addresses, and where a breaker lands moves a closed call by more than the fleet could
    // (±60% between processes here), which would read as the fleet's cost.
    let breaker = Breaker::new("fleet.shared", bb_consecutive_config());

    let mut g = c.benchmark_group("fleet_closed_ok");
    for id in ["fleet_off", "fleet_on"] {
        if id == "fleet_on" {
            fleet.share(&breaker);
        }
        g.bench_function(id, |b| {
            b.iter_custom(|n| {
                let mut inputs = Inputs::all_ok();
                let mut sum = 0u64;
                let start = Instant::now();
                for _ in 0..n {
                    let x = black_box(inputs.next());
                    sum = sum.wrapping_add(breaker.call(|| protected(x)).unwrap_or(0));
                }
                let took = start.elapsed();
                black_box(sum);
                took
            })
        });
        assert_eq!(breaker.state(), State::Closed);
    }
    g.finish();
    drop(fleet);
}

criterion_group!(benches, closed_call);
criterion_main!(benches);
