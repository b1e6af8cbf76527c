//! Keyed families under racing threads: eviction running while calls, permits and failures
//! cross it; every count adds up exactly, and no failing key is forgotten.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use breakerbox_runtime::{BreakerMap, Config, Error, ManualClock, Outcome, State, live_breakers};

use crate::support::{config, serial};

/// Threads call random keys of a space far larger than `max_keys` while eviction runs (on
/// their inserts and from a sweeping thread). Every call's outcome must be counted once: in a
/// live breaker, the overflow breaker, or the evicted totals. And once the family is dropped,
/// none of its breakers is left.
///
/// The sweeping thread also moves the clock, so that open keys half-open and close again; a
/// manual clock fires their timers on that thread. (On the system clock, the timer thread holds
/// a breaker it wakes for a moment, which may be just after the family's drop.)
#[test]
fn eviction_racing_calls_loses_and_doubles_no_count() {
    racing_calls_and_eviction(16, 200, |k| k);
}

/// The same in a family of hundreds of keys: the map grows (papaya moves its entries to a
/// larger table while lookups run) as the sweeps remove keys.
#[test]
fn eviction_racing_calls_in_a_family_of_hundreds_of_keys_loses_and_doubles_no_count() {
    racing_calls_and_eviction(256, 3_000, |k| k);
}

/// The same with `String` keys of two lengths, a third of them longer than 23 bytes (past
/// what a `String` of many small-string layouts keeps inline), so keys are compared through
/// their heap bytes while they are removed.
#[test]
fn eviction_racing_calls_in_a_family_of_hundreds_of_string_keys_loses_and_doubles_no_count() {
    racing_calls_and_eviction(256, 3_000, |k| {
        if k % 3 == 0 {
            format!("a-host-name-over-23-bytes-{k}.example")
        } else {
            format!("h-{k}")
        }
    });
}

