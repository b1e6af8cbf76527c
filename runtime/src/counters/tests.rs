//! The stripes' unit tests.

use super::*;

/// A stripe is not its first thread's for life. Round after round, two new threads
/// count on one set of stripes; each finds a stripe of its own (its owner of the round
/// before has exited), so no thread takes the shared path, and no count is lost in the
/// hand-over. Were stripes claimed for good, every thread from the second round on would
/// count on the shared path.
#[test]
fn new_threads_take_over_the_stripes_of_exited_ones() {
    const ROUNDS: u64 = 50;
    const EACH: u64 = 1_000;
    let (owner, counts, spill) = (AtomicU64::new(0), Counts::default(), Spill::default());
    for round in 0..ROUNDS {
        let both = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (owner, counts, spill, both) = (&owner, &counts, &spill, &both);
                    s.spawn(move || {
                        let slot = counts.add(owner, spill, Count::Success);
                        // Both alive at once, each with its stripe.
                        both.wait();
                        for _ in 1..EACH {
                            assert_eq!(counts.add(owner, spill, Count::Failure), slot);
                        }
                        slot
                    })
                })
                .collect();
            // Joined one by one: a scoped thread is only known to have run its
            // thread-local destructors (given its seat back) once joined.
            let slots: Vec<Slot> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            assert!(
                !slots.contains(&SHARED),
                "round {round}: a thread took the shared path: {slots:?}"
            );
            assert_ne!(slots[0], slots[1], "round {round}");
        });
    }
    let n = ROUNDS * 2;
    assert_eq!(counts.total(&spill, Count::Success), n);
    assert_eq!(counts.total(&spill, Count::Failure), n * (EACH - 1));
    let more = spill.0.get().expect("the second thread spilled");
    assert_eq!(
        more.shared[Count::Failure as usize].load(Ordering::Relaxed),
        0
    );
}

/// A thread keeps its seat's token, and so its stripes, for life; a seat given back goes
/// to the next thread with a new incarnation, so its old claims are dead to it too.
#[test]
fn a_seat_given_back_comes_back_with_a_new_incarnation() {
    let token = seats().take();
    assert_ne!(token, NONE);
    assert!(seats().alive(token));
    seats().give_back(token);
    assert!(!seats().alive(token));
    // Another test's thread may take the seat meanwhile; whoever gets it, not this token.
    let again = seats().take();
    assert_ne!(again, token);
    assert!(seats().alive(again));
    seats().give_back(again);
}

/// More threads than stripes: the first owns `counts`, later ones claim spill stripes or,
/// when their stripe is taken, fall back to the shared counts (until a thread that exits
/// leaves them its stripe). Every increment lands.
#[test]
fn twelve_threads_lose_no_count() {
    const THREADS: u64 = 12;
    const EACH: u64 = 100_000;
    let (owner, counts, spill) = (AtomicU64::new(0), Counts::default(), Spill::default());
    // All alive at once until the end: a thread that exits leaves its stripe to the next.
    let all = std::sync::Barrier::new(THREADS as usize);
    let slots: Vec<Slot> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (owner, counts, spill, all) = (&owner, &counts, &spill, &all);
                s.spawn(move || {
                    all.wait();
                    let mut slot = None;
                    for i in 0..EACH {
                        let kind = if (i + t) % 3 == 0 {
                            Count::Failure
                        } else {
                            Count::Success
                        };
                        let now = counts.add(owner, spill, kind);
                        // A thread's own slot never changes while it lives: the windows
                        // index words by it. (A thread on the shared path may get one.)
                        if now != SHARED {
                            assert_eq!(*slot.get_or_insert(now), now, "thread {t} moved");
                        }
                    }
                    all.wait();
                    slot.unwrap_or(SHARED)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    // No two threads share a slot of their own; the rest share the fallback.
    let mut own: Vec<Slot> = slots.iter().copied().filter(|&s| s != SHARED).collect();
    own.sort_unstable();
    let n = own.len();
    own.dedup();
    assert_eq!(own.len(), n, "two threads on one slot: {slots:?}");
    assert!(n >= 2, "{slots:?}");
    let failures: u64 = (0..THREADS)
        .map(|t| (0..EACH).filter(|i| (i + t) % 3 == 0).count() as u64)
        .sum();
    assert_eq!(counts.total(&spill, Count::Failure), failures);
    assert_eq!(
        counts.total(&spill, Count::Success),
        THREADS * EACH - failures
    );
    assert_eq!(counts.total(&spill, Count::Rejected), 0);
    let more = spill.0.get().expect("later threads spilled");
    assert!(
        more.shared[Count::Success as usize].load(Ordering::Relaxed) > 0,
        "some thread found its stripe taken"
    );
}
