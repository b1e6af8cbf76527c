//! Exact call counters that cost no atomic read-modify-write on the hot path.
//!
//! A `lock xadd` costs ~7 ns on the machines we measure on, more than the whole budget of a
//! closed-state call, and a shared counter line bounces between cores. So each thread claims a
//! stripe (a cache line) once, and from then on is its only writer: it adds with a plain load
//! and store. Readers sum the stripes. A thread that finds its stripes taken by others falls
//! back to shared counters with `fetch_add`: slower, never wrong.

use crate::sync::{AtomicU64, Ordering};
use once_cell::race::OnceBox;

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
pub(crate) const MORE: usize = 4;

/// Where a thread's counts went: `0` for the first stripe, `1..=MORE` for a spill stripe,
/// [`SHARED`] for the shared fallback. A thread's slot never changes once it has one of its
/// own, and no other thread has it, so other per-thread structures (the time window's call
/// counts) can be indexed by it and written by their one writer without atomics.
pub(crate) type Slot = usize;
/// The slot of a thread with no stripe of its own.
pub(crate) const SHARED: Slot = MORE + 1;

/// The first thread's counts. The breaker puts them at the start of a cache line that other
/// threads touch only on state transitions. Their owner id lives elsewhere (on the breaker's read-mostly
/// first line): other threads check it on every call, and reading it from the line the owner
/// writes on every call would pull that line back and forth between cores.
#[derive(Default)]
pub(crate) struct Counts([AtomicU64; KINDS]);

/// A later thread's counts with their owner: only that thread reads and writes the line.
#[repr(align(64))]
#[derive(Default)]
struct Stripe {
    /// The thread that writes this stripe (0: none yet). Set once, never cleared.
    // Under loom every count is a plain `fetch_add`: stripes have no owner to check.
    #[cfg_attr(loom, allow(dead_code))]
    owner: AtomicU64,
    n: [AtomicU64; KINDS],
}

/// The stripes of the threads after the first, allocated when the second thread arrives.
/// Kept apart from the first stripe so that reading it never touches the first thread's line.
#[derive(Default)]
pub(crate) struct Spill(OnceBox<More>);

/// What a breaker used by more than one thread needs; allocated when the second one arrives.
#[derive(Default)]
struct More {
    stripes: [Stripe; MORE],
    shared: [AtomicU64; KINDS],
}

// This thread's id, or `UNASSIGNED` before `thread_id` first runs on it.
#[cfg(not(loom))]
std::thread_local!(static ID: std::cell::Cell<u64> = const { std::cell::Cell::new(UNASSIGNED) });

/// No thread's id, and no stripe's owner (0 is a free stripe's): a thread yet to get an id
/// finds no stripe its own and takes the slow path, which assigns one.
#[cfg(not(loom))]
const UNASSIGNED: u64 = u64::MAX;

/// This thread's id as it stands, without assigning one: a thread-local load.
#[cfg(not(loom))]
#[inline(always)]
fn current_id() -> u64 {
    ID.with(std::cell::Cell::get)
}

/// This thread's id, assigned on first use: nonzero, and never `UNASSIGNED`.
#[cfg(not(loom))]
fn thread_id() -> u64 {
    use std::sync::atomic::AtomicU64 as StdU64;
    static NEXT: StdU64 = StdU64::new(1);
    ID.with(|id| match id.get() {
        UNASSIGNED => {
            let new = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            id.set(new);
            new
        }
        n => n,
    })
}

