//! The count window: the last `n` calls, their failures and slow calls as rings of bits.

use super::gate::{Gate, Tally};
use super::time::Bucket;
use crate::counters::{MORE, Slot};
use crate::sync::{Atomic, AtomicBool, LazyBox, Mutex, Ordering, lock};

/// The last `n` calls of the breaker's closed state, counted by the window itself.
///
/// A call's place in the window is its number among the window's calls. Successes are
/// counted per thread, in a word stamped with the generation the call was admitted in (a
/// [`Bucket`] whose epoch is that generation): a thread with a counter stripe of its own
/// (counters.rs) writes its word with a plain load and store, on a cache line no other thread
/// writes; others share one word with a compare-and-swap. Failures and slow calls (rarer, and
/// each already a read-modify-write on the gate) are counted under the ring's lock, where they
/// mark their place in two rings of bits and clear the places of the successes counted since
/// the last one marked (`Ring::settle`).
///
/// The window holds exactly the calls it has counted since its last clear:
///
/// - A success's count and its generation are one word, so it belongs to one window whatever
///   a reset does meanwhile: the window sums only the words stamped with its generation. A
///   success admitted before a transition lands in a word no window reads. Only a thread's
///   first success of a generation (or a word four billion calls full) takes the ring's lock,
///   to restamp its word: under it, a success of a generation the window is not holding (a
///   stale one) writes nothing, so a stale success never overwrites a newer count.
/// - A failure enters the gate, which a transition seals before it freezes or clears the
///   window: a failure is counted in the window of its generation or refused.
/// - While the breaker is not closed the window holds the calls it had when it left the
///   closed state (`frozen`) until the next clear.
///
/// On one thread this is exactly the last `n` calls. With threads recording at once, a
/// failure's place is the number of calls the window had counted when it is marked, which
/// orders it among the calls counted by then; two failures that find the same number take
/// neighbouring places. The window is then the last `n` calls in that order, give or take the
/// places of successes being counted at that moment.
pub(crate) struct CallWindow {
    /// See [`Gate`].
    pub(super) gate: Atomic<Gate>,
    /// Whether the last judgment found fewer than `min_calls` calls (and from each clear until
    /// a judgment finds enough): while it is set every success is judged, since a success may
    /// bring the window to `min_calls`.
    short: AtomicBool,
    /// Successes of the threads without a stripe of their own.
    shared: Atomic<Bucket>,
    /// Successes of the threads with a spill stripe, allocated when one first records.
    more: LazyBox<[Line; MORE]>,
    /// Successes of the thread that owns the breaker's first counter stripe.
    first: Line,
    ring: Mutex<Ring>,
}

/// One thread's success word, alone on its cache line.
#[repr(align(64))]
#[derive(Default)]
struct Line(Atomic<Bucket>);

struct Ring {
    size: u64,
    /// The generation whose closed state the window holds: the success words stamped with it
    /// are in it.
    generation: u32,
    /// Successes of this generation taken out of full words (see `CallWindow::restamp`).
    folded: u64,
    /// Failures and slow calls counted since the clear.
    against: u64,
    /// While the breaker is not closed: the window's calls when it left the closed state
    /// (calls counted since, of a generation that has ended, are not in it).
    frozen: Option<u64>,
    /// Places below this are settled: a failure's or slow call's bit set, a success's cleared.
    top: u64,
    failed: Box<[u64]>,
    slow: Box<[u64]>,
}

impl Ring {
    fn bit(&self, place: u64) -> (usize, u64) {
        let at = place % self.size;
        ((at / 64) as usize, 1u64 << (at % 64))
    }

    /// Marks the places from `top` up to `to` as successes (they were counted as calls, and
    /// no failure took them), and moves `top` there.
    fn settle(&mut self, to: u64) {
        if to <= self.top {
            return;
        }
        if to - self.top >= self.size {
            self.failed.fill(0);
            self.slow.fill(0);
        } else {
            // A word at a time: from `top`'s position in the ring, `to - top` places on.
            let (mut at, mut left) = (self.top % self.size, to - self.top);
            while left > 0 {
                let bit = at % 64;
                let n = left.min(64 - bit).min(self.size - at);
                let mask = if n == 64 {
                    u64::MAX
                } else {
                    ((1u64 << n) - 1) << bit
                };
                let word = (at / 64) as usize;
                self.failed[word] &= !mask;
                self.slow[word] &= !mask;
                left -= n;
                at = (at + n) % self.size;
            }
        }
        self.top = to;
    }
}

impl CallWindow {
    pub(super) fn new(n: u32) -> Self {
        let words = (n as usize).div_ceil(64);
        CallWindow {
            gate: Atomic::new(Gate::new(0)),
            short: AtomicBool::new(true),
            shared: Atomic::new(Bucket::default()),
            more: LazyBox::default(),
            first: Line::default(),
            ring: Mutex::new(Ring {
                size: u64::from(n),
                generation: 0,
                folded: 0,
                against: 0,
                frozen: None,
                top: 0,
                failed: vec![0; words].into_boxed_slice(),
                slow: vec![0; words].into_boxed_slice(),
            }),
        }
    }

    /// The success word of `slot`, if that slot is one thread's alone.
    #[inline(always)]
    fn own(&self, slot: Slot) -> Option<&Atomic<Bucket>> {
        match slot {
            0 => Some(&self.first.0),
            1..=MORE => Some(&self.more.get_or_default()[slot - 1].0),
            _ => None,
        }
    }

