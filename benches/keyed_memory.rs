//! Per-key breakers' memory, what criterion cannot time:
//! - heap bytes per key of a `BreakerMap` (a consecutive-failure config), beside the key: with
//!   each key called once, and called three times (what a family whose keys are called again
//!   costs: lookups allocate nothing, so the same);
//! - RSS while 1 M distinct keys stream through a family with `max_keys = 10 000`;
//! - RSS and live heap after creating and dropping 1 M `Breaker::new` with distinct names.
//!
//! Prints one JSON object. `--quick` (or a smoke run: `--test`, or no `--bench`) does a tenth.

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

use breakerbox::{Breaker, BreakerMap, Config, live_breakers};

/// Counts live heap bytes and allocations: one thread measures; the counts are read after
/// the work they count, on the same thread.
#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes live now.
fn live() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

/// Resident set size in bytes (Linux; 0 elsewhere).
fn rss() -> i64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<i64>().ok())
        .map_or(0, |pages| pages * 4096)
}

const MIB: f64 = (1 << 20) as f64;

/// Heap bytes per key of a family holding `n` keys made by `key`, each called `rounds` times,
/// minus the key's own heap.
fn per_key<K: std::hash::Hash + Eq + Clone + std::fmt::Display + Send + Sync + 'static>(
    n: u64,
    rounds: u64,
    key: impl Fn(u64) -> K,
    key_heap: i64,
) -> i64 {
    let config = Config::builder()
        .failures(5)
        .max_keys(2 * n as u32)
        .build()
        .expect("valid config");
    let before = live();
    let map: BreakerMap<K> = BreakerMap::new("bench.cost", config);
    for _ in 0..rounds {
        for i in 0..n {
            let k = key(i);
            map.call(&k, || Ok::<_, &str>(())).expect("closed");
        }
    }
    let per = (live() - before) / n as i64 - key_heap;
    drop(map);
    per
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick" || a == "--test")
        || !std::env::args().any(|a| a == "--bench");
    let million: u64 = if quick { 100_000 } else { 1_000_000 };

    // A key: `u64` (no heap of its own) and `String` (its bytes counted as the key's), called
    // once and three times.
    let u64_key = per_key(10_000, 1, |i| i, 0);
    let u64_indexed = per_key(10_000, 3, |i| i, 0);
    let string = |i| format!("host-{i:05}.example");
    let string_key = per_key(10_000, 1, string, 24);
    let string_indexed = per_key(10_000, 3, string, 24);

    // Streaming distinct keys through a bounded family.
    let config = Config::builder()
        .max_keys(10_000)
        .build()
        .expect("valid config");
    let map: BreakerMap<String> = BreakerMap::new("bench.stream", config);
    let warm_up = million / 10;
    let (mut rss_warm, mut heap_warm) = (0, 0);
    let mut max_len = 0;
    for i in 0..million {
        map.call(&format!("host-{i}.example"), || Ok::<_, &str>(()))
            .expect("closed");
        max_len = max_len.max(map.len());
        if i + 1 == warm_up {
            (rss_warm, heap_warm) = (rss(), live());
        }
    }
    let stream_rss = (rss() - rss_warm) as f64 / MIB;
    let stream_heap = (live() - heap_warm) as f64 / MIB;
    let evicted = map.evicted().keys;
    drop(map);

    // Breakers with distinct names, created and dropped: their names are freed with them.
    let (rss_before, heap_before, live_before) = (rss(), live(), live_breakers());
    for i in 0..million {
        drop(Breaker::new(format!("bench.named-{i}"), Config::default()));
    }
    let named_rss = (rss() - rss_before) as f64 / MIB;
    let named_heap = live() - heap_before;
    let named_live = live_breakers() as i64 - live_before as i64;

    println!(
        "{{\"keyed_memory\": {{\"bytes_per_key_u64\": {u64_key}, \"bytes_per_key_u64_indexed\": {u64_indexed}, \
         \"bytes_per_key_string_beside_key\": {string_key}, \"bytes_per_key_string_indexed_beside_key\": {string_indexed}, \
         \"stream_keys\": {million}, \"stream_max_keys_held\": {max_len}, \"stream_evicted\": {evicted}, \
         \"stream_rss_growth_after_warmup_mib\": {stream_rss:.2}, \"stream_heap_growth_after_warmup_mib\": {stream_heap:.2}, \
         \"named_breakers\": {million}, \"named_rss_growth_mib\": {named_rss:.2}, \"named_heap_growth_bytes\": {named_heap}, \
         \"named_live_breakers_left\": {named_live}}}}}"
    );
}