/// Adds one to a count only this thread writes.
#[cfg(not(loom))]
#[inline(always)]
fn bump(c: &AtomicU64) {
    // Single writer: a load and a store cannot lose an increment, and a 64-bit store is never
    // torn for readers.
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Adds one to `counts[kind]` if this thread owns (or can claim) them.
#[cfg(not(loom))]
#[inline]
fn try_add(owner: &AtomicU64, counts: &[AtomicU64; KINDS], me: u64, kind: Count) -> bool {
    // Relaxed: the owner id only decides who writes; the counts carry no other data.
    let who = owner.load(Ordering::Relaxed);
    if who == me
        || (who == 0
            && owner
                .compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok())
    {
        bump(&counts[kind as usize]);
        true
    } else {
        false
    }
}

impl Counts {
    /// Counts one `kind`: here if this thread is `owner` (or claims it now), else in `spill`.
    ///
    /// A thread that owns a stripe, here or in the spill, counts inline: a thread-local load,
    /// an owner compare and a plain increment (a second thread's stripe is one pointer
    /// further). Assigning an id, claiming a stripe and the shared fallback are a call, so
    /// that what is inlined into every call site stays small.
    ///
    /// Returns this thread's [`Slot`].
    #[inline(always)]
    pub(crate) fn add(&self, owner: &AtomicU64, spill: &Spill, kind: Count) -> Slot {
        #[cfg(not(loom))]
        {
            let me = current_id();
            // Relaxed: the owner id only decides who writes; the counts carry no other data.
            if owner.load(Ordering::Relaxed) == me {
                bump(&self.0[kind as usize]);
                return 0;
            }
            if let Some(more) = spill.0.get() {
                let i = (me as usize) % MORE;
                let stripe = &more.stripes[i];
                if stripe.owner.load(Ordering::Relaxed) == me {
                    bump(&stripe.n[kind as usize]);
                    return 1 + i;
                }
            }
            self.add_other(owner, spill, kind)
        }
        #[cfg(loom)]
        {
            // Under loom no thread owns a stripe: every count is a `fetch_add`.
            let _ = (owner, spill);
            self.0[kind as usize].fetch_add(1, Ordering::Relaxed);
            SHARED
        }
    }

    /// `add` for a thread that does not own these counts yet, or never will.
    #[cfg(not(loom))]
    #[inline(never)]
    fn add_other(&self, owner: &AtomicU64, spill: &Spill, kind: Count) -> Slot {
        let me = thread_id();
        if try_add(owner, &self.0, me, kind) {
            0
        } else {
            spill.add(me, kind)
        }
    }

    /// The total of `kind` over these counts and `spill`.
    pub(crate) fn total(&self, spill: &Spill, kind: Count) -> u64 {
        let k = kind as usize;
        let mut sum = self.0[k].load(Ordering::Relaxed);
        if let Some(more) = spill.0.get() {
            sum += more.shared[k].load(Ordering::Relaxed);
            sum += more
                .stripes
                .iter()
                .map(|s| s.n[k].load(Ordering::Relaxed))
                .sum::<u64>();
        }
        sum
    }
}

impl Spill {
    #[cfg(not(loom))]
    #[inline]
    fn add(&self, me: u64, kind: Count) -> Slot {
        let more = match self.0.get() {
            Some(more) => more,
            None => self.init(),
        };
        let i = (me as usize) % MORE;
        let stripe = &more.stripes[i];
        if try_add(&stripe.owner, &stripe.n, me, kind) {
            1 + i
        } else {
            more.shared[kind as usize].fetch_add(1, Ordering::Relaxed);
            SHARED
        }
    }

    #[cfg(not(loom))]
    #[cold]
    fn init(&self) -> &More {
        self.0.get_or_init(Box::default)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// More threads than stripes: the first owns `counts`, later ones claim spill stripes or,
    /// when their stripe is taken, fall back to the shared counts. Every increment lands.
    #[test]
    fn twelve_threads_lose_no_count() {
        const THREADS: u64 = 12;
        const EACH: u64 = 100_000;
        let (owner, counts, spill) = (AtomicU64::new(0), Counts::default(), Spill::default());
        let slots: Vec<Slot> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (owner, counts, spill) = (&owner, &counts, &spill);
                    s.spawn(move || {
                        let mut slot = None;
                        for i in 0..EACH {
                            let kind = if (i + t) % 3 == 0 {
                                Count::Failure
                            } else {
                                Count::Success
                            };
                            let now = counts.add(owner, spill, kind);
                            // A thread's slot never changes: the windows index words by it.
                            assert_eq!(*slot.get_or_insert(now), now, "thread {t} moved");
                        }
                        slot.unwrap()
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
}
