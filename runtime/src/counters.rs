//! Exact call counters that cost no atomic read-modify-write on the hot path.
//!
//! A `lock xadd` costs ~7 ns on the machines we measure on, more than the whole budget of a
//! closed-state call, and a shared counter line bounces between cores. So each thread claims a
//! stripe (a cache line) once, and from then on is its only writer: it adds with a plain load
//! and store. Readers sum the stripes. A thread that finds its stripes taken by others falls
//! back to shared counters with `fetch_add`: slower, never wrong.

use crate::sync::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// What is counted.
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub(crate) enum Count {
    Success = 0,
    Failure = 1,
    Ignored = 2,
    Rejected = 3,
    Slow = 4,
}
const KINDS: usize = 5;
/// Extra stripes, allocated when a second thread first records on a breaker.
const MORE: usize = 4;

#[repr(align(64))]
#[derive(Default)]
struct Stripe {
    /// The thread that writes this stripe (0: none yet). Set once, never cleared.
    owner: AtomicU64,
    n: [AtomicU64; KINDS],
}

#[derive(Default)]
pub(crate) struct Counters {
    first: Stripe,
    more: OnceLock<Box<[Stripe; MORE]>>,
    shared: [AtomicU64; KINDS],
}

/// A per-thread id, nonzero once assigned.
#[cfg(not(loom))]
#[inline]
fn thread_id() -> u64 {
    use std::cell::Cell;
    use std::sync::atomic::AtomicU64 as StdU64;
    static NEXT: StdU64 = StdU64::new(1);
    thread_local!(static ID: Cell<u64> = const { Cell::new(0) });
    ID.with(|id| match id.get() {
        0 => {
            let new = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            id.set(new);
            new
        }
        n => n,
    })
}

impl Stripe {
    /// Adds one if this thread owns (or can claim) the stripe.
    #[cfg(not(loom))]
    #[inline]
    fn try_add(&self, me: u64, kind: Count) -> bool {
        // Relaxed: the owner id only decides who writes; the counts carry no other data.
        let owner = self.owner.load(Ordering::Relaxed);
        if owner == me
            || (owner == 0
                && self
                    .owner
                    .compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok())
        {
            let c = &self.n[kind as usize];
            // Single writer: a load and a store cannot lose an increment, and a 64-bit store
            // is never torn for readers.
            c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            true
        } else {
            false
        }
    }
}

impl Counters {
    #[inline]
    pub(crate) fn add(&self, kind: Count) {
        #[cfg(not(loom))]
        {
            let me = thread_id();
            if self.first.try_add(me, kind) {
                return;
            }
            self.add_slow(me, kind);
        }
        #[cfg(loom)]
        self.shared[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    #[cfg(not(loom))]
    #[cold]
    fn add_slow(&self, me: u64, kind: Count) {
        let more = self.more.get_or_init(Box::default);
        if !more[(me as usize) % MORE].try_add(me, kind) {
            self.shared[kind as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self, kind: Count) -> u64 {
        let k = kind as usize;
        let mut sum =
            self.first.n[k].load(Ordering::Relaxed) + self.shared[k].load(Ordering::Relaxed);
        if let Some(more) = self.more.get() {
            sum += more
                .iter()
                .map(|s| s.n[k].load(Ordering::Relaxed))
                .sum::<u64>();
        }
        sum
    }
}
