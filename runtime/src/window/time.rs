//! The time window: the calls of the last `span`, in buckets.

use super::gate::{Gate, Tally};
use crate::clock::RecentUser;
use crate::config::TIME_BUCKETS;
use crate::counters::{MORE, Slot};
use crate::state::{generation_of, low_of, stamp};
use crate::sync::{Atomic, AtomicBool, AtomicU64, LazyBox, Ordering};

/// The calls of the last `span`, in buckets one tenth of it wide. Each counter word is a
/// [`Bucket`]: the bucket's epoch (its slot number) and its count, so a bucket is reused by
/// restarting its count: no lock, no lost count.
///
/// Failures and slow calls are counted in shared words, with a compare-and-swap. Calls are
/// counted per thread: a thread with a counter stripe of its own (see counters.rs) writes its
/// own bucket words with plain stores, on cache lines no other thread writes; others share
/// words with a compare-and-swap. Two threads on one window would otherwise take turns
/// owning the current bucket's line on every success (~90 ns a call, against ~20 alone).
///
/// Clearing moves `offset` on instead of zeroing words: every word written before then is
/// expired from then on. A zeroing store could be overwritten by an owner's store of a count
/// it had just read, bringing back the calls of the window it cleared.
pub(crate) struct TimeWindow {
    /// See [`Gate`].
    pub(super) gate: Atomic<Gate>,
    /// `2^64 / width`, rounded up: `now * per_width >> 64` numbers the buckets without a
    /// division (a 64-bit `div` costs more than the rest of the record). Boundaries drift from
    /// exact multiples of `width` by under a nanosecond per 2^64 / width nanoseconds; what
    /// matters is that the numbering is the same pure, monotonic function for every thread.
    per_width: u128,
    /// Added to every epoch; see `clear`.
    offset: AtomicU64,
    /// Failures and slow calls per bucket.
    against: [[Atomic<Bucket>; 2]; BUCKETS],
    /// Calls per bucket of the threads without a stripe.
    calls: [Atomic<Bucket>; BUCKETS],
    /// Whether the last judgment had fewer than `min_calls` calls; see `RateWindow::judged`.
    pub(super) short: AtomicBool,
    /// Calls per bucket of the threads with a spill stripe, allocated when one first records.
    more: LazyBox<[Calls; MORE]>,
    /// Calls per bucket of the thread that owns the breaker's first counter stripe.
    first: Calls,
    /// On the system clock, keeps [`ClockRef::recent`](crate::clock::ClockRef::recent) fresh
    /// while the window lives.
    pub(super) recent: Option<RecentUser>,
}

const BUCKETS: usize = TIME_BUCKETS as usize;

/// One thread's calls per bucket, alone on their cache lines.
#[repr(align(64))]
#[derive(Default)]
struct Calls([Atomic<Bucket>; BUCKETS]);

/// A time bucket's counter word (its layout is with the others, in `state.rs`): the epoch it
/// counts for in the high 32 bits, where the other words keep a generation, and its count,
/// which saturates, in the low 32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(transparent)]
pub(super) struct Bucket(pub(super) u64);

impl Bucket {
    /// A bucket of `epoch` with its first count.
    #[inline(always)]
    pub(super) const fn first(epoch: u32) -> Bucket {
        Bucket(stamp(epoch, 1))
    }

    /// The epoch it counts for.
    #[inline(always)]
    pub(super) const fn epoch(self) -> u32 {
        generation_of(self.0)
    }

    /// Its count.
    #[inline(always)]
    pub(super) const fn count(self) -> u32 {
        low_of(self.0)
    }

    /// Whether the count can go no higher: four billion calls in one bucket.
    #[inline(always)]
    pub(super) const fn is_full(self) -> bool {
        self.count() == u32::MAX
    }

    /// One more; the bucket is not full.
    #[inline(always)]
    pub(super) const fn bumped(self) -> Bucket {
        Bucket(self.0 + 1)
    }

