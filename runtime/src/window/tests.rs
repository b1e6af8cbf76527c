//! The windows' unit tests.

use super::calls::CallWindow;
use super::gate::Tally;
use super::rate::RateWindow;
use super::time::{Bucket, TimeWindow};
use crate::clock::ClockRef;
use crate::config::Window;
use crate::counters::MORE;
use crate::state::stamp;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use core::time::Duration;

/// A bucket word's count stays in its low half, saturates, and reads as live for its epoch
/// and the nine after it, across the point where the 32-bit epoch wraps.
#[test]
fn a_bucket_counts_in_its_bits_and_lives_ten_epochs() {
    let b = Bucket::first(u32::MAX - 5);
    assert_eq!((b.epoch(), b.count()), (u32::MAX - 5, 1));
    assert_eq!(b.bumped().count(), 2);
    assert_eq!(b.bumped().epoch(), u32::MAX - 5);
    let full = Bucket(stamp(7, u64::from(u32::MAX)));
    assert!(full.is_full() && !b.is_full());
    assert_eq!(b.live_count(u32::MAX - 5), 1);
    assert_eq!(b.live_count(3), 1, "nine epochs on, past the wrap");
    assert_eq!(b.live_count(4), 0, "ten epochs on");
    assert_eq!(b.live_count(u32::MAX - 6), 0, "an epoch before it");
}

/// One thread: the window is exactly the last `n` calls since the last clear, whatever the
/// mix of successes, failures and slow calls and however long the runs of successes between
/// them (runs longer than the ring, and ones ending inside a word, at a word's edge, or
/// wrapping the ring).
#[test]
fn a_count_window_is_exactly_the_last_n_calls() {
    for n in [1u32, 5, 63, 64, 65, 100, 130] {
        let w = CallWindow::new(n);
        let mut reference: std::collections::VecDeque<(bool, bool)> = Default::default();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut generation = 0;
        for i in 0..20_000u64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if rng.is_multiple_of(997) {
                generation += 1;
                w.clear(generation);
                reference.clear();
            }
            // Runs of successes of every length, then a failure or a slow call.
            let (failed, slow) = match rng % 7 {
                0 => (true, false),
                1 => (false, true),
                2 => (true, true),
                _ => (false, false),
            };
            if failed || slow {
                w.record(failed, slow);
            } else {
                w.success(0, generation);
            }
            reference.push_back((failed, slow));
            if reference.len() > n as usize {
                reference.pop_front();
            }
            if i.is_multiple_of(3) || rng.is_multiple_of(5) {
                let t = w.tally();
                let expected = Tally {
                    calls: reference.len() as u64,
                    failures: reference.iter().filter(|c| c.0).count() as u64,
                    slow: reference.iter().filter(|c| c.1).count() as u64,
                };
                assert_eq!(t, expected, "n = {n}, call {i}");
            }
        }
    }
}

/// Two threads recording on one window, each counting its successes in its own word, with
/// clears racing them: nothing panics or locks up, a tally never holds more failures than
/// calls, and once the threads are done a window's length of failures reads as all failures.
#[test]
fn a_count_window_recorded_by_two_threads_stays_within_its_calls() {
    const RECORDS: u64 = 100_000;
    let w = CallWindow::new(64);
    let generation = AtomicU32::new(0);
    let done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (w, generation, done) = (&w, &generation, &done);
            s.spawn(move || {
                for i in 0..RECORDS {
                    if (i + t).is_multiple_of(2) {
                        w.record(true, i.is_multiple_of(3));
                    } else {
                        w.success(t as usize, generation.load(Ordering::Relaxed));
                    }
                }
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        s.spawn(|| {
            while done.load(Ordering::Relaxed) < 2 {
                let t = w.tally();
                assert!(
                    t.failures <= t.calls && t.slow <= t.calls && t.calls <= 64,
                    "{t:?}"
                );
                let g = generation.fetch_add(1, Ordering::Relaxed) + 1;
                w.clear(g);
            }
        });
    });
    for _ in 0..64 {
        w.record(true, false);
    }
    let t = w.tally();
    assert_eq!((t.calls, t.failures, t.slow), (64, 64, 0));
}

