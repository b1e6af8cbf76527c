//! What criterion cannot time: bytes per breaker, heap growth over a million state changes, the
//! size of the futures, and the registry creating and resolving 10,000 names.
//!
//! A counting global allocator sees every heap byte. Results go to stdout and to
//! `target/criterion/facts.json`, which `scripts/bench` reads. `--quick` does a fraction of the
//! work; a smoke run (`--test`, or `cargo test --benches`, which passes no `--bench`) does that
//! fraction and writes no file.

use std::hint::black_box;
use std::time::{Duration, Instant};

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

use breakerbox::{Breaker, Config, ManualClock, State, registry};
use failsafe::CircuitBreaker as _;
use serde_json::{Value, json};

mod common;
use common::*;

/// The bare `async fn` under `#[circuit_breaker]`, for the future's size.
#[breakerbox::circuit_breaker(name = "bench.size.attr", failures = 5, open_for = "1h")]
async fn attr_async(x: u64) -> Result<u64, CallError> {
    protected(x)
}

/// Counts live heap bytes and allocations: one thread measures; the counts are read after
/// the work they count, on the same thread.
#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Allocations and reallocations so far.
fn allocs() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

/// Heap bytes live now.
fn live() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

/// Heap bytes per value of what `make` builds (averaged over `n`), and the handle's own size.
fn per_breaker<T>(n: usize, make: impl Fn(usize) -> T) -> Value {
    let mut keep = Vec::with_capacity(n);
    let before = live();
    for i in 0..n {
        keep.push(make(i));
    }
    let heap = (live() - before) as f64 / n as f64;
    let handle = size_of::<T>();
    drop(keep);
    json!({ "heap": heap.round(), "handle": handle, "total": heap.round() as usize + handle })
}

/// Live heap bytes gained over `changes` state changes, after a warm-up that lets lazy
/// one-time allocations happen. `cycle` makes three changes (closed → open → half-open →
/// closed) and returns how many it made.
fn growth(changes: u64, mut cycle: impl FnMut() -> u64) -> Value {
    let mut made = 0;
    while made < 3_000 {
        made += cycle();
    }
    let (before, allocs_before) = (live(), allocs());
    let start = Instant::now();
    let mut made = 0;
    while made < changes {
        made += cycle();
    }
    let took = start.elapsed();
    let grown = live() - before;
    json!({
        "changes": made,
        "grown_bytes": grown,
        "bytes_per_change": grown as f64 / made as f64,
        "allocs_per_change": (allocs() - allocs_before) as f64 / made as f64,
        "ns_per_change": took.as_nanos() as f64 / made as f64,
    })
}

fn bb_growth(changes: u64) -> Value {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .expect("valid config");
    let b = Breaker::new("growth", config);
    growth(changes, || {
        let _ = b.call(|| protected(FAIL));
        debug_assert_eq!(b.state(), State::Open);
        clock.advance(Duration::from_secs(1));
        let _ = b.call(|| protected(1));
        debug_assert_eq!(b.state(), State::Closed);
        3
    })
}

fn recloser_growth(changes: u64) -> Value {
    // Open for no time: the next call probes. Rings of one call judge from their second call.
    let rc = recloser::Recloser::custom()
        .error_rate(0.5)
        .closed_len(1)
        .half_open_len(1)
        .open_wait(Duration::ZERO)
        .build();
    growth(changes, || {
        let _ = rc.call(|| protected(FAIL)); // fills the closed ring
        let _ = rc.call(|| protected(FAIL)); // closed → open
        // open → half-open (once the clock moved past the deadline), then fills the ring
        while matches!(rc.call(|| protected(1)), Err(recloser::Error::Rejected)) {}
        let _ = rc.call(|| protected(1)); // half-open → closed
        3
    })
}

fn failsafe_growth(changes: u64) -> Value {
    use failsafe::{Config, backoff, failure_policy};
    let fs = Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            1,
            backoff::constant(Duration::ZERO),
        ))
        .build();
    growth(changes, || {
        let _ = fs.call(|| protected(FAIL)); // closed → open
        // open → half-open once the clock moved past the deadline, then → closed
        while matches!(fs.call(|| protected(1)), Err(failsafe::Error::Rejected)) {}
        3
    })
}

