//! The handles of `Breaker::new` breakers (`Clone`/`Drop`, weak handles, the last handle
//! freeing the breaker) and the permits that hold a handle or borrow one, on a `ManualClock`.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use breakerbox_runtime::__integrations::lease;
use breakerbox_runtime::{
    Breaker, Clock, Config, ConfigBuilder, ManualClock, Outcome, RejectReason, State,
};

/// A manual clock that also says whether the breaker owning it is still alive: the breaker's
/// config holds the only clock, so the token's count drops back to one exactly when the
/// breaker is freed.
struct TokenClock {
    clock: ManualClock,
    _token: Arc<()>,
}

impl Clock for TokenClock {
    fn now(&self) -> Duration {
        self.clock.now()
    }
}

/// A breaker whose life is visible through the returned token.
fn tracked(builder: ConfigBuilder) -> (Breaker, ManualClock, Arc<()>) {
    let clock = ManualClock::new();
    let token = Arc::new(());
    let config = builder
        .clock(TokenClock {
            clock: clock.clone(),
            _token: token.clone(),
        })
        .build()
        .expect("valid config");
    (Breaker::new("handles", config), clock, token)
}

fn alive(token: &Arc<()>) -> bool {
    Arc::strong_count(token) > 1
}

#[test]
fn the_last_handle_frees_the_breaker_and_no_earlier_one() {
    let (b, _, token) = tracked(Config::builder().failures(1));
    let handles: Vec<Breaker> = (0..64).map(|_| b.clone()).collect();
    drop(b);
    // Drop from both ends towards the middle: the order of the handles does not matter.
    let (mut front, mut back): (Vec<_>, Vec<_>) = handles
        .into_iter()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    while let Some((_, h)) = front.pop() {
        assert!(alive(&token), "freed with handles left");
        assert_eq!(h.state(), State::Closed);
        drop(h);
        if let Some((_, h)) = back.pop() {
            assert!(alive(&token), "freed with handles left");
            drop(h);
        }
    }
    assert!(!alive(&token), "the last handle did not free the breaker");
}

#[test]
fn every_clone_shares_one_breaker() {
    let (b, _, token) = tracked(Config::builder().failures(2));
    let c = b.clone();
    b.try_acquire().expect("admitted").failure();
    c.try_acquire().expect("admitted").failure();
    assert_eq!(
        b.state(),
        State::Open,
        "the two failures went to one breaker"
    );
    let d = c.clone();
    drop((b, c));
    assert_eq!(d.metrics().failures, 2);
    drop(d);
    assert!(!alive(&token));
}

#[test]
fn handles_cloned_and_dropped_on_many_threads() {
    let (b, _, token) = tracked(Config::builder().failures(1_000_000));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let mine = b.clone();
            thread::spawn(move || {
                for _ in 0..500 {
                    let h = mine.clone();
                    h.try_acquire().expect("admitted").success();
                    drop(h);
                }
                // The worker's own handle is dropped here, maybe after the main thread's.
            })
        })
        .collect();
    drop(b);
    for w in workers {
        w.join().expect("worker");
    }
    assert!(
        !alive(&token),
        "the last of the threads' handles did not free the breaker"
    );
}

#[test]
fn an_owned_permit_keeps_the_breaker_alive_until_it_records() {
    let (b, _, token) = tracked(Config::builder().failures(1));
    let permit = b.try_acquire_owned().expect("admitted");
    drop(b);
    assert!(alive(&token), "freed under an owned permit");
    assert_eq!(permit.breaker().state(), State::Closed);
    let watcher = permit.breaker().clone();
    permit.record(Outcome::Failure);
    assert_eq!(
        watcher.state(),
        State::Open,
        "the permit recorded into the live breaker"
    );
    drop(watcher);
    assert!(!alive(&token));
}

#[test]
fn an_owned_permit_dropped_without_a_verdict_frees_the_breaker() {
    let (b, _, token) = tracked(Config::builder().failures(1).max_concurrent(1));
    let permit = b.try_acquire_owned().expect("admitted");
    assert_eq!(
        b.try_acquire().map(drop).unwrap_err().reason(),
        RejectReason::BulkheadFull
    );
    drop(permit); // a cancelled call: ignored, and its place is free again
    let m = b.metrics();
    assert_eq!((m.calls, m.ignored, m.failures), (2, 1, 0));
    let last = b.try_acquire_owned().expect("the place was given back");
    drop(b);
    assert!(alive(&token));
    drop(last);
    assert!(!alive(&token), "the owned permit held the last handle");
}

