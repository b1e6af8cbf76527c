//! Reloading an unchanged file into a live family keeps memory flat: a family keeps every
//! config it swaps in for its life, so a reload whose config is equal swaps nothing (a watch
//! on a file touched by a sync job, or a reload on a timer, would otherwise grow without
//! bound), as a single breaker's `reconfigure` skips an equal config. Measured with a counting
//! allocator, in bytes live, not in time, alone in a process of its own (`crate::alone`).
#![cfg(feature = "serde")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use breakerbox_runtime::{Config, registry};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

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
    let before = LIVE.load(Ordering::Relaxed);
    for _ in 0..2000 {
        registry().reload_toml_str("flat.toml", text).unwrap();
    }
    let grown = LIVE.load(Ordering::Relaxed) - before;
    // Each kept copy costs a config (hundreds of bytes): 2000 kept copies would be ~ 1 MB.
    assert!(
        grown < 64 * 1024,
        "2000 reloads of an unchanged file kept {grown} bytes"
    );
    assert_eq!(family.config().failures(), Some(5));
}
