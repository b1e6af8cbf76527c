//! Sliding windows for failure and slow-call rates, lock-free.

use crate::clock::{ClockRef, RecentUser};
use crate::config::{TIME_BUCKETS, Window};
use crate::counters::{MORE, Slot};
use crate::state::{generation_of, low_of, packed_word, stamp};
use crate::sync::{Atomic, AtomicBool, AtomicU64, LazyBox, Ordering, yield_now};

mod calls;

use calls::CallWindow;

/// Calls, failures and slow calls in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub calls: u64,
    pub failures: u64,
    pub slow: u64,
}

packed_word!(
    /// The window's gate (its layout is with the others, in `state.rs`): the generation the
    /// window records for, and the failure records inside it now. A failure enters by one
    /// compare-and-swap that also checks the generation; a transition moves the gate on and
    /// waits for those inside (see `RateWindow::enter`).
    Gate
);

impl Gate {
    /// One record, as `leave` takes it off the count.
    const ONE: u64 = 1;

    /// No record inside, in `generation`.
    #[inline(always)]
    const fn new(generation: u32) -> Gate {
        Gate(stamp(generation, 0))
    }

    /// Records inside.
    #[inline(always)]
    const fn inside(self) -> u32 {
        low_of(self.0)
    }

    /// One more record inside.
    #[inline(always)]
    const fn entered(self) -> Gate {
        Gate(self.0 + Self::ONE)
    }

    /// The gate moved to `generation`, with the records inside kept.
    #[inline(always)]
    const fn moved_to(self, generation: u32) -> Gate {
        Gate(stamp(generation, self.inside() as u64))
    }
}

pub(crate) enum RateWindow {
    Calls(CallWindow),
    /// Boxed: its per-thread call words make it several times the size of a `CallWindow`.
    Time(Box<TimeWindow>),
}

impl RateWindow {
    /// A window for breakers on `clock`: a time window on the system clock keeps that
    /// clock's recent time fresh while it lives (see [`ClockRef::recent`]).
    pub(crate) fn new(window: Window, clock: &ClockRef) -> Self {
        match window {
            Window::Calls(n) => RateWindow::Calls(CallWindow::new(n)),
            Window::Time(span) => {
                let mut w = Box::new(TimeWindow::new(span));
                w.recent = clock.recent_user();
                RateWindow::Time(w)
            }
        }
    }

    /// Whether recording needs the time: only a time window does.
    #[inline]
    pub(crate) fn needs_clock(&self) -> bool {
        matches!(self, RateWindow::Time(_))
    }

    /// Records one call. Returns whether the rates should be judged now: they can only rise
    /// with a failure or slow call, when the window first holds `min_calls` calls, or when old
    /// calls slide out of a time window.
    ///
    /// `slot` is the recording thread's counter slot: a time window counts the calls of a
    /// thread with a stripe of its own in words only that thread writes. `calls` gives the
    /// breaker's call count (successes and failures, this one counted): a count window's
    /// places (read only for a failure or slow call).
    #[inline]
    pub(crate) fn record(
        &self,
        failed: bool,
        slow: bool,
        now: u64,
        slot: Slot,
        calls: impl FnOnce() -> u64,
    ) -> bool {
        match self {
            RateWindow::Calls(w) => {
                if failed || slow {
                    w.record(failed, slow, calls);
                    true
                } else {
                    w.success()
                }
            }
            RateWindow::Time(w) => {
                w.record(failed, slow, now, slot)
                    || failed
                    || slow
                    || w.short.load(Ordering::Relaxed)
            }
        }
    }

    /// Records one closed-state success: [`record`](RateWindow::record) with nothing against
    /// it, dated in a time window by [`ClockRef::recent`] (see `TimeWindow::record_success`).
    /// PERF(`rate_time_10s/bb_call`): a time window's success by the thread that owns the
    /// breaker's first counter stripe is inlined into the recording path: a load of the
    /// recent time, the bucket's number, a load and a store of that thread's own word, and
    /// the `short` flag. No clock read: that alone cost ~12 ns, most of the success.
    /// PERF(`rate_count_100/bb_call`, `rate_count_100_2t/bb_call`): a count window's success
    /// is the `short` flag's load; the call was counted on the thread's own line already.
    #[inline(always)]
    pub(crate) fn record_success(&self, clock: &ClockRef, slot: Slot) -> bool {
        match self {
            RateWindow::Time(w) => {
                w.record_success(clock.recent(), slot, || clock.coarse())
                    || w.short.load(Ordering::Relaxed)
            }
            RateWindow::Calls(w) => w.success(),
        }
    }

    /// Notes whether the last judgment found fewer than `min_calls` calls. Neither window
    /// can tell cheaply when it crosses `min_calls` (their calls are counted per thread), so
    /// until a judgment finds enough calls, every call is judged: a success that brings the
    /// window to `min_calls` may trip it.
    pub(crate) fn judged(&self, short: bool) {
        match self {
            RateWindow::Calls(w) => w.judged(short),
            RateWindow::Time(w) => {
                if w.short.load(Ordering::Relaxed) != short {
                    w.short.store(short, Ordering::Relaxed);
                }
            }
        }
    }