fn tower_growth(changes: u64) -> Value {
    use tower::{Layer, Service, ServiceExt};
    let rt = tokio_rt();
    let mut svc = tower_resilience::circuitbreaker::CircuitBreakerLayer::builder()
        .consecutive_failures(1)
        .wait_duration_in_open(Duration::from_nanos(1))
        .build()
        .expect("valid config")
        .layer(tower_base());
    growth(changes, || {
        rt.block_on(async {
            let _ = svc.ready().await.unwrap().call(FAIL).await; // closed → open
            assert!(svc.is_open());
            // open → half-open once the wait passed, then the probe closes it
            while svc.ready().await.unwrap().call(1).await.is_err() {}
            assert!(!svc.is_open());
        });
        3
    })
}

/// Creates `n` new names in the registry, then resolves them: ns per name for each.
fn registry_round(round: usize, n: usize) -> (f64, f64, f64) {
    let names: Vec<String> = (0..n).map(|i| format!("bench.reg.{round}.{i}")).collect();
    let start = Instant::now();
    for name in &names {
        black_box(registry().get_or_create(name, Config::default));
    }
    let create = start.elapsed().as_nanos() as f64 / n as f64;
    let start = Instant::now();
    for name in &names {
        black_box(registry().get_or_create(name, Config::default));
    }
    let again = start.elapsed().as_nanos() as f64 / n as f64;
    let start = Instant::now();
    for name in &names {
        black_box(registry().get(name));
    }
    let get = start.elapsed().as_nanos() as f64 / n as f64;
    (create, again, get)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // As criterion decides: `cargo bench` passes `--bench`; without it (`cargo test --benches`)
    // or with `--test`, this is a smoke run.
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let smoke = !has("--bench") || has("--test");
    let quick = smoke || has("--quick");
    let (n, changes, names, rounds) = if quick {
        (100, 30_000, 1_000, 1)
    } else {
        (10_000, 1_000_000, 10_000, 5)
    };

    let bytes = json!({
        "bb_default": per_breaker(n, |_| Breaker::new("b", Config::default())),
        "bb_consecutive": per_breaker(n, |_| bb_consecutive("b")),
        "bb_time_window": per_breaker(n, |_| Breaker::new("b", bb_time_window_config())),
        "bb_count_window": per_breaker(n, |_| Breaker::new("b", bb_count_window_config())),
        "failsafe_consecutive": per_breaker(n, |_| failsafe_consecutive(5)),
        "failsafe_default": per_breaker(n, |_| failsafe_default()),
        "recloser": per_breaker(n, |_| recloser(100)),
        "tower_resilience": per_breaker(n, |_| tower_consecutive(5)),
    });

    let growth = json!({
        "breakerbox": bb_growth(changes),
        "failsafe_consecutive": failsafe_growth(changes),
        "recloser": recloser_growth(changes),
        "tower_resilience": tower_growth(changes / 10),
    });

    let b = bb_consecutive("size");
    let fs = failsafe_consecutive(5);
    let rc = recloser::AsyncRecloser::from(recloser(100));
    let futures = json!({
        "bare": size_of_val(&protected_async(0)),
        "bb_call_async": size_of_val(&b.call_async(protected_async(0))),
        "bb_attr": size_of_val(&attr_async(0)),
        "failsafe": size_of_val(&failsafe::futures::CircuitBreaker::call(&fs, protected_async(0))),
        "recloser": size_of_val(&rc.call(protected_async(0))),
    });

    let mut create = Vec::new();
    let mut again = Vec::new();
    let mut get = Vec::new();
    for round in 0..rounds {
        let (c, a, g) = registry_round(round, names);
        create.push(c);
        again.push(a);
        get.push(g);
    }
    let registry = json!({
        "names": names,
        "rounds": rounds,
        "create_ns_per_name": median(create),
        "get_or_create_existing_ns_per_name": median(again),
        "get_ns_per_name": median(get),
    });

    let facts = json!({
        "quick": quick,
        "bytes_per_breaker": bytes,
        "heap_growth": growth,
        "future_bytes": futures,
        "registry": registry,
    });
    let text = serde_json::to_string_pretty(&facts).expect("json");
    println!("{text}");
    if smoke {
        return; // a smoke run leaves the last real run's facts for `scripts/bench --table`
    }
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into())
        .join("criterion");
    std::fs::create_dir_all(&dir).expect("target/criterion");
    std::fs::write(dir.join("facts.json"), text).expect("write facts.json");
}
