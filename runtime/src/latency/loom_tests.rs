//! The rolling view's protocol under loom: the first call of a slot marks it (a CAS on the
//! epoch, then a copy of the counts summed over the stripes) while another call of that slot
//! records in another stripe and a reader reads. (Under loom the histogram has 10 buckets: 0,
//! eight from 512 ns, one from 1024 ns.)

use super::*;
use loom::sync::Arc;

const S: u64 = 1_000_000_000;

#[test]
fn a_slot_turned_while_calls_race_counts_each_call_once() {
    loom::model(|| {
        let l = Arc::new(Latency::default());
        l.record(600, 5 * S);
        let other = {
            let l = l.clone();
            loom::thread::spawn(move || l.record_in(1, 700, 15 * S))
        };
        l.record(900, 15 * S);
        // A read while the slot may be turning: never more recent calls than calls.
        let mid = l.snapshot(15 * S);
        assert!(mid.recent_calls <= mid.calls && mid.calls >= 2, "{mid:?}");
        other.join().unwrap();
        let s = l.snapshot(15 * S);
        // The cumulative view is exact; the last minute holds both slots whole.
        assert_eq!((s.calls, s.recent_calls), (3, 3));
        // At 65 s the last minute starts at the 10–20 s slot's mark: the call that took the
        // mark is after it, the one that raced it on either side, the first call before it.
        let late = l.snapshot(65 * S);
        assert_eq!(late.calls, 3);
        assert!((1..=2).contains(&late.recent_calls), "{late:?}");
    });
}
