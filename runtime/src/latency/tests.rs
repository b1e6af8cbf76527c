use proptest::prelude::*;

use super::*;

/// The true `q`-quantile of `values`: the value of rank `ceil(q * n)` (at least 1) in sorted
/// order, the definition `quantile` reads bucket counts by.
fn reference(values: &[u64], q: f64) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn counts_of(values: &[u64]) -> Vec<u64> {
    let mut counts = vec![0; BUCKETS];
    for v in values {
        counts[bucket(*v)] += 1;
    }
    counts
}

#[test]
fn buckets_tile_the_durations_without_gaps() {
    assert_eq!(bounds(0), (0, 512));
    for i in 1..BUCKETS {
        assert_eq!(
            bounds(i).0,
            bounds(i - 1).1,
            "bucket {i} starts where {} ends",
            i - 1
        );
        let (lower, upper) = bounds(i);
        assert_eq!(bucket(lower), i);
        if upper != u64::MAX {
            assert_eq!(bucket(upper - 1), i);
            // At most an eighth of the lower bound wide.
            assert!((upper - lower) * 8 <= lower, "bucket {i}: {lower}..{upper}");
        }
    }
    assert_eq!(bounds(BUCKETS - 1).1, u64::MAX);
    assert_eq!(bucket(u64::MAX), BUCKETS - 1);
}

proptest! {
    #[test]
    fn a_percentile_lands_in_the_bucket_of_the_sorted_reference(
        values in prop::collection::vec(
            prop_oneof![0u64..2_000, 0u64..10_000_000, 0u64..(1 << 40)], 1..400),
        q in 0.0f64..=1.0,
    ) {
        let counts = counts_of(&values);
        let got = quantile(&counts, q).unwrap();
        let want = reference(&values, q);
        prop_assert_eq!(bucket(got), bucket(want), "q {} got {} want {}", q, got, want);
        // Within 1/16 of the true value above the first bucket and below the last.
        if (512..1 << 37).contains(&want) {
            let err = got.abs_diff(want) as f64 / want as f64;
            prop_assert!(err <= 1.0 / 16.0, "q {} got {} want {} err {}", q, got, want, err);
        }
    }
}

#[test]
fn the_quantiles_of_no_calls_or_a_bad_q_are_none() {
    let counts = vec![0; BUCKETS];
    assert_eq!(quantile(&counts, 0.5), None);
    let counts = counts_of(&[1_000]);
    assert_eq!(quantile(&counts, 1.5), None);
    assert_eq!(quantile(&counts, f64::NAN), None);
    assert_eq!(bucket(quantile(&counts, 0.0).unwrap()), bucket(1_000));
}

const S: u64 = 1_000_000_000;

#[test]
fn the_last_minute_forgets_calls_older_than_six_slots() {
    let l = Latency::default();
    // 100 calls of 1 ms at 5 s, 10 calls of 100 ms at 25 s.
    for _ in 0..100 {
        l.record(1_000_000, 5 * S);
    }
    for _ in 0..10 {
        l.record(100_000_000, 25 * S);
    }
    let at = |now| l.snapshot(now);
    let s = at(30 * S);
    assert_eq!((s.recent_calls, s.calls), (110, 110));
    assert_eq!(bucket(s.p50.unwrap().as_nanos() as u64), bucket(1_000_000));
    assert_eq!(
        bucket(s.p99.unwrap().as_nanos() as u64),
        bucket(100_000_000)
    );
    // At 59 s the first slot (0–10 s) is still one of the last six.
    assert_eq!(at(59 * S).recent_calls, 110);
    // At 60 s it is not: only the calls since the 20–30 s slot began remain.
    let s = at(60 * S);
    assert_eq!((s.recent_calls, s.calls), (10, 110));
    assert_eq!(
        bucket(s.p50.unwrap().as_nanos() as u64),
        bucket(100_000_000)
    );
    // At 80 s nothing of the last minute is left; the cumulative view keeps it all.
    let s = at(80 * S);
    assert_eq!((s.recent_calls, s.calls, s.p50), (0, 110, None));
    assert_eq!(
        s.sum,
        Duration::from_nanos(100 * 1_000_000 + 10 * 100_000_000)
    );
    let buckets: Vec<_> = s.buckets().collect();
    assert_eq!(buckets.len(), 2);
    assert_eq!(buckets[0].1, 100);
    assert!(buckets[0].0 > Duration::from_millis(1));
    assert_eq!(buckets[1].1, 10);
}

#[test]
fn a_call_after_a_quiet_minute_starts_the_view_again() {
    let l = Latency::default();
    l.record(2_000_000, S);
    // Nothing for two minutes, then one call: only it is recent.
    l.record(3_000, 125 * S);
    let s = l.snapshot(126 * S);
    assert_eq!((s.recent_calls, s.calls), (1, 2));
    assert_eq!(bucket(s.p99.unwrap().as_nanos() as u64), bucket(3_000));
}

#[test]
fn threads_recording_at_once_lose_no_call() {
    let l = std::sync::Arc::new(Latency::default());
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let l = l.clone();
            std::thread::spawn(move || {
                // Seated first, as a breaker's call seats its thread: the threads record in
                // the stripes of their seats.
                let seat = crate::counters::seat_now();
                for i in 0..50_000u64 {
                    // Every thread crosses slot edges as it goes.
                    l.record(1_000 + (i % 7) * 1_000_000, (i / 500) * S + t);
                }
                seat
            })
        })
        .collect();
    let mut stripes = std::collections::BTreeSet::from([0]);
    for t in threads {
        stripes.insert(t.join().unwrap().map_or(0, |seat| seat % STRIPES));
    }
    // The stripes of the threads' seats, and only those, were allocated.
    assert_eq!(l.stripes().count(), stripes.len());
    let s = l.snapshot(100 * S);
    assert_eq!(s.calls, 200_000);
    assert_eq!(s.buckets().map(|(_, n)| n).sum::<u64>(), 200_000);
    let per_thread: u64 = (0..50_000u64).map(|i| 1_000 + (i % 7) * 1_000_000).sum();
    assert_eq!(s.sum, Duration::from_nanos(4 * per_thread));
    // Threads cross slot edges at their own pace, so what falls in the last minute depends
    // on the interleaving; it is never more than was recorded.
    assert!(s.recent_calls <= s.calls, "{}", s.recent_calls);
}

#[test]
fn a_thread_records_in_its_seats_stripe_and_allocates_no_other() {
    let l = Latency::default();
    let seat = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let seat = crate::counters::seat_now().expect("a seat");
                l.record(2_000, S);
                l.record(3_000, S);
                seat
            })
            .join()
            .unwrap()
    });
    let own = seat % STRIPES;
    let expected = if own == 0 { 1 } else { 2 };
    assert_eq!(l.stripes().count(), expected, "seat {seat}");
    let counts: u64 = match own {
        0 => l
            .first
            .counts
            .0
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum(),
        i => l.more[i - 1]
            .get()
            .expect("its stripe")
            .counts
            .0
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum(),
    };
    assert_eq!(counts, 2);
    let s = l.snapshot(S);
    assert_eq!(
        (s.calls, s.recent_calls, s.sum),
        (2, 2, Duration::from_nanos(5_000))
    );
}

#[test]
fn a_thread_without_a_seat_records_in_the_first_stripe() {
    let l = Latency::default();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            assert_eq!(crate::counters::current_seat(), None);
            l.record(700, S);
        });
    });
    assert_eq!(l.stripes().count(), 1);
    assert_eq!(l.first.counts.0[bucket(700)].load(Ordering::Relaxed), 1);
    assert_eq!(l.snapshot(S).calls, 1);
}
