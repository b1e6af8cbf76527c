//! The count window: the last `n` calls, their failures and slow calls as rings of bits.

use super::gate::{Gate, Tally};
use crate::sync::{Atomic, AtomicBool, AtomicU64, Mutex, Ordering, lock};

/// The last `n` calls. A call's place in the window is its number among the breaker's calls:
/// the breaker's own success and failure counts, which each thread keeps on its own counter
/// line (counters.rs), summed. So a success writes nothing here: it is counted where every
/// call is counted, and only reads `short`. Failures and slow calls (rarer, and each already a
/// read-modify-write on the gate) mark their place in two rings of bits under a lock, and
/// clear the places of the successes counted since the last one marked (`Ring::settle`).
///
/// On one thread this is exactly the last `n` calls. With threads recording at once, a call's
/// number is the sum of the counts when its failure is marked, which orders it among the calls
/// counted by then; two failures that find the same sum take neighbouring places. The window
/// is then the last `n` calls in that order, give or take the places of calls being recorded
/// at that moment.
pub(crate) struct CallWindow {
    /// See [`Gate`].
    pub(super) gate: Atomic<Gate>,
    /// Whether the last judgment found fewer than `min_calls` calls (and from each clear until
    /// a judgment finds enough): while it is set every success is judged, since a success may
    /// bring the window to `min_calls`.
    short: AtomicBool,
    /// Calls counted among the breaker's that are not in the window: stale ones (admitted
    /// before a transition), and `TripFor` outcomes. Written only for those (rare).
    excluded: AtomicU64,
    ring: Mutex<Ring>,
}

struct Ring {
    size: u64,
    /// The breaker's call count and `excluded` when the window was last cleared: the calls
    /// counted since, less those excluded since, are in it. Places count from there.
    base: u64,
    base_excluded: u64,
    /// While the breaker is not closed: the window's calls when it left the closed state
    /// (calls counted since, probes or disabled calls, are not in it).
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
            excluded: AtomicU64::new(0),
            ring: Mutex::new(Ring {
                size: u64::from(n),
                base: 0,
                base_excluded: 0,
                frozen: None,
                top: 0,
                failed: vec![0; words].into_boxed_slice(),
                slow: vec![0; words].into_boxed_slice(),
            }),
        }
    }

    /// A success: whether to judge the rates (only while the window is short of `min_calls`).
    #[inline(always)]
    pub(super) fn success(&self) -> bool {
        self.short.load(Ordering::Relaxed)
    }

    /// A call counted among the breaker's calls that is not to be in the window.
    pub(super) fn exclude(&self) {
        // Release: the call's count comes before, for a reader that sees this (see `read`).
        self.excluded.fetch_add(1, Ordering::Release);
    }

    /// `excluded` and the breaker's calls now, in that order: `excluded` with Acquire, so
    /// every call it leaves out is among the calls read after it.
    fn read(&self, calls: impl FnOnce() -> u64) -> (u64, u64) {
        let excluded = self.excluded.load(Ordering::Acquire);
        (excluded, calls())
    }

    /// The window's calls since its clear.
    fn held(&self, ring: &Ring, calls: impl FnOnce() -> u64) -> u64 {
        if let Some(frozen) = ring.frozen {
            return frozen;
        }
        let (excluded, calls) = self.read(calls);
        calls
            .saturating_sub(ring.base)
            .saturating_sub(excluded.saturating_sub(ring.base_excluded))
    }

    /// Marks a failure or slow call, counted already among `calls` (the breaker's calls now).
    pub(super) fn record(&self, failed: bool, slow: bool, calls: impl FnOnce() -> u64) {
        let mut ring = lock(&self.ring);
        let calls = self.held(&ring, calls);
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

    pub(super) fn judged(&self, short: bool) {
        if self.short.load(Ordering::Relaxed) != short {
            self.short.store(short, Ordering::Relaxed);
        }
    }

    /// The breaker leaves the closed state: the window keeps the calls it holds now until the
    /// next clear. Called with the transition lock held, after `seal`.
    pub(super) fn freeze(&self, calls: impl FnOnce() -> u64) {
        let mut ring = lock(&self.ring);
        let held = self.held(&ring, calls);
        ring.settle(held);
        ring.frozen = Some(held);
    }

    /// The window's tally, `calls` being the breaker's calls now.
    pub(super) fn tally(&self, calls: impl FnOnce() -> u64) -> Tally {
        let mut ring = lock(&self.ring);
        let calls = self.held(&ring, calls);
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

    /// Empties the window, `calls` being the breaker's calls now. Called with the transition
    /// lock held, after `seal`: no failure is being recorded.
    pub(super) fn clear(&self, calls: impl FnOnce() -> u64) {
        let mut ring = lock(&self.ring);
        ring.failed.fill(0);
        ring.slow.fill(0);
        (ring.base_excluded, ring.base) = self.read(calls);
        ring.frozen = None;
        ring.top = 0;
        drop(ring);
        self.short.store(true, Ordering::Relaxed);
    }
}