/// `THREADS` threads call random keys below `keys` in a family of `max_keys` while another
/// sweeps and moves the clock; every outcome is counted once, and no breaker outlives the
/// family.
fn racing_calls_and_eviction<K>(max_keys: u32, keys: u64, key_of: fn(u64) -> K)
where
    K: std::hash::Hash + Eq + Clone + std::fmt::Display + Send + Sync + 'static,
{
    let _s = serial();
    let before = live_breakers();
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(3)
        .open_for(Duration::from_millis(1))
        .max_keys(max_keys)
        .clock(clock.clone())
        .build()
        .unwrap();
    let map: BreakerMap<K> = BreakerMap::new("race", config);
    const THREADS: u64 = 3;
    const CALLS: u64 = 20_000;
    let done = AtomicBool::new(false);
    let (ok_n, err_n, rej_n) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                clock.advance(Duration::from_micros(500));
                map.sweep();
                std::thread::yield_now();
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (map, ok_n, err_n, rej_n) = (&map, &ok_n, &err_n, &rej_n);
                s.spawn(move || {
                    let mut x = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for i in 0..CALLS {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let key = key_of(x % keys);
                        let r = if i % 4 == 0 {
                            // Through a permit, the path that holds an owned pin.
                            match map.try_acquire(&key) {
                                Ok(p) => {
                                    p.record(if i % 8 == 0 {
                                        Outcome::Failure
                                    } else {
                                        Outcome::Success
                                    });
                                    if i % 8 == 0 { 1 } else { 0 }
                                }
                                Err(_) => 2,
                            }
                        } else {
                            match map.call(&key, || if x % 5 == 0 { Err("e") } else { Ok(()) }) {
                                Ok(()) => 0,
                                Err(Error::Inner(_)) => 1,
                                Err(Error::Rejected(_)) => 2,
                            }
                        };
                        [ok_n, err_n, rej_n][r].fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    let (mut calls, mut oks, mut errs, mut rejs) = (0, 0, 0, 0);
    let mut add = |m: breakerbox_runtime::Metrics| {
        calls += m.calls;
        oks += m.successes;
        errs += m.failures;
        rejs += m.rejected;
    };
    map.for_each(|_, b| add(b.metrics()));
    if let Some(o) = map.overflow() {
        add(o.metrics());
    }
    let ev = map.evicted();
    assert!(ev.keys > 0, "no eviction ran");
    assert_eq!(calls + ev.calls, THREADS * CALLS);
    assert_eq!(oks + ev.successes, ok_n.load(Ordering::Relaxed));
    assert_eq!(errs + ev.failures, err_n.load(Ordering::Relaxed));
    assert_eq!(rejs + ev.rejected, rej_n.load(Ordering::Relaxed));
    drop(map);
    assert_eq!(live_breakers(), before);
}

/// Threads hold permits while their own and each other's calls insert keys and evict others
/// (pressure sweeps on a family far smaller than the key space), and fail some of them after
/// the key was evicted. Each failure opens its breaker for good (the clock stands still), so
/// once the threads are done the family must hold every failed key, open: the opening reached
/// the key's breaker whatever eviction did meanwhile. And every outcome is counted once.
///
/// Not right after the failure: a failure racing its key's eviction may be carried by the
/// evicting thread, which looks at the breaker's state after adding its listener (see
/// `keyed/mod.rs`), so the key may read closed until that thread has done so.
#[test]
fn failures_across_racing_evictions_always_reach_the_key() {
    let _s = serial();
    let before = live_breakers();
    let clock = ManualClock::new();
    let map: BreakerMap<u64> = BreakerMap::new("race-carry", config(&clock, 64, 3_600));
    const THREADS: u64 = 3;
    const ROUNDS: u64 = 2_000;
    let (ok_n, err_n, rej_n) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let across = AtomicU64::new(0);
    let failed = std::sync::Mutex::new(Vec::new());
    // At most this many failures, so the open keys (never evicted) leave room for the others.
    let budget = AtomicU64::new(40);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (map, ok_n, err_n, rej_n) = (&map, &ok_n, &err_n, &rej_n);
            let (across, failed, budget) = (&across, &failed, &budget);
            s.spawn(move || {
                let mut x = (t + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                for _ in 0..ROUNDS {
                    let key = next() % 400;
                    let permit = match map.try_acquire(&key) {
                        Ok(p) => p,
                        Err(_) => {
                            rej_n.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    };
                    // Other keys meanwhile: inserts that sweep and evict.
                    for _ in 0..8 {
                        let other = next() % 400;
                        match map.call(&other, || Ok::<_, &str>(())) {
                            Ok(()) => ok_n.fetch_add(1, Ordering::Relaxed),
                            Err(_) => rej_n.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    // A permit of the overflow breaker (the family full, a key not held) opens
                    // that breaker, not the key's.
                    let shared = map.overflow().is_some_and(|o| o.ptr_eq(permit.breaker()));
                    let moved =
                        !shared && !map.get(&key).is_some_and(|b| b.ptr_eq(permit.breaker()));
                    // Fail permits whose key was evicted, and a few others, while the budget lasts.
                    let fail = (moved || next() % 256 == 0)
                        && budget
                            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                                b.checked_sub(1)
                            })
                            .is_ok();
                    if fail {
                        across.fetch_add(u64::from(moved), Ordering::Relaxed);
                        permit.failure();
                        err_n.fetch_add(1, Ordering::Relaxed);
                        if !shared {
                            failed.lock().unwrap().push(key);
                        }
                    } else {
                        permit.success();
                        ok_n.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert!(
        across.load(Ordering::Relaxed) > 0,
        "no failure came after its key's eviction"
    );
    let failed = failed.into_inner().unwrap();
    assert!(!failed.is_empty(), "no key's own breaker failed");
    let forgotten: Vec<u64> = failed
        .into_iter()
        .filter(|key| !map.get(key).is_some_and(|b| b.state() == State::Open))
        .collect();
    assert_eq!(
        forgotten,
        Vec::<u64>::new(),
        "failing keys forgotten by eviction"
    );
    let (mut calls, mut oks, mut errs, mut rejs) = (0, 0, 0, 0);
    let mut add = |m: breakerbox_runtime::Metrics| {
        calls += m.calls;
        oks += m.successes;
        errs += m.failures;
        rejs += m.rejected;
    };
    map.for_each(|_, b| add(b.metrics()));
    if let Some(o) = map.overflow() {
        add(o.metrics());
    }
    let ev = map.evicted();
    assert!(ev.keys > 0, "no eviction ran");
    let (ok_n, err_n, rej_n) = (ok_n.into_inner(), err_n.into_inner(), rej_n.into_inner());
    assert_eq!(calls + ev.calls, ok_n + err_n + rej_n);
    assert_eq!(oks + ev.successes, ok_n);
    assert_eq!(errs + ev.failures, err_n);
    assert_eq!(rejs + ev.rejected, rej_n);
    drop(map);
    assert_eq!(live_breakers(), before);
}
