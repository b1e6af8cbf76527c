//! The stripe protocol under loom, with the slots in view.

use super::*;
use loom::sync::Arc;

type Shared = Arc<(AtomicU64, Counts, Spill)>;

fn shared() -> Shared {
    Arc::new((AtomicU64::new(0), Counts::default(), Spill::default()))
}

fn add(s: &Shared, kind: Count) -> Slot {
    s.1.add(&s.0, &s.2, kind)
}

/// The first thread owns the first stripe until it exits; then the next thread takes it
/// over, and finds the count the first one left there. (loom's `join` returns before the
/// joined thread's thread-locals are destroyed, std's after: wait for the seat.)
#[test]
fn the_first_stripe_passes_on_at_exit() {
    loom::model(|| {
        let s = shared();
        let first = {
            let s = s.clone();
            loom::thread::spawn(move || (add(&s, Count::Success), current_id()))
        };
        let (slot, token) = first.join().unwrap();
        assert_eq!(slot, 0);
        while seats().alive(token) {
            loom::thread::yield_now();
        }
        let next = {
            let s = s.clone();
            loom::thread::spawn(move || add(&s, Count::Success))
        };
        assert_eq!(
            next.join().unwrap(),
            0,
            "the exited thread's stripe was not taken over"
        );
        assert_eq!(s.1.total(&s.2, Count::Success), 2);
    });
}

/// Two threads at once: never one slot of their own for both; every count lands, with a
/// third thread taking over whichever stripe an exiting one leaves.
#[test]
fn live_threads_never_share_a_stripe() {
    loom::model(|| {
        let s = shared();
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                loom::thread::spawn(move || {
                    let a = add(&s, Count::Success);
                    let b = add(&s, Count::Failure);
                    if a != SHARED {
                        assert_eq!(a, b, "a thread's own slot moved");
                    }
                    b
                })
            })
            .collect();
        let slots: Vec<Slot> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        // Both ran, maybe one after the other (then the second may take the first's stripe
        // over); whatever happened, the counts are exact.
        let _ = slots;
        assert_eq!(s.1.total(&s.2, Count::Success), 2);
        assert_eq!(s.1.total(&s.2, Count::Failure), 2);
    });
}