#[test]
fn owned_permits_move_to_other_threads_and_record_there() {
    let (b, _, token) = tracked(Config::builder().failures(1_000_000).max_concurrent(8));
    let permits: Vec<_> = (0..8)
        .map(|_| b.try_acquire_owned().expect("admitted"))
        .collect();
    assert_eq!(
        b.try_acquire().map(drop).unwrap_err().reason(),
        RejectReason::BulkheadFull
    );
    let watcher = b.clone();
    drop(b);
    let workers: Vec<_> = permits
        .into_iter()
        .enumerate()
        .map(|(i, p)| {
            thread::spawn(move || {
                p.record(if i % 2 == 0 {
                    Outcome::Success
                } else {
                    Outcome::Failure
                });
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let m = watcher.metrics();
    assert_eq!((m.calls, m.successes, m.failures, m.rejected), (9, 4, 4, 1));
    let again: Vec<_> = (0..8)
        .map(|_| watcher.try_acquire().expect("every place was given back"))
        .collect();
    drop(again);
    drop(watcher);
    assert!(!alive(&token));
}

#[test]
fn borrowed_permits_give_their_places_back_across_a_trip_and_recovery() {
    let (b, clock, token) = tracked(
        Config::builder()
            .failures(1)
            .max_concurrent(2)
            .open_for(Duration::from_secs(1)),
    );
    let p1 = b.try_acquire().expect("admitted");
    let p2 = b.try_acquire().expect("admitted");
    p1.failure();
    assert_eq!(b.state(), State::Open);
    drop(p2); // admitted before the trip: its result does not count against the new state
    clock.advance(Duration::from_secs(1));
    b.try_acquire().expect("the probe").success();
    assert_eq!(b.state(), State::Closed);
    let a = b.try_acquire().expect("both places are free again");
    let c = b.try_acquire().expect("both places are free again");
    a.success();
    c.success();
    drop(b);
    assert!(!alive(&token));
}

/// The tower layer's permit (`__integrations::lease`): it holds no handle, yet keeps a
/// `Breaker::new` breaker alive after the last handle, as a rejection does, and what it
/// records goes to the live breaker (its listener sees the opening), which it then frees.
#[test]
fn a_lease_keeps_the_breaker_alive_until_it_records() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (b, _, token) = tracked(Config::builder().failures(1));
    let opened = Arc::new(AtomicBool::new(false));
    let seen = opened.clone();
    b.on_state_change(move |e| seen.store(e.to == State::Open, Ordering::SeqCst));
    let lease = lease(&b).expect("admitted");
    drop(b);
    assert!(alive(&token), "freed under a lease");
    lease.record(Outcome::Failure);
    assert!(
        opened.load(Ordering::SeqCst),
        "recorded into the live breaker"
    );
    assert!(!alive(&token), "the lease's end did not free the breaker");
}

/// Leases made on one thread and ended on others, the last handle dropped in between: the
/// breaker lives until the last lease ends, each lease counted once (the outcomes add up).
#[test]
fn leases_ended_on_other_threads_free_the_breaker_after_the_last() {
    let (b, _, token) = tracked(Config::builder().failures(1_000_000));
    // One call first, so that this thread counts on a line of its own.
    b.try_acquire().expect("admitted").success();
    let leases: Vec<_> = (0..8).map(|_| lease(&b).expect("admitted")).collect();
    let watcher = b.downgrade();
    drop(b);
    let ends: Vec<_> = leases
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            thread::spawn(move || {
                if i % 2 == 0 {
                    l.record(Outcome::Success);
                } else {
                    drop(l); // a cancelled call: ignored
                }
            })
        })
        .collect();
    assert!(watcher.upgrade().is_none(), "a lease is not a handle");
    for e in ends {
        e.join().expect("a lease's end");
    }
    assert!(!alive(&token), "the last lease did not free the breaker");
}

/// Leases and rejections alive together after the last handle, ended in turns: the breaker is
/// freed by the last of them, not before.
#[test]
fn leases_and_rejections_free_the_breaker_after_the_last_of_them() {
    let (b, _, token) = tracked(Config::builder().failures(1));
    let first = lease(&b).expect("admitted");
    let second = lease(&b).expect("admitted");
    first.record(Outcome::Failure);
    assert_eq!(b.state(), State::Open);
    let rejected = lease(&b).expect_err("open");
    drop(b);
    assert!(alive(&token));
    drop(rejected);
    assert!(alive(&token), "freed with a lease left");
    second.record(Outcome::Success);
    assert!(!alive(&token));
}

/// A lease whose recording panics (the user's clock, read to date the opening) still ends:
/// the breaker is freed when its last handle goes.
#[test]
fn a_lease_whose_recording_panics_still_frees_the_breaker() {
    use std::sync::atomic::{AtomicBool, Ordering};
    struct Panicking {
        armed: Arc<AtomicBool>,
        _token: Arc<()>,
    }
    impl Clock for Panicking {
        fn now(&self) -> Duration {
            assert!(!self.armed.load(Ordering::SeqCst), "the clock panicked");
            Duration::ZERO
        }
    }
    let (armed, token) = (Arc::new(AtomicBool::new(false)), Arc::new(()));
    let config = Config::builder()
        .failures(1)
        .clock(Panicking {
            armed: armed.clone(),
            _token: token.clone(),
        })
        .build()
        .expect("valid config");
    let b = Breaker::new("handles", config);
    let l = lease(&b).expect("admitted");
    armed.store(true, Ordering::SeqCst);
    let recorded =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| l.record(Outcome::Failure)));
    assert!(recorded.is_err(), "the clock's panic reaches the recorder");
    armed.store(false, Ordering::SeqCst);
    assert!(alive(&token));
    drop(b);
    assert!(!alive(&token), "the panicked lease kept the breaker");
}
