//! What journaling a rejected call costs: a rejection of an open breaker, plain and
//! journaled in memory; and journaled on local disk, where each call returns once its entry is
//! committed to its SQLite database, from 1 and from 16 threads (the calls of 16 threads
//! committed in groups, one sync for each); and in Redis (the fleet
//! journal, one script call per rejection), with `BREAKERBOX_TEST_REDIS_URL` set.
//!
//!   cargo bench -p breakerbox-benches --bench replay -- --warm-up-time 1 --measurement-time 5

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use breakerbox::replay::{Replay, ReplayConfig};
use breakerbox::{Breaker, Config};
use criterion::{Criterion, criterion_group, criterion_main};

/// What a call carries: an order id and a 100-byte body.
type Args = (u64, String);

fn args(n: u64) -> Args {
    (n, "x".repeat(100))
}

fn open_breaker(name: &str) -> Breaker {
    let breaker = Breaker::new(name, Config::default());
    breaker.force_open();
    breaker
}

fn memory(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let mut g = c.benchmark_group("replay_reject");
    let plain = open_breaker("replay.plain");
    g.bench_function("plain", |b| {
        b.iter_custom(|n| {
            let body = args(0);
            let start = Instant::now();
            for i in 0..n {
                let r = plain.call(|| Ok::<_, String>(black_box(&body).0 + i));
                black_box(r.is_err());
            }
            start.elapsed()
        })
    });
    let breaker = open_breaker("replay.memory");
    g.bench_function("memory", |b| {
        b.iter_custom(|n| {
            // A journal with room for every call of this run, made (and dropped) untimed.
            let config = ReplayConfig::new()
                .max_entries(n as usize + 1)
                .max_bytes(usize::MAX);
            let replay = Replay::builder(&breaker)
                .config(config)
                .memory(|_: Args| async { Ok::<(), String>(()) })
                .unwrap();
            let bodies: Vec<Args> = (0..n).map(args).collect();
            let start = Instant::now();
            for body in bodies {
                let r = replay.call(body, |a| Ok::<_, String>(a.0));
                black_box(r.is_err());
            }
            let took = start.elapsed();
            assert_eq!(replay.status().entries as u64, n);
            took
        })
    });
    g.finish();
}

fn disk(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let dir = std::env::temp_dir().join(format!("breakerbox-replay-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut g = c.benchmark_group("replay_reject_disk");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    for threads in [1u64, 16] {
        let breaker = open_breaker("replay.disk");
        // Counted across criterion's calls of the closure (warm-up, then each sample), so that
        // no two rounds share a file.
        let mut round = 0u32;
        g.bench_function(format!("disk_{threads}t"), |b| {
            b.iter_custom(|n| {
                // A journal of its own each round: the last round's may still be held open by
                // its replayer while it winds down, and a journal has one opener at a time.
                round += 1;
                let path = dir.join(format!("journal-{threads}t-{round}"));
                let config = ReplayConfig::new()
                    .max_entries(usize::MAX)
                    .max_bytes(usize::MAX);
                let (replay, _) = Replay::builder(&breaker)
                    .config(config)
                    .disk(&path, |_: Args| async { Ok::<(), String>(()) })
                    .unwrap();
                let replay = Arc::new(replay);
                let per_thread = n.div_ceil(threads);
                let start = Arc::new(Barrier::new(threads as usize + 1));
                let workers: Vec<_> = (0..threads)
                    .map(|t| {
                        let replay = replay.clone();
                        let start = start.clone();
                        std::thread::spawn(move || {
                            start.wait();
                            for i in 0..per_thread {
                                let r = replay.call(args(t << 32 | i), |a| Ok::<_, String>(a.0));
                                black_box(r.is_err());
                            }
                        })
                    })
                    .collect();
                start.wait();
                let began = Instant::now();
                for worker in workers {
                    worker.join().unwrap();
                }
                // Time per call, whatever the rounding up to whole threads added.
                began.elapsed() * n as u32 / (per_thread * threads) as u32
            })
        });
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Journaled in Redis (the fleet journal): one script call per rejection, on loopback. Needs a
/// server: `BREAKERBOX_TEST_REDIS_URL` (as `scripts/test` sets it); skipped without one.
fn redis(c: &mut Criterion) {
    let Ok(url) = std::env::var("BREAKERBOX_TEST_REDIS_URL") else {
        eprintln!("replay_reject_redis: skipped, BREAKERBOX_TEST_REDIS_URL is not set");
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();
    let mut g = c.benchmark_group("replay_reject_redis");
    g.sample_size(20);
    let breaker = open_breaker("replay.redis");
    let mut run = 0u64;
    g.bench_function("redis_1t", |b| {
        b.iter_custom(|n| {
            // A journal of its own each run (its own key prefix), made untimed.
            run += 1;
            let prefix = format!("breakerbox:bench:{}:{run}:", std::process::id());
            let config = ReplayConfig::new()
                .max_entries(usize::MAX)
                .max_bytes(usize::MAX);
            let replay = Replay::builder(&breaker)
                .config(config)
                .redis(
                    breakerbox::replay::RedisOptions::new(url.clone()).prefix(prefix),
                    |_: Args| async { Ok::<(), String>(()) },
                )
                .unwrap();
            let start = Instant::now();
            for i in 0..n {
                let r = replay.call(args(i), |a| Ok::<_, String>(a.0));
                black_box(r.is_err());
            }
            let took = start.elapsed();
            assert_eq!(replay.status().entries as u64, n, "every call journaled");
            took
        })
    });
    g.finish();
}

criterion_group!(benches, memory, disk, redis);
criterion_main!(benches);