/// Successes of a generation the window does not hold are not in it, whenever they land: a
/// stale one (admitted before the clear) and one of the window's own generation counted after
/// the window froze. A success that finds its word stamped with an older generation starts it
/// over, from any slot.
#[test]
fn a_count_window_holds_only_its_generations_successes() {
    for slot in [0, 1, MORE + 1] {
        let w = CallWindow::new(8);
        w.success(slot, 0);
        w.success(slot, 0);
        assert_eq!(w.tally().calls, 2, "slot {slot}");
        w.clear(3);
        w.success(slot, 0);
        assert_eq!(w.tally().calls, 0, "slot {slot}: a stale success");
        w.success(slot, 3);
        w.record(true, false);
        assert_eq!((w.tally().calls, w.tally().failures), (2, 1), "slot {slot}");
        w.freeze();
        w.success(slot, 3);
        assert_eq!(w.tally().calls, 2, "slot {slot}: frozen");
        w.clear(6);
        w.success(slot, 3);
        w.success(slot, 6);
        assert_eq!(
            w.tally(),
            Tally {
                calls: 1,
                failures: 0,
                slow: 0
            },
            "slot {slot}"
        );
    }
}

const SEC: u64 = 1_000_000_000;

/// A window's calls at `now`.
fn calls_at(w: &TimeWindow, now: u64) -> u64 {
    w.tally(now).calls
}

/// On a clock other than the system's (here a `ManualClock`), a success is dated by the
/// clock itself, exactly: it expires at its bucket's end plus the span, to the nanosecond,
/// from the first stripe's owner, a spill stripe's and a thread without a stripe alike.
#[test]
fn a_success_on_a_manual_clock_lands_in_its_exact_bucket() {
    for slot in [0, 1, MORE + 1] {
        let manual = std::sync::Arc::new(crate::ManualClock::new());
        let clock = ClockRef::Custom(manual.clone());
        let RateWindow::Time(w) = RateWindow::new(Window::Time(Duration::from_secs(10)), &clock)
        else {
            panic!("a time window")
        };
        manual.set(Duration::from_nanos(SEC - 1));
        w.record_success(clock.recent(), slot, || clock.coarse());
        manual.set(Duration::from_nanos(SEC));
        w.record_success(clock.recent(), slot, || clock.coarse());
        assert_eq!(
            calls_at(&w, 10 * SEC - 1),
            2,
            "slot {slot}: both in the window"
        );
        assert_eq!(
            calls_at(&w, 10 * SEC),
            1,
            "slot {slot}: the first bucket expired"
        );
        assert_eq!(
            calls_at(&w, 11 * SEC - 1),
            1,
            "slot {slot}: the second still in"
        );
        assert_eq!(calls_at(&w, 11 * SEC), 0, "slot {slot}: both expired");
    }
}

/// A success dated by a recent time that lags the clock never stamps a word with its older
/// epoch. Where the word for the lagging bucket already counts a newer epoch (calls made
/// since, here a failed one, in the same ring slot a window later), resetting it would erase
/// them and leave the failure without its call; the success is counted by the clock instead.
/// Where the word counts the lagging bucket itself, the success joins it, one bucket early.
#[test]
fn a_lagging_success_never_resets_a_newer_word() {
    for slot in [0, 1, MORE + 1] {
        let w = TimeWindow::new(Duration::from_secs(10));
        // A failed call at 20.5 s, in the ring slot of 10.5 s.
        w.record(true, false, 20 * SEC + SEC / 2, slot);
        // A success at 20.5 s whose recent time still says 10.5 s: a whole window behind.
        w.record_success(10 * SEC + SEC / 2, slot, || 20 * SEC + SEC / 2);
        let t = w.tally(20 * SEC + SEC / 2);
        assert_eq!(
            (t.calls, t.failures),
            (2, 1),
            "slot {slot}: the failed call kept"
        );

        // One bucket behind: 21.5 s read as 20.9 s, whose word this thread already wrote.
        w.record_success(20 * SEC + 9 * SEC / 10, slot, || 21 * SEC + SEC / 2);
        assert_eq!(
            calls_at(&w, 21 * SEC + SEC / 2),
            3,
            "slot {slot}: one bucket early"
        );
        assert_eq!(
            calls_at(&w, 30 * SEC),
            0,
            "slot {slot}: and expires with that bucket"
        );

        // One bucket behind, its word stale: dated by the clock, in 22.5 s's bucket.
        w.record_success(21 * SEC + SEC / 2, slot, || 22 * SEC + SEC / 2);
        w.record_success(21 * SEC + SEC / 2, slot, || 22 * SEC + SEC / 2);
        assert_eq!(calls_at(&w, 22 * SEC + SEC / 2), 5, "slot {slot}");
        assert_eq!(
            calls_at(&w, 31 * SEC + SEC / 2),
            2,
            "slot {slot}: in 22.x's bucket"
        );
        assert_eq!(calls_at(&w, 32 * SEC), 0, "slot {slot}: and no later");
    }
}
