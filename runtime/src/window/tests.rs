//! The windows' unit tests.

use super::*;

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
