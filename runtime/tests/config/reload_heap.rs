//! Reloads keep memory flat. A breaker or family keeps every config it replaced for its life
//! (a call may still read one), so a reload whose config is equal swaps nothing (a watch on a
//! file touched by a sync job, or a reload on a timer, would otherwise grow without bound), as
//! a single breaker's `reconfigure` skips an equal config; and configs switched back and forth
//! are kept once each. Measured with a counting allocator, in bytes live, not in time, alone
//! in a process of its own (`crate::alone`).
#![cfg(feature = "serde")]

use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

use breakerbox_runtime::{Config, registry};

#[global_allocator]
static ALLOC: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

#[test]
fn reloading_an_unchanged_file_into_a_family_keeps_memory_flat() {
    crate::alone::alone(
        concat!(
            module_path!(),
            "::reloading_an_unchanged_file_into_a_family_keeps_memory_flat"
        ),
        reloading_an_unchanged_file_into_a_family_keeps_memory_flat_alone,
    );
}

fn reloading_an_unchanged_file_into_a_family_keeps_memory_flat_alone() {
    let family = registry()
        .family::<String>("reload-heap.reload.flat", || {
            Config::builder().failures(3).build().unwrap()
        })
        .unwrap();
    let _ = family.call("a", || Err::<(), _>("down"));
    let text = "[breakers.\"reload-heap.reload.flat\"]\nfailures = 5\n";
    // The first reload changes the config (3 -> 5); warm up after it.
    for _ in 0..10 {
        registry().reload_toml_str("flat.toml", text).unwrap();
    }
    assert_eq!(family.config().failures(), Some(5));
    let region = Region::new(ALLOC);
    for _ in 0..2000 {
        registry().reload_toml_str("flat.toml", text).unwrap();
    }
    let c = region.change();
    let grown = c.bytes_allocated as isize - c.bytes_deallocated as isize;
    // Each kept copy costs a config (hundreds of bytes): 2000 kept copies would be ~ 1 MB.
    assert!(
        grown < 64 * 1024,
        "2000 reloads of an unchanged file kept {grown} bytes"
    );
    assert_eq!(family.config().failures(), Some(5));
}

#[test]
fn switching_between_two_configs_again_and_again_keeps_memory_flat() {
    crate::alone::alone(
        concat!(
            module_path!(),
            "::switching_between_two_configs_again_and_again_keeps_memory_flat"
        ),
        switching_between_two_configs_again_and_again_keeps_memory_flat_alone,
    );
}

/// A breaker and a family switched between two configs 20 000 times (a flag flipped by an
/// automation, a file written back and forth): each keeps the two configs once, so the heap
/// stays where it was after the first switches.
fn switching_between_two_configs_again_and_again_keeps_memory_flat_alone() {
    let config = |failures| Config::builder().failures(failures).build().unwrap();
    let breaker = breakerbox_runtime::Breaker::new("reload-heap.switch", config(3));
    let family = registry()
        .family::<String>("reload-heap.switch.family", || config(3))
        .unwrap();
    let _ = family.call("a", || Err::<(), _>("down"));
    let file =
        |failures| format!("[breakers.\"reload-heap.switch.family\"]\nfailures = {failures}\n");
    let (four, five) = (file(4), file(5));
    let switch = || {
        assert!(breaker.reconfigure(config(4)).unwrap());
        assert!(breaker.reconfigure(config(5)).unwrap());
        registry().reload_toml_str("switch.toml", &four).unwrap();
        registry().reload_toml_str("switch.toml", &five).unwrap();
    };
    for _ in 0..10 {
        switch();
    }
    let region = Region::new(ALLOC);
    for _ in 0..10_000 {
        switch();
    }
    let c = region.change();
    let grown = c.bytes_allocated as isize - c.bytes_deallocated as isize;
    // Keeping the replaced config once a switch would be 20 000 entries each: 320 KB at least.
    assert!(
        grown < 16 * 1024,
        "20 000 switches between two configs kept {grown} bytes"
    );
    assert_eq!(breaker.config().failures(), Some(5));
    assert_eq!(family.config().failures(), Some(5));
}
