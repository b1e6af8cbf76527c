//! The count window: the last `n` calls as rings of bits.

use super::{Gate, Tally};
use crate::sync::{Atomic, AtomicU64, Ordering};

/// The last `n` calls as two rings of bits. Each call takes the next position with one
/// `fetch_add`; swapping a position's bit returns the bit it replaced, so the running totals
/// stay equal to the bits set even when two calls race for one position.
///
/// The one shared sequence is what makes the window exactly the last `n` calls, whichever
/// threads made them, and it is also what two threads on one breaker contend on (one atomic
/// read-modify-write per call). Handing positions out to threads a block at a time would
/// contend less, but is wrong: a block left part-filled by a thread that goes idle (or a task
/// that moves to another worker) leaves holes, and later blocks lap the ring over calls still
/// inside the window, so a failure could vanish from it.
pub(crate) struct CallWindow {
    /// See [`Gate`].
    pub(super) gate: Atomic<Gate>,
    size: u64,
    /// The next position, on a line of its own: every call reads the fields around it, and
    /// one thread's increment must not evict them from the other's cache.
    seq: Alone,
    pub(super) failed_bits: Box<[AtomicU64]>,
    pub(super) slow_bits: Box<[AtomicU64]>,
    pub(super) failures: AtomicU64,
    pub(super) slow: AtomicU64,
}

/// A word alone on its cache line.
#[repr(align(64))]
#[derive(Default)]
struct Alone(AtomicU64);

impl CallWindow {
    pub(super) fn new(n: u32) -> Self {
        let words = (n as usize).div_ceil(64);
        let ring = || (0..words).map(|_| AtomicU64::new(0)).collect();
        CallWindow {
            gate: Atomic::new(Gate::new(0)),
            size: u64::from(n),
            seq: Alone::default(),
            failed_bits: ring(),
            slow_bits: ring(),
            failures: AtomicU64::new(0),
            slow: AtomicU64::new(0),
        }
    }

    #[inline]
    pub(super) fn record(&self, failed: bool, slow: bool, min_calls: u32) -> bool {
        // Relaxed, but for the failure totals (see `tally`): the window is statistics; the
        // decision to trip is taken under the transition lock, which orders what matters.
        let seq = self.seq.0.fetch_add(1, Ordering::Relaxed);
        let pos = seq % self.size;
        let (word, mask) = ((pos / 64) as usize, 1u64 << (pos % 64));
        Self::put(&self.failed_bits[word], mask, failed, &self.failures);
        Self::put(&self.slow_bits[word], mask, slow, &self.slow);
        seq + 1 == u64::from(min_calls)
    }

    #[inline]
    fn put(bits: &AtomicU64, mask: u64, set: bool, total: &AtomicU64) {
        if set {
            if bits.fetch_or(mask, Ordering::Relaxed) & mask == 0 {
                // Release: see `tally`.
                total.fetch_add(1, Ordering::Release);
            }
        } else if bits.load(Ordering::Relaxed) & mask != 0
            && bits.fetch_and(!mask, Ordering::Relaxed) & mask != 0
        {
            total.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(super) fn tally(&self) -> Tally {
        // Failures and slow calls first, with Acquire: a failure is counted after its call
        // took its position, so the sequence read next includes the call of every failure
        // read here. Read the other way round, a judge held up between the two reads
        // (preempted, say) could see the failures of calls made meanwhile but not those calls,
        // and trip on a rate nobody had.
        let (failures, slow) = (
            self.failures.load(Ordering::Acquire),
            self.slow.load(Ordering::Acquire),
        );
        let calls = self.seq.0.load(Ordering::Relaxed).min(self.size);
        // A racing `put` may have moved a bit but not yet its total; clamp so a transient
        // wrap below zero never shows.
        let clamp = |n: u64| if n > self.size { 0 } else { n.min(calls) };
        Tally {
            calls,
            failures: clamp(failures),
            slow: clamp(slow),
        }
    }

    /// Empties the window. Called with the transition lock held, after `seal`: no failure is
    /// being recorded, but successes still may be, and a success clears its bit and then
    /// decrements the total in two steps. Storing 0 in the total between those two steps
    /// would leave it one short for good (wrapping below zero: with `failure_rate = 100` it
    /// would never trip again). So each word is swapped to 0 and the bits it held are taken
    /// off the total: a bit a racing success cleared first is not in the word any more, and
    /// its own decrement follows; a bit swapped out first is not there for the success to
    /// clear. Either way the total ends equal to the bits set.
    pub(super) fn clear(&self) {
        self.seq.0.store(0, Ordering::Relaxed);
        Self::empty(&self.failed_bits, &self.failures);
        Self::empty(&self.slow_bits, &self.slow);
    }

    fn empty(bits: &[AtomicU64], total: &AtomicU64) {
        let held: u64 = bits
            .iter()
            .map(|w| u64::from(w.swap(0, Ordering::Relaxed).count_ones()))
            .sum();
        if held != 0 {
            total.fetch_sub(held, Ordering::Relaxed);
        }
    }
}
