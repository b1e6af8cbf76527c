//! The hand-rolled handle count of `Breaker::new` breakers (`Clone`/`Drop`, and the
//! `Box::from_raw` of the last handle) and the permits that hold a handle or borrow one, on a
//! `ManualClock`. `scripts/test` also runs this binary under valgrind, which reports a
//! use-after-free, a double free or a leak that these assertions cannot see.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

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