    /// The window's calls, failures and slow calls at `now`; `calls` gives the breaker's call
    /// count (read by a count window).
    pub(crate) fn tally(&self, now: u64, calls: impl FnOnce() -> u64) -> Tally {
        match self {
            RateWindow::Calls(w) => w.tally(calls),
            RateWindow::Time(w) => w.tally(now),
        }
    }

    fn gate(&self) -> &Atomic<Gate> {
        match self {
            RateWindow::Calls(w) => &w.gate,
            RateWindow::Time(w) => &w.gate,
        }
    }

    /// Enters the window to record a failure or slow call admitted in `generation`. Returns
    /// `false`, and records nothing, if the breaker has left that generation: the call is
    /// stale. Pair with [`leave`](RateWindow::leave).
    ///
    /// Checking the breaker's state and then recording is not enough: a close could clear the
    /// window between the two and the stale failure would land in the new one. The gate makes
    /// the check and the entry one step, and [`seal`](RateWindow::seal) waits for those inside.
    /// Successes skip the gate (it costs two read-modify-writes): a stale one can only dilute
    /// the new window's rates, never count against it.
    #[inline]
    pub(crate) fn enter(&self, generation: u32) -> bool {
        let gate = self.gate();
        let mut cur = gate.load(Ordering::Relaxed);
        loop {
            if cur.generation() != generation {
                return false;
            }
            // Acquire/Release with `seal`: a seal that sees this entry waits for its `leave`.
            match gate.compare_exchange_weak(
                cur,
                cur.entered(),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    #[inline]
    pub(crate) fn leave(&self) {
        // Release: the records made inside happen before a seal that sees the count drop.
        self.gate().fetch_sub(Gate::ONE, Ordering::Release);
    }

    /// Moves the window to `generation` and waits for every record of an earlier one still
    /// inside: from then on, no earlier call can enter. Called on every transition, with the
    /// transition lock held, before the window is cleared and the new state published. The
    /// wait is for a few atomic operations of another thread, never for a lock.
    pub(crate) fn seal(&self, generation: u32) {
        let gate = self.gate();
        let mut cur = gate.load(Ordering::Relaxed);
        loop {
            let next = cur.moved_to(generation);
            match gate.compare_exchange_weak(cur, next, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        while gate.load(Ordering::Acquire).inside() != 0 {
            yield_now();
        }
    }

    /// A call counted among the breaker's calls that does not enter the window (stale, or a
    /// `TripFor`): a count window leaves it out of its places.
    #[cold]
    pub(crate) fn exclude(&self) {
        if let RateWindow::Calls(w) = self {
            w.exclude();
        }
    }

    /// The breaker leaves the closed state (transition lock held, after `seal`): a count
    /// window holds its calls until the next clear.
    pub(crate) fn freeze(&self, calls: impl FnOnce() -> u64) {
        if let RateWindow::Calls(w) = self {
            w.freeze(calls);
        }
    }

    /// Empties the window. Called with the transition lock held; `calls` gives the breaker's
    /// call count (a count window's calls are those counted after it).
    pub(crate) fn clear(&self, calls: impl FnOnce() -> u64) {
        match self {
            RateWindow::Calls(w) => w.clear(calls),
            RateWindow::Time(w) => w.clear(),
        }
    }
}

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
    gate: Atomic<Gate>,
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
    short: AtomicBool,
    /// Calls per bucket of the threads with a spill stripe, allocated when one first records.
    more: LazyBox<[Calls; MORE]>,
    /// Calls per bucket of the thread that owns the breaker's first counter stripe.
    first: Calls,
    /// On the system clock, keeps [`ClockRef::recent`] fresh while the window lives.
    recent: Option<RecentUser>,
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
struct Bucket(u64);

impl Bucket {
    /// A bucket of `epoch` with its first count.
    #[inline(always)]
    const fn first(epoch: u32) -> Bucket {
        Bucket(stamp(epoch, 1))
    }

    /// The epoch it counts for.
    #[inline(always)]
    const fn epoch(self) -> u32 {
        generation_of(self.0)
    }

    /// Its count.
    #[inline(always)]
    const fn count(self) -> u32 {
        low_of(self.0)
    }

    /// Whether the count can go no higher: four billion calls in one bucket.
    #[inline(always)]
    const fn is_full(self) -> bool {
        self.count() == u32::MAX
    }

    /// One more; the bucket is not full.
    #[inline(always)]
    const fn bumped(self) -> Bucket {
        Bucket(self.0 + 1)
    }

    /// Its count if it is live at `epoch` (that epoch or one of the nine before), else 0.
    #[inline(always)]
    const fn live_count(self, epoch: u32) -> u32 {
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
    fn new(span: core::time::Duration) -> Self {
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
    /// that may lag the clock (see [`ClockRef::recent`]). Returns whether the bucket rotated.
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
    fn record_success(&self, recent: u64, slot: Slot, exact: impl FnOnce() -> u64) -> bool {
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
    fn record(&self, failed: bool, slow: bool, now: u64, slot: Slot) -> bool {
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

    fn tally(&self, now: u64) -> Tally {
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
    fn clear(&self) {
        // Two more than the window: a word stamped by a thread whose clock read ran a bucket
        // ahead of the judging thread's still reads as expired.
        self.offset
            .fetch_add(u64::from(TIME_BUCKETS) + 2, Ordering::Relaxed);
        self.short.store(false, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
