//! Heap bytes, counted by a global allocator (not RSS, not time): breakers with distinct names
//! give their memory back when dropped, a key costs at most `KEY_COST` bytes beside
//! the key itself, and streaming many keys through a bounded family leaves the heap flat. One test, run
//! alone in a process of its own (`crate::alone`), so that nothing else allocates while it
//! counts.

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

use breakerbox_runtime::{Breaker, Config};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// The most a key's breaker may cost on the heap: its handles' part (32 bytes), its state
/// (192 bytes on cache lines of their own, after its reference counts' line: 256), what its
/// rejections report (112: its name and key, clock, last failure, and the deadline a fleet's
/// trip taken on reports), and the family's entry for it.
const KEY_COST: i64 = 480;

/// Heap bytes live now.
fn live() -> i64 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64
}

#[test]
fn memory_comes_back() {
    crate::alone::alone(
        concat!(module_path!(), "::memory_comes_back"),
        memory_comes_back_alone,
    );
}

fn memory_comes_back_alone() {
    breakers_with_distinct_names_return_their_memory();
    keyed();
}

/// Breakers of distinct names give every heap byte of their names back when dropped: a name
/// kept for the process would cost ~60 bytes each, for ever.
fn breakers_with_distinct_names_return_their_memory() {
    let config = Config::default();
    for i in 0..1_000 {
        drop(Breaker::new(format!("warm-{i}"), config.clone()));
    }
    let before = live();
    for i in 0..50_000 {
        drop(Breaker::new(format!("distinct-{i}"), config.clone()));
    }
    let grown = live() - before;
    assert!(
        grown <= 4096,
        "50 000 dropped breakers left {grown} heap bytes"
    );
}

fn keyed() {
    use breakerbox_runtime::BreakerMap;

    // What a key costs: a family of 10 000 `u64` keys, a consecutive-failure config.
    let config = Config::builder()
        .failures(5)
        .max_keys(20_000)
        .build()
        .unwrap();
    let before = live();
    let map: BreakerMap<u64> = BreakerMap::new("cost", config.clone());
    for k in 0..10_000u64 {
        map.call(&k, || Ok::<_, &str>(())).unwrap();
    }
    let per_key = (live() - before) / 10_000;
    let key = std::mem::size_of::<u64>() as i64;
    assert!(
        per_key <= KEY_COST + key,
        "a key costs {per_key} heap bytes"
    );
    drop(map);
    assert!(
        live() - before <= 4096,
        "a dropped family left {}",
        live() - before
    );

    // Streaming 100 000 distinct keys through `max_keys = 1 000` leaves the heap flat after
    // warm-up: at every ten-thousandth key the heap is within a bound of where it stood after
    // the first 10 000. The bound is what evicted keys may hold while they wait to be freed: the
    // map frees an evicted entry (its breaker, about `KEY_COST` bytes) once no lookup can
    // still reach it, in batches, so a few hundred of them may be pending at any moment. A
    // leak shows as a trend: the lowest of the last three checkpoints may not exceed the
    // highest of the first three (30 000 keys before) by more than 64 KiB, which a leak of
    // three bytes a key or more does.
    let config = Config::builder().max_keys(1_000).build().unwrap();
    let map: BreakerMap<String> = BreakerMap::new("stream", config);
    let mut warm = 0;
    let mut checkpoints = Vec::new();
    for i in 0..100_000u64 {
        map.call(&format!("host-{i}.example"), || Ok::<_, &str>(()))
            .unwrap();
        assert!(map.len() <= 1_000, "{} keys held", map.len());
        if i == 10_000 {
            warm = live();
        } else if i > 10_000 && i % 10_000 == 0 {
            let grown = live() - warm;
            assert!(
                grown <= 128 << 10,
                "{} more keys grew the heap by {grown} bytes",
                i - 10_000
            );
            checkpoints.push(grown);
        }
    }
    let first = checkpoints.iter().take(3).max().copied().unwrap();
    let last = checkpoints.iter().rev().take(3).min().copied().unwrap();
    assert!(
        last <= first + (64 << 10),
        "the heap kept growing as keys streamed through: {checkpoints:?}"
    );
    assert_eq!(map.evicted().keys + map.len() as u64, 100_000);
}
