//! The windows' unit tests.

use super::*;
use core::time::Duration;

fn popcount(bits: &[AtomicU64]) -> u64 {
    bits.iter()
        .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
        .sum()
}

/// D01: clears racing records, successes and failures alike (a breaker's clears only
/// race successes, its failures being sealed out; this is the stronger claim). Once the
/// threads of a round are done, each total is exactly the bits it counts. A clear that
/// stores 0 in the totals leaves them short whenever it falls between a success's clearing
/// of its bit and its decrement. The recorders go on past the last clear of a round: a clear
/// after the last record would empty everything and hide a total gone wrong.
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

#[test]
fn totals_equal_the_bits_after_clears_race_records() {
    const ROUNDS: u64 = 20;
    const RECORDS: u64 = 200_000;
    let w = CallWindow::new(64);
    for round in 0..ROUNDS {
        let (cleared, recorded) = (AtomicBool::new(false), AtomicU64::new(0));
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let (w, cleared, recorded) = (&w, &cleared, &recorded);
                s.spawn(move || {
                    let mut i = 0u64;
                    // Until the clears are over, and a window's length after.
                    let mut after = 64;
                    while after > 0 {
                        w.record((i + t).is_multiple_of(2), i.is_multiple_of(3), 1);
                        i += 1;
                        if i == RECORDS {
                            recorded.fetch_add(1, Ordering::Relaxed);
                        }
                        if cleared.load(Ordering::Relaxed) {
                            after -= 1;
                        }
                    }
                });
            }
            s.spawn(|| {
                // For as long as both recorders record.
                while recorded.load(Ordering::Relaxed) < 2 {
                    w.clear();
                }
                cleared.store(true, Ordering::Relaxed);
            });
        });
        let totals = (
            w.failures.load(Ordering::Relaxed),
            w.slow.load(Ordering::Relaxed),
        );
        let bits = (popcount(&w.failed_bits), popcount(&w.slow_bits));
        assert_eq!(
            totals, bits,
            "round {round}: (failures, slow) totals vs bits"
        );
    }
    // And a full window of failures reads as all failures.
    w.clear();
    for _ in 0..64 {
        w.record(true, false, 1);
    }
    let t = w.tally();
    assert_eq!((t.calls, t.failures), (64, 64));
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