    /// Its count if it is live at `epoch` (that epoch or one of the nine before), else 0.
    #[inline(always)]
    pub(super) const fn live_count(self, epoch: u32) -> u32 {
        if epoch.wrapping_sub(self.epoch()) < TIME_BUCKETS {
            self.count()
        } else {
            0
        }
    }
}

impl crate::sync::Packed for Bucket {
    #[inline(always)]
    fn from_bits(bits: u64) -> Self {
        Bucket(bits)
    }

    #[inline(always)]
    fn bits(self) -> u64 {
        self.0
    }
}

impl TimeWindow {
    pub(super) fn new(span: core::time::Duration) -> Self {
        let width = (crate::clock::nanos(span) / u64::from(TIME_BUCKETS)).max(1);
        TimeWindow {
            gate: Atomic::new(Gate::new(0)),
            per_width: (1u128 << 64).div_ceil(u128::from(width)),
            offset: AtomicU64::new(0),
            against: Default::default(),
            calls: Default::default(),
            short: AtomicBool::new(false),
            more: LazyBox::default(),
            first: Calls::default(),
            recent: None,
        }
    }

    /// The bucket `now` falls in: its slot in the ring, and the epoch its words are stamped
    /// with. The slot comes from the whole 64-bit bucket number: taken from the
    /// 32-bit stamp, it would jump where the stamp wraps (2^32 is not a multiple of 10) and
    /// write over buckets still in the window.
    #[inline(always)]
    fn epoch(&self, now: u64) -> (usize, u32) {
        // Epoch 0 is what a fresh word holds; counting from 1 keeps them apart.
        let raw = ((u128::from(now) * self.per_width) >> 64) as u64 + 1;
        let full = raw.wrapping_add(self.offset.load(Ordering::Relaxed));
        ((full % u64::from(TIME_BUCKETS)) as usize, full as u32)
    }

