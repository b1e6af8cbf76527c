//! Health probes under contention: ticks fired by one thread while others trip, reset and
//! call, with probes that pass, fail, panic and block. Afterwards every probe started is
//! accounted for exactly once, and every counted pass is exactly one `HealthProbe` move.

use breakerbox_runtime::{Breaker, Config, ManualClock, Reason};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn every_probe_is_counted_once_and_every_pass_is_one_move() {
    let clock = ManualClock::new();
    let n = Arc::new(AtomicU64::new(0));
    let counter = n.clone();
    let probe = move || match counter.fetch_add(1, Ordering::Relaxed) % 4 {
        0 => true,
        1 => false,
        2 => panic!("probe panics"),
        _ => {
            // Blocks its own thread a little (yields), sometimes past its tick.
            for _ in 0..50 {
                std::thread::yield_now();
            }
            true
        }
    };
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(3600))
        .probe_every(Duration::from_millis(1))
        .half_open_calls(1)
        .clock(clock.clone())
        .probe(probe)
        .build()
        .unwrap();
    let breaker = Breaker::new("probe-stress", config);
    let moves = Arc::new(Mutex::new(0u64));
    let seen = moves.clone();
    breaker.on_state_change(move |e| {
        if e.reason == Reason::HealthProbe {
            *seen.lock().unwrap() += 1;
        }
    });
    let done = Arc::new(AtomicBool::new(false));
    std::thread::scope(|s| {
        let ticker = {
            let (clock, done, breaker) = (clock.clone(), done.clone(), breaker.clone());
            s.spawn(move || {
                // At least 3000 ticks, and on until some probe has started: on a loaded
                // machine the callers may not have run (and tripped the breaker) by then. The
                // cap only turns a probe path that never starts into the failure below.
                for tick in 0..1_000_000u32 {
                    clock.advance(Duration::from_millis(1));
                    std::thread::yield_now();
                    if tick >= 3000 && breaker.health_probes().started > 0 {
                        break;
                    }
                }
                done.store(true, Ordering::SeqCst);
            })
        };
        for t in 0..2u64 {
            let (breaker, done) = (breaker.clone(), done.clone());
            s.spawn(move || {
                let mut i = t;
                while !done.load(Ordering::SeqCst) {
                    match i % 5 {
                        0 => breaker.trip_for(Duration::from_secs(60)),
                        1 => breaker.reset(),
                        _ => {
                            let _ = breaker.call(|| Err::<(), _>("down"));
                        }
                    }
                    i += 1;
                    std::thread::yield_now();
                }
            });
        }
        ticker.join().unwrap();
    });
    breaker.reset();
    let p = loop {
        let p = breaker.health_probes();
        if p.running == 0 {
            break p;
        }
        std::thread::yield_now();
    };
    assert!(p.started > 0, "{p:?}");
    assert_eq!(p.started, p.passed + p.failed + p.abandoned, "{p:?}");
    assert!(p.panicked + p.timed_out <= p.failed, "{p:?}");
    assert_eq!(
        p.started,
        n.load(Ordering::Relaxed),
        "each started probe ran once"
    );
    assert_eq!(p.passed, *moves.lock().unwrap(), "{p:?}");
}
