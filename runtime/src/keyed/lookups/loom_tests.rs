//! The lookup cache's protocol under loom, with the family's map replaced by one key's slot in
//! loom atomics: a removal stores the slot empty (Release, as papaya's removal publishes),
//! then bumps the removal count (Release); a lookup through the map that finds the slot
//! empty inserts the key's next breaker. What is checked: once a removal is over (joined), no
//! lookup on any thread reaches the removed breaker, whatever it had cached and however its
//! lookups interleaved with the removal.

use super::*;
use crate::clock::ManualClock;
use crate::config::Config;
use crate::sync::AtomicUsize;
use loom::sync::Arc;
use loom::thread;

const KEY: u64 = 7;

/// A family of one key: `slot` is 0 when the key has no breaker, else the index + 1 of its
/// breaker in `breakers` (the first until removed, then the second).
struct Family {
    slot: AtomicUsize,
    breakers: [Breaker; 2],
    removals: AtomicU64,
    tick: AtomicU64,
    lookups: Lookups<u64>,
}

impl Map<u64> for Family {
    type Guard<'m> = ();

    fn guard(&self) {}

    fn find<'g, 'm: 'g, Q>(&'m self, _: &Q, _: &'g ()) -> (&'g Breaker, bool)
    where
        u64: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = u64> + ?Sized,
    {
        let mut at = self.slot.load(Ordering::Acquire);
        if at == 0 {
            at = match self
                .slot
                .compare_exchange(0, 2, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => 2,
                Err(now) => now,
            };
        }
        (&self.breakers[at - 1], true)
    }
}

impl Family {
    fn new() -> Arc<Family> {
        let breaker = || {
            let config = Config::builder()
                .clock(ManualClock::without_timers())
                .build()
                .unwrap();
            Breaker::new("loom-lookups", config)
        };
        Arc::new(Family {
            slot: AtomicUsize::new(1),
            breakers: [breaker(), breaker()],
            removals: AtomicU64::new(0),
            tick: AtomicU64::new(2),
            lookups: Lookups::new(),
        })
    }

    /// A call on the key: the breaker it went through.
    fn call(&self) -> Breaker {
        let stamps = Stamps {
            removals: &self.removals,
            tick: &self.tick,
        };
        let b = self.lookups.lookup(self, stamps, &KEY);
        b.call(|| Ok::<_, &str>(())).unwrap();
        Breaker::clone(&b)
    }

    /// An eviction of the key, as a sweep makes it: a new sweep period, the removal, the count.
    fn evict(&self) {
        self.tick.fetch_add(1, Ordering::Relaxed);
        self.slot.store(0, Ordering::Release);
        self.removals.fetch_add(1, Ordering::Release);
    }

    /// Calls the key until this thread's cache holds it (filed on its second miss), and checks
    /// that it does.
    fn cache(&self) {
        for _ in 0..3 {
            assert!(self.call().ptr_eq(&self.breakers[0]));
        }
    }
}

/// The thread that cached the key calls it while another evicts it, then once more after.
#[test]
fn a_cached_key_removed_meanwhile_is_not_reached_after_the_removal() {
    loom::model(|| {
        let family = Family::new();
        family.cache();
        let remover = {
            let family = family.clone();
            thread::spawn(move || family.evict())
        };
        // Before the removal or after it: either breaker.
        let _ = family.call();
        remover.join().unwrap();
        assert!(
            family.call().ptr_eq(&family.breakers[1]),
            "a call after the removal reached the removed breaker"
        );
    });
}

/// Another thread with the key cached calls it while this one evicts it; once it sees the
/// removal over, its next call reaches the key's new breaker.
#[test]
fn a_thread_that_sees_the_removal_over_leaves_the_removed_breaker() {
    loom::model(|| {
        let family = Family::new();
        let cached = Arc::new(crate::sync::AtomicBool::new(false));
        let removed = Arc::new(crate::sync::AtomicBool::new(false));
        let other = {
            let (family, cached, removed) = (family.clone(), cached.clone(), removed.clone());
            thread::spawn(move || {
                family.cache();
                cached.store(true, Ordering::Release);
                let _ = family.call();
                if removed.load(Ordering::Acquire) {
                    assert!(
                        family.call().ptr_eq(&family.breakers[1]),
                        "a call after the removal reached the removed breaker"
                    );
                }
            })
        };
        while !cached.load(Ordering::Acquire) {
            thread::yield_now();
        }
        family.evict();
        removed.store(true, Ordering::Release);
        other.join().unwrap();
    });
}