    /// Adds one to a shared `word` for `epoch`; returns whether the word held an older epoch.
    #[inline]
    fn bump(word: &Atomic<Bucket>, epoch: u32) -> bool {
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            let rotated = cur.epoch() != epoch;
            let next = if rotated {
                Bucket::first(epoch)
            } else if cur.is_full() {
                return false; // saturated
            } else {
                cur.bumped()
            };
            // Release: a failure's count is published after its call's; see `tally`.
            match word.compare_exchange_weak(cur, next, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return rotated,
                Err(actual) => cur = actual,
            }
        }
    }

    /// `bump` for a word only this thread writes: a load and a store.
    #[inline]
    fn bump_own(word: &Atomic<Bucket>, epoch: u32) -> bool {
        let cur = word.load(Ordering::Relaxed);
        let rotated = cur.epoch() != epoch;
        if rotated {
            word.store(Bucket::first(epoch), Ordering::Relaxed);
        } else if !cur.is_full() {
            word.store(cur.bumped(), Ordering::Relaxed);
        }
        rotated
    }

    /// The call words of `slot`, if that slot is one thread's alone.
    #[inline]
    fn own(&self, slot: Slot) -> Option<&Calls> {
        match slot {
            0 => Some(&self.first),
            1..=MORE => Some(&self.more.get_or_default()[slot - 1]),
            _ => None,
        }
    }

    /// A success's call count: `record` with nothing against it, dated by `recent`, a time
    /// that may lag the clock (see [`ClockRef::recent`](crate::clock::ClockRef::recent)).
    /// Returns whether the bucket rotated.
    ///
    /// The success is counted in `recent`'s bucket only if the word there already counts for
    /// that bucket's epoch: it then lands at most one lag early, in a bucket this thread
    /// already wrote, and only dilutes the rate. Otherwise it reads `exact()` (the coarse
    /// clock) and is recorded as before this cell existed, so a lagging time never stamps a
    /// word: a word holding a newer epoch (counts of calls, failed ones included, made after
    /// `recent`) is never reset to an older one, which would raise the failure rate. That
    /// costs one clock read per bucket per thread.
    ///
    /// Bound: a success lands at most [`TICK`](crate::clock::recent::TICK) plus the ticker's
    /// scheduling delay early; one delayed past the whole window falls out of it.
    #[inline(always)]
    pub(super) fn record_success(
        &self,
        recent: u64,
        slot: Slot,
        exact: impl FnOnce() -> u64,
    ) -> bool {
        let (i, epoch) = self.epoch(recent);
        if slot == 0 {
            let word = &self.first.0[i];
            let cur = word.load(Ordering::Relaxed);
            if cur.epoch() == epoch {
                if !cur.is_full() {
                    word.store(cur.bumped(), Ordering::Relaxed);
                }
                return false;
            }
        } else if self.bump_current(i, epoch, slot) {
            return false;
        }
        self.success_exact(exact(), slot)
    }

    /// A success by a thread other than the first stripe's owner, if its word at `i` already
    /// counts for `epoch`; returns whether it counted it (else nothing was written).
    #[inline(never)]
    fn bump_current(&self, i: usize, epoch: u32, slot: Slot) -> bool {
        let word = match self.own(slot) {
            Some(own) => {
                let word = &own.0[i];
                let cur = word.load(Ordering::Relaxed);
                if cur.epoch() == epoch && !cur.is_full() {
                    word.store(cur.bumped(), Ordering::Relaxed);
                }
                return cur.epoch() == epoch;
            }
            None => &self.calls[i],
        };
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            if cur.epoch() != epoch {
                return false;
            }
            if cur.is_full() {
                return true;
            }
            match word.compare_exchange_weak(
                cur,
                cur.bumped(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// A success dated by the clock: the bucket's first of this thread, as a time window
    /// recorded every success before the recent time.
    #[inline(never)]
    fn success_exact(&self, now: u64, slot: Slot) -> bool {
        let (i, epoch) = self.epoch(now);
        match self.own(slot) {
            Some(own) => Self::bump_own(&own.0[i], epoch),
            None => Self::bump(&self.calls[i], epoch),
        }
    }

    #[inline]
    pub(super) fn record(&self, failed: bool, slow: bool, now: u64, slot: Slot) -> bool {
        let (i, epoch) = self.epoch(now);
        let rotated = match self.own(slot) {
            Some(own) => Self::bump_own(&own.0[i], epoch),
            None => Self::bump(&self.calls[i], epoch),
        };
        if failed {
            Self::bump(&self.against[i][0], epoch);
        }
        if slow {
            Self::bump(&self.against[i][1], epoch);
        }
        rotated
    }

    pub(super) fn tally(&self, now: u64) -> Tally {
        let (_, epoch) = self.epoch(now);
        let count = |w: &Atomic<Bucket>, order| u64::from(w.load(order).live_count(epoch));
        // Failures and slow calls first, with Acquire: as in `CallWindow::tally`, the calls
        // read after them include the call of every failure read.
        let mut t = Tally::default();
        for [failures, slow] in &self.against {
            t.failures += count(failures, Ordering::Acquire);
            t.slow += count(slow, Ordering::Acquire);
        }
        let sum = |words: &[Atomic<Bucket>]| {
            words
                .iter()
                .map(|w| count(w, Ordering::Relaxed))
                .sum::<u64>()
        };
        t.calls = sum(&self.calls) + sum(&self.first.0);
        if let Some(more) = self.more.get() {
            t.calls += more.iter().map(|c| sum(&c.0)).sum::<u64>();
        }
        t
    }

    /// Empties the window: moves every epoch on by more than the window's length, so that
    /// every word written so far reads as expired. Called with the transition lock held,
    /// after `seal`: no failure of the ending generation is still being recorded, and a
    /// success racing the clear lands in an expired word, or (if it read the new offset)
    /// counts once in the new window, like any stale success.
    pub(super) fn clear(&self) {
        // Two more than the window: a word stamped by a thread whose clock read ran a bucket
        // ahead of the judging thread's still reads as expired.
        self.offset
            .fetch_add(u64::from(TIME_BUCKETS) + 2, Ordering::Relaxed);
        self.short.store(false, Ordering::Relaxed);
    }
}