    /// Counts a success admitted in `generation`, by the thread whose counter slot is `slot`.
    /// Returns whether to judge the rates (only while the window is short of `min_calls`).
    #[inline(always)]
    pub(super) fn success(&self, slot: Slot, generation: u32) -> bool {
        if slot == 0 {
            let word = &self.first.0;
            let cur = word.load(Ordering::Relaxed);
            if cur.epoch() == generation && !cur.is_full() {
                word.store(cur.bumped(), Ordering::Relaxed);
            } else {
                self.restamp(word, generation);
            }
        } else {
            self.success_other(slot, generation);
        }
        self.short.load(Ordering::Relaxed)
    }

    /// `success` by a thread other than the first stripe's owner.
    #[inline(never)]
    fn success_other(&self, slot: Slot, generation: u32) {
        let word = match self.own(slot) {
            Some(word) => {
                let cur = word.load(Ordering::Relaxed);
                if cur.epoch() == generation && !cur.is_full() {
                    word.store(cur.bumped(), Ordering::Relaxed);
                    return;
                }
                word
            }
            None => {
                let word = &self.shared;
                let mut cur = word.load(Ordering::Relaxed);
                while cur.epoch() == generation && !cur.is_full() {
                    match word.compare_exchange_weak(
                        cur,
                        cur.bumped(),
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return,
                        Err(actual) => cur = actual,
                    }
                }
                word
            }
        };
        self.restamp(word, generation);
    }

    /// A success whose word counts another generation, or is full: under the ring's lock, so
    /// that the window's generation cannot change meanwhile. A success of a generation the
    /// window does not hold (stale, or arriving after the window froze) writes nothing. One of
    /// the window's generation starts the word over for it (what it held counts for a window
    /// gone), or folds a full word's count into the ring.
    #[cold]
    #[inline(never)]
    fn restamp(&self, word: &Atomic<Bucket>, generation: u32) {
        let mut ring = lock(&self.ring);
        if generation != ring.generation || ring.frozen.is_some() {
            return;
        }
        // A compare-and-swap: the shared word has other writers (an owned word has none, and
        // then this always succeeds).
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            let (next, folded) = if cur.epoch() != generation {
                (Bucket::first(generation), 0)
            } else if cur.is_full() {
                (Bucket::first(generation), u64::from(cur.count()))
            } else {
                (cur.bumped(), 0)
            };
            match word.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    ring.folded += folded;
                    return;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// The window's calls since its clear.
    fn held(&self, ring: &Ring) -> u64 {
        if let Some(frozen) = ring.frozen {
            return frozen;
        }
        let count = |w: &Atomic<Bucket>| {
            let b = w.load(Ordering::Relaxed);
            if b.epoch() == ring.generation {
                u64::from(b.count())
            } else {
                0
            }
        };
        let mut calls = ring.folded + ring.against + count(&self.first.0) + count(&self.shared);
        if let Some(more) = self.more.get() {
            calls += more.iter().map(|l| count(&l.0)).sum::<u64>();
        }
        calls
    }

    /// Counts and marks a failure or slow call. Called inside the gate: the window holds the
    /// call's generation.
    pub(super) fn record(&self, failed: bool, slow: bool) {
        let mut ring = lock(&self.ring);
        ring.against += 1;
        let calls = self.held(&ring);
        // Its place: the last call counted, or, if another failure took that one, the next.
        let place = (calls.max(1) - 1).max(ring.top);
        // Clears the place itself too (a call `n` places back left its bits there).
        ring.settle(place + 1);
        let (word, mask) = ring.bit(place);
        if failed {
            ring.failed[word] |= mask;
        }
        if slow {
            ring.slow[word] |= mask;
        }
    }

    /// Notes a judgment of a call admitted in `generation`. Only under the ring's lock and
    /// for the closed state the window holds: a judgment that read the window before a clear
    /// must not mark the cleared one as holding `min_calls`, or its successes would go unjudged.
    pub(super) fn judged(&self, short: bool, generation: u32) {
        if self.short.load(Ordering::Relaxed) != short {
            let ring = lock(&self.ring);
            if ring.generation == generation {
                self.short.store(short, Ordering::Relaxed);
            }
        }
    }

    /// The breaker leaves the closed state: the window keeps the calls it holds now until the
    /// next clear. Called with the transition lock held, after `seal`.
    pub(super) fn freeze(&self) {
        let mut ring = lock(&self.ring);
        let held = self.held(&ring);
        ring.settle(held);
        ring.frozen = Some(held);
    }

    /// The window's tally.
    pub(super) fn tally(&self) -> Tally {
        let mut ring = lock(&self.ring);
        let calls = self.held(&ring);
        ring.settle(calls);
        let held = calls.min(ring.size);
        let count = |bits: &[u64]| {
            bits.iter()
                .map(|w| u64::from(w.count_ones()))
                .sum::<u64>()
                .min(held)
        };
        Tally {
            calls: held,
            failures: count(&ring.failed),
            slow: count(&ring.slow),
        }
    }

    /// Empties the window for the closed state of `generation`. Called with the transition
    /// lock held, after `seal`: no failure is being recorded.
    pub(super) fn clear(&self, generation: u32) {
        let mut ring = lock(&self.ring);
        ring.failed.fill(0);
        ring.slow.fill(0);
        ring.generation = generation;
        ring.folded = 0;
        ring.against = 0;
        ring.frozen = None;
        ring.top = 0;
        self.short.store(true, Ordering::Relaxed);
    }
}
