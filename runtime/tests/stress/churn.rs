//! Threads that come and go lose no count.

use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, ManualClock, Outcome, Window};

use crate::support::{Rng, Tally};

/// Calls `b` `calls` times with a mix of outcomes, counting what it did.
fn churn_calls(b: &Breaker, clock: Option<&ManualClock>, rng: &mut Rng, calls: u64) -> Tally {
    let mut t = Tally::default();
    for i in 0..calls {
        if let Some(clock) = clock
            && i.is_multiple_of(16)
        {
            clock.advance(Duration::from_millis(1));
        }
        let Ok(p) = b.try_acquire() else {
            t.rejected += 1;
            continue;
        };
        match rng.next() % 8 {
            0..=4 => t.record(p, Outcome::Success),
            5 | 6 => t.record(p, Outcome::Failure),
            _ => t.record(p, Outcome::Ignored),
        }
    }
    t
}

fn counted(b: &Breaker) -> Tally {
    let m = b.metrics();
    Tally {
        successes: m.successes,
        failures: m.failures,
        ignored: m.ignored,
        rejected: m.rejected,
    }
}

/// Threads that come and go. Round after round, new threads call one long-lived breaker
/// (counting in stripes that pass from exited threads to new ones) and a breaker of the round,
/// which is dropped while they still run: a thread's exit must not touch a breaker freed
/// before it. Every count of every breaker is exact.
#[test]
fn threads_that_come_and_go_lose_no_count() {
    const ROUNDS: u64 = 100;
    const THREADS: u64 = 3;
    const CALLS: u64 = 2_000;
    let clock = ManualClock::new();
    let build = |window: Window| {
        Config::builder()
            .failure_rate(30)
            .window(window)
            .min_calls(10)
            .open_for(Duration::from_millis(2))
            .clock(clock.clone())
            .build()
            .unwrap()
    };
    let b = Breaker::new(
        "stress.churn",
        build(Window::Time(Duration::from_millis(50))),
    );
    let mut want = Tally::default();
    for round in 0..ROUNDS {
        let rb = Breaker::new("stress.churn.round", build(Window::Calls(20)));
        let (used, dropped) = (
            std::sync::Barrier::new(THREADS as usize + 1),
            std::sync::Barrier::new(THREADS as usize + 1),
        );
        let tally = std::thread::scope(|s| {
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (b, rb, clock) = (&b, rb.clone(), &clock);
                    let (used, dropped) = (&used, &dropped);
                    s.spawn(move || {
                        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (round << 8 | t));
                        let advances = (t == 0).then_some(clock);
                        let mut mine = churn_calls(b, advances, &mut rng, CALLS / 2);
                        let on_round = churn_calls(&rb, None, &mut rng, CALLS / 4);
                        drop(rb);
                        used.wait();
                        // The round's breaker is freed now; this thread goes on, then exits.
                        dropped.wait();
                        mine = mine.add(churn_calls(b, advances, &mut rng, CALLS / 2));
                        (mine, on_round)
                    })
                })
                .collect();
            used.wait();
            assert_eq!(rb.metrics().calls, THREADS * (CALLS / 4), "round {round}");
            let rb_counted = counted(&rb);
            drop(rb);
            dropped.wait();
            let (mut all, mut on_round) = (Tally::default(), Tally::default());
            for t in threads {
                let (mine, r) = t.join().unwrap();
                all = all.add(mine);
                on_round = on_round.add(r);
            }
            assert_eq!(rb_counted, on_round, "round {round}: the round's breaker");
            all
        });
        want = want.add(tally);
        assert_eq!(counted(&b), want, "round {round}");
    }
    let m = b.metrics();
    assert_eq!(m.calls, ROUNDS * THREADS * CALLS);
    assert!(m.times_opened > 0 && m.rejected > 0, "{m:?}");
}
