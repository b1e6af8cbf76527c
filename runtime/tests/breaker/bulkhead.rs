//! Bulkhead places tied to the generation, under stress and resets.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use breakerbox_runtime::{Breaker, Config, ManualClock, Outcome, RejectReason, State};

use crate::calls::{S, clocked, fail, ok, rejected};
use crate::support::breaker;

#[test]
fn forgotten_permits_are_freed_by_reset() {
    let b = Breaker::new(
        "bulkhead",
        Config::builder().max_concurrent(3).build().unwrap(),
    );
    for _ in 0..3 {
        std::mem::forget(b.try_acquire().unwrap());
    }
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    b.reset();
    let held: Vec<_> = (0..3).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(held);
    ok(&b);
}

#[test]
fn old_generation_permits_recording_after_reset_free_no_new_place() {
    let b = Breaker::new(
        "bulkhead-old",
        Config::builder().max_concurrent(2).build().unwrap(),
    );
    let old: Vec<_> = (0..2).map(|_| b.try_acquire().unwrap()).collect();
    b.reset();
    let new: Vec<_> = (0..2).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    for (i, p) in old.into_iter().enumerate() {
        if i == 0 {
            p.success();
        } else {
            p.failure();
        }
    }
    assert_eq!(
        rejected(&b),
        RejectReason::BulkheadFull,
        "an old permit freed a place of the new generation"
    );
    let mut new = new.into_iter();
    new.next().unwrap().success();
    let p = b.try_acquire().unwrap();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop((p, new));
    // Places free again, exactly two.
    let two: Vec<_> = (0..2).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(two);
}

#[test]
fn old_permit_dropped_after_a_trip_and_close_frees_nothing() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "bulkhead-trip",
        clocked(&clock)
            .max_concurrent(2)
            .failures(1)
            .open_for(S)
            .build()
            .unwrap(),
    );
    let old = b.try_acquire().unwrap();
    fail(&b, "x"); // trips: a transition
    assert_eq!(b.state(), State::Open);
    clock.advance(S);
    ok(&b); // probe closes
    assert_eq!(b.state(), State::Closed);
    let new: Vec<_> = (0..2).map(|_| b.try_acquire().unwrap()).collect();
    drop(old); // ignored, stale
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(new);
}

#[test]
fn stress_max_concurrent_holds_exactly() {
    const MAX: u32 = 3;
    const THREADS: usize = 8;
    const ITERS: usize = 20_000;
    let b = Breaker::new(
        "bulkhead-stress",
        Config::builder().max_concurrent(MAX).build().unwrap(),
    );
    let in_flight = AtomicU32::new(0);
    let peak = AtomicU32::new(0);
    let admitted = AtomicU64::new(0);
    let refused = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (b, in_flight, peak, admitted, refused) =
                (&b, &in_flight, &peak, &admitted, &refused);
            s.spawn(move || {
                for i in 0..ITERS {
                    match b.try_acquire() {
                        Ok(p) => {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            std::hint::spin_loop();
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            admitted.fetch_add(1, Ordering::Relaxed);
                            match (t + i) % 3 {
                                0 => p.success(),
                                1 => p.ignore(),
                                _ => drop(p),
                            }
                        }
                        Err(r) => {
                            assert_eq!(r.reason(), RejectReason::BulkheadFull);
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    assert!(
        peak.load(Ordering::SeqCst) <= MAX,
        "peak {}",
        peak.load(Ordering::SeqCst)
    );
    let m = b.metrics();
    let (a, r) = (
        admitted.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
    );
    assert_eq!(a + r, (THREADS * ITERS) as u64);
    assert_eq!(m.successes + m.ignored, a);
    assert_eq!(m.rejected, r);
    assert_eq!(m.calls, (THREADS * ITERS) as u64);
    // Every place is back.
    let all: Vec<_> = (0..MAX).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(all);
}

#[test]
fn stress_with_resets_never_exceeds_max_per_generation_and_never_sticks() {
    const MAX: u32 = 2;
    let b = Breaker::new(
        "bulkhead-resets",
        Config::builder().max_concurrent(MAX).build().unwrap(),
    );
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(p) = b.try_acquire() {
                        if rand_bit() {
                            std::mem::forget(p);
                        } else {
                            p.success();
                        }
                    }
                }
            });
        }
        for _ in 0..2_000 {
            b.reset();
        }
        stop.store(true, Ordering::Relaxed);
    });
    b.reset();
    let all: Vec<_> = (0..MAX).map(|_| b.try_acquire().unwrap()).collect();
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(all);
}

fn rand_bit() -> bool {
    static X: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    let x = X.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 63 == 1
}

/// A permit leaked with `mem::forget` held its bulkhead place for good; a reset now frees it.
#[test]
fn a_reset_frees_the_place_of_a_forgotten_permit() {
    let (b, _) = breaker(Config::builder().max_concurrent(1));
    std::mem::forget(b.try_acquire().unwrap());
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    b.reset();
    let p = b.try_acquire().expect("the reset freed the leaked place");
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    p.success();
    b.try_acquire().unwrap().success();
}

/// A call parked for ever (a future polled once, holding its owned permit, never woken):
/// the same. Its late drop gives back nothing of the new generation's places.
#[test]
fn a_trip_frees_the_place_of_a_parked_call() {
    let (b, clock) = breaker(Config::builder().failures(1).open_for(S).max_concurrent(2));
    let permit = b.try_acquire_owned().unwrap();
    let mut parked = Box::pin(async move {
        std::future::pending::<()>().await;
        permit.record(Outcome::Success);
    });
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(parked.as_mut().poll(&mut cx).is_pending());
    b.try_acquire().unwrap().failure();
    clock.advance(S);
    b.try_acquire().unwrap().success(); // the probe closes it
    let (x, y) = (b.try_acquire().unwrap(), b.try_acquire().unwrap());
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    drop(parked); // a cancelled call of an older generation
    assert_eq!(rejected(&b), RejectReason::BulkheadFull);
    x.success();
    y.success();
}
