//! Sliding windows for failure and slow-call rates, lock-free.

use once_cell::race::OnceBox;

use crate::config::{TIME_BUCKETS, Window};
use crate::counters::{MORE, Slot};
use crate::sync::{AtomicBool, AtomicU64, Ordering, yield_now};

/// Calls, failures and slow calls in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub calls: u64,
    pub failures: u64,
    pub slow: u64,
}

pub(crate) enum RateWindow {
    Calls(CallWindow),
    Time(TimeWindow),
}

impl RateWindow {
    pub(crate) fn new(window: Window) -> Self {
        match window {
            Window::Calls(n) => RateWindow::Calls(CallWindow::new(n)),
            Window::Time(span) => RateWindow::Time(TimeWindow::new(span)),
        }
    }

    /// Whether recording needs the time: only a time window does.
    #[inline]
    pub(crate) fn needs_clock(&self) -> bool {
        matches!(self, RateWindow::Time(_))
    }

    /// Records one call. Returns whether the rates should be judged now: they can only rise
    /// with a failure or slow call, when the window first holds `min_calls` calls (every call
    /// is judged until a judgment finds that many), or when old calls slide out of a time
    /// window.
    ///
    /// `slot` is the recording thread's counter slot. A thread with a stripe of its own counts
    /// its calls in words only it writes (time window), or takes positions a block at a time
    /// (count window).
    #[inline]
    pub(crate) fn record(&self, failed: bool, slow: bool, now: u64, slot: Slot) -> bool {
        match self {
            RateWindow::Calls(w) => {
                w.record(failed, slow, slot);
                failed || slow || w.short.load(Ordering::Relaxed)
            }
            RateWindow::Time(w) => {
                w.record(failed, slow, now, slot)
                    || failed
                    || slow
                    || w.short.load(Ordering::Relaxed)
            }
        }
    }

    /// Notes whether the last judgment found fewer than `min_calls` calls. Neither window can
    /// tell cheaply when it crosses `min_calls` (their calls are counted per thread), so until
    /// a judgment finds enough calls, every call is judged: a success that brings the window
    /// to `min_calls` may trip it.
    pub(crate) fn judged(&self, short: bool) {
        let flag = match self {
            RateWindow::Calls(w) => &w.short,
            RateWindow::Time(w) => &w.short,
        };
        if flag.load(Ordering::Relaxed) != short {
            flag.store(short, Ordering::Relaxed);
        }
    }

    pub(crate) fn tally(&self, now: u64) -> Tally {
        match self {
            RateWindow::Calls(w) => w.tally(),
            RateWindow::Time(w) => w.tally(now),
        }
    }

    fn gate(&self) -> &AtomicU64 {
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
            if (cur >> GATE_BITS) as u32 != generation {
                return false;
            }
            // Acquire/Release with `seal`: a seal that sees this entry waits for its `leave`.
            match gate.compare_exchange_weak(cur, cur + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    #[inline]
    pub(crate) fn leave(&self) {
        // Release: the records made inside happen before a seal that sees the count drop.
        self.gate().fetch_sub(1, Ordering::Release);
    }

    /// Moves the window to `generation` and waits for every record of an earlier one still
    /// inside: from then on, no earlier call can enter. Called on every transition, with the
    /// transition lock held, before the window is cleared and the new state published. The
    /// wait is for a few atomic operations of another thread, never for a lock.
    pub(crate) fn seal(&self, generation: u32) {
        let gate = self.gate();
        let mut cur = gate.load(Ordering::Relaxed);
        loop {
            let next = (u64::from(generation) << GATE_BITS) | (cur & GATE_MASK);
            match gate.compare_exchange_weak(cur, next, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        while gate.load(Ordering::Acquire) & GATE_MASK != 0 {
            yield_now();
        }
    }

    /// Empties the window. Called with the transition lock held.
    pub(crate) fn clear(&self) {
        match self {
            RateWindow::Calls(w) => w.clear(),
            RateWindow::Time(w) => w.clear(),
        }
    }
}

/// The last `n` calls as two rings of bits. Each call takes the next position of the ring;
/// swapping a position's bit returns the bit it replaced, so the running totals stay equal to
/// the bits set even when two calls race for one position.
///
/// Positions are handed out from one shared sequence. A thread with a counter stripe of its
/// own (see counters.rs) takes them a block at a time into a cursor only it writes, and fills
/// them with plain stores: one `fetch_add` per block instead of one per call, which two threads
/// on one breaker would otherwise take turns on (~100 ns a call, against ~21 ns alone). The
/// window is then the last `n` positions rather than exactly the last `n` calls: calls of
/// different threads are ordered by block, up to a block apart. A thread alone on a breaker
/// fills its blocks in call order, so for it the window is exact.
pub(crate) struct CallWindow {
    /// The generation it records for (high 32 bits) and the records inside (low 32); see
    /// `RateWindow::enter`.
    gate: AtomicU64,
    size: u64,
    /// The next position not yet handed out, on a line of its own: every call reads the
    /// fields around it, and a block taken by one thread must not evict them from the other's
    /// cache.
    seq: Alone,
    /// Positions a cursor takes at a time.
    block: u64,
    /// Clears so far: a cursor or count from before the last clear is void.
    clears: AtomicU64,
    failed_bits: Box<[AtomicU64]>,
    slow_bits: Box<[AtomicU64]>,
    failures: AtomicU64,
    slow: AtomicU64,
    /// Calls recorded by threads without a cursor, since the last clear.
    filled: AtomicU64,
    /// Whether the last judgment had fewer than `min_calls` calls: until one has enough,
    /// every call is judged, so the call that brings the window to `min_calls` is.
    short: AtomicBool,
    /// The cursors of the threads with a spill stripe, allocated when one first records.
    more: OnceBox<[Cursor; MORE]>,
    /// The cursor of the thread that owns the breaker's first counter stripe.
    first: Cursor,
}

/// A word alone on its cache line.
#[repr(align(64))]
#[derive(Default)]
struct Alone(AtomicU64);

/// One thread's block of positions and its count of calls, alone on a cache line. Only that
/// thread writes it.
#[repr(align(64))]
#[derive(Default)]
struct Cursor {
    /// The `clears` it was taken under; anything else voids the rest.
    clears: AtomicU64,
    next: AtomicU64,
    end: AtomicU64,
    /// Calls recorded since the last clear.
    filled: AtomicU64,
}

/// Adds one to a word only this thread writes: a load and a store.
#[inline]
fn bump_own(word: &AtomicU64) {
    word.store(word.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

impl CallWindow {
    fn new(n: u32) -> Self {
        let words = (n as usize).div_ceil(64);
        let ring = || (0..words).map(|_| AtomicU64::new(0)).collect();
        CallWindow {
            gate: AtomicU64::new(0),
            size: u64::from(n),
            seq: Alone::default(),
            // A quarter of the window, at most 32: a thread alone keeps exact order, and two
            // threads take one `fetch_add` per block instead of per call (an eighth still left
            // two threads at 1.8× one thread's time per call on the bench machine).
            block: (u64::from(n) / 4).clamp(1, 32),
            clears: AtomicU64::new(0),
            failed_bits: ring(),
            slow_bits: ring(),
            failures: AtomicU64::new(0),
            slow: AtomicU64::new(0),
            filled: AtomicU64::new(0),
            short: AtomicBool::new(true),
            more: OnceBox::new(),
            first: Cursor::default(),
        }
    }

    /// The cursor of `slot`, if that slot is one thread's alone.
    #[inline]
    fn cursor(&self, slot: Slot) -> Option<&Cursor> {
        match slot {
            0 => Some(&self.first),
            1..=MORE => Some(&self.more.get_or_init(Box::default)[slot - 1]),
            _ => None,
        }
    }

    /// The next position for this call, and counts the call.
    #[inline]
    fn position(&self, slot: Slot) -> u64 {
        // Relaxed throughout: the window is statistics; the decision to trip is taken under
        // the transition lock, which orders everything that matters.
        let Some(c) = self.cursor(slot) else {
            self.filled.fetch_add(1, Ordering::Relaxed);
            return self.seq.0.fetch_add(1, Ordering::Relaxed);
        };
        let clears = self.clears.load(Ordering::Relaxed);
        let (mut next, mut end) = (
            c.next.load(Ordering::Relaxed),
            c.end.load(Ordering::Relaxed),
        );
        if c.clears.load(Ordering::Relaxed) != clears {
            // The window was cleared since this cursor was filled: start over in the new one.
            c.clears.store(clears, Ordering::Relaxed);
            c.filled.store(0, Ordering::Relaxed);
            (next, end) = (0, 0);
        }
        if next == end {
            next = self.seq.0.fetch_add(self.block, Ordering::Relaxed);
            end = next + self.block;
            c.end.store(end, Ordering::Relaxed);
        }
        c.next.store(next + 1, Ordering::Relaxed);
        bump_own(&c.filled);
        next
    }

    #[inline]
    fn record(&self, failed: bool, slow: bool, slot: Slot) {
        let pos = self.position(slot) % self.size;
        let (word, mask) = ((pos / 64) as usize, 1u64 << (pos % 64));
        Self::put(&self.failed_bits[word], mask, failed, &self.failures);
        Self::put(&self.slow_bits[word], mask, slow, &self.slow);
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

    fn tally(&self) -> Tally {
        // Failures and slow calls first, with Acquire: a failure is counted after its call, so
        // the calls read next include the call of every failure read here. Read the other way
        // round, a judge held up between the two reads (preempted, say) could see the failures
        // of calls made meanwhile but not those calls, and trip on a rate nobody had.
        let (failures, slow) = (
            self.failures.load(Ordering::Acquire),
            self.slow.load(Ordering::Acquire),
        );
        let clears = self.clears.load(Ordering::Relaxed);
        let live = |c: &Cursor| {
            if c.clears.load(Ordering::Relaxed) == clears {
                c.filled.load(Ordering::Relaxed)
            } else {
                0
            }
        };
        let mut filled = self.filled.load(Ordering::Relaxed) + live(&self.first);
        if let Some(more) = self.more.get() {
            filled += more.iter().map(live).sum::<u64>();
        }
        let calls = filled.min(self.size);
        // A racing `put` may have moved a bit but not yet its total; clamp so a transient
        // wrap below zero never shows.
        let clamp = |n: u64| if n > self.size { 0 } else { n.min(calls) };
        Tally {
            calls,
            failures: clamp(failures),
            slow: clamp(slow),
        }
    }

    /// Empties the window. Called with the transition lock held, after `seal`.
    fn clear(&self) {
        self.seq.0.store(0, Ordering::Relaxed);
        self.clears.fetch_add(1, Ordering::Relaxed);
        for w in self.failed_bits.iter().chain(self.slow_bits.iter()) {
            w.store(0, Ordering::Relaxed);
        }
        self.failures.store(0, Ordering::Relaxed);
        self.slow.store(0, Ordering::Relaxed);
        self.filled.store(0, Ordering::Relaxed);
        self.short.store(true, Ordering::Relaxed);
    }
}

/// The calls of the last `span`, in buckets one tenth of it wide. Each counter word holds the
/// bucket's epoch (its slot number) in the high 32 bits and the count in the low 32, so a
/// bucket is reused by restarting its count: no lock, no lost count.
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
    /// As `CallWindow::gate`.
    gate: AtomicU64,
    /// `2^64 / width`, rounded up: `now * per_width >> 64` numbers the buckets without a
    /// division (a 64-bit `div` costs more than the rest of the record). Boundaries drift from
    /// exact multiples of `width` by under a nanosecond per 2^64 / width nanoseconds; what
    /// matters is that the numbering is the same pure, monotonic function for every thread.
    per_width: u128,
    /// Added to every epoch; see `clear`.
    offset: AtomicU64,
    /// Failures and slow calls per bucket.
    against: [[AtomicU64; 2]; BUCKETS],
    /// Calls per bucket of the threads without a stripe.
    calls: [AtomicU64; BUCKETS],
    /// Whether the last judgment had fewer than `min_calls` calls; see `RateWindow::judged`.
    short: AtomicBool,
    /// Calls per bucket of the threads with a spill stripe, allocated when one first records.
    more: OnceBox<[Calls; MORE]>,
    /// Calls per bucket of the thread that owns the breaker's first counter stripe.
    first: Calls,
}

const BUCKETS: usize = TIME_BUCKETS as usize;

/// One thread's calls per bucket, alone on their cache lines.
#[repr(align(64))]
#[derive(Default)]
struct Calls([AtomicU64; BUCKETS]);

const GATE_BITS: u32 = 32;
const GATE_MASK: u64 = (1 << GATE_BITS) - 1;

const COUNT_BITS: u32 = 32;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

impl TimeWindow {
    fn new(span: core::time::Duration) -> Self {
        let width = (crate::clock::nanos(span) / u64::from(TIME_BUCKETS)).max(1);
        TimeWindow {
            gate: AtomicU64::new(0),
            per_width: (1u128 << 64).div_ceil(u128::from(width)),
            offset: AtomicU64::new(0),
            against: Default::default(),
            calls: Default::default(),
            short: AtomicBool::new(false),
            more: OnceBox::new(),
            first: Calls::default(),
        }
    }

    fn epoch(&self, now: u64) -> u64 {
        // Epoch 0 is what a fresh word holds; counting from 1 keeps them apart.
        let raw = ((u128::from(now) * self.per_width) >> 64) as u64 + 1;
        raw.wrapping_add(self.offset.load(Ordering::Relaxed)) & COUNT_MASK
    }

    /// Adds one to a shared `word` for `epoch`; returns whether the word held an older epoch.
    #[inline]
    fn bump(word: &AtomicU64, epoch: u64) -> bool {
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            let rotated = cur >> COUNT_BITS != epoch;
            let next = if rotated {
                epoch << COUNT_BITS | 1
            } else if cur & COUNT_MASK == COUNT_MASK {
                return false; // saturated: four billion calls in one bucket
            } else {
                cur + 1
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
    fn bump_own(word: &AtomicU64, epoch: u64) -> bool {
        let cur = word.load(Ordering::Relaxed);
        let rotated = cur >> COUNT_BITS != epoch;
        if rotated {
            word.store(epoch << COUNT_BITS | 1, Ordering::Relaxed);
        } else if cur & COUNT_MASK != COUNT_MASK {
            word.store(cur + 1, Ordering::Relaxed);
        }
        rotated
    }

    /// The call words of `slot`, if that slot is one thread's alone.
    #[inline]
    fn own(&self, slot: Slot) -> Option<&Calls> {
        match slot {
            0 => Some(&self.first),
            1..=MORE => Some(&self.more.get_or_init(Box::default)[slot - 1]),
            _ => None,
        }
    }

    #[inline]
    fn record(&self, failed: bool, slow: bool, now: u64, slot: Slot) -> bool {
        let epoch = self.epoch(now);
        let i = (epoch % u64::from(TIME_BUCKETS)) as usize;
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
        let epoch = self.epoch(now);
        let count = |w: &AtomicU64, order| {
            let v = w.load(order);
            // Live buckets are the current epoch and the nine before it.
            if epoch.wrapping_sub(v >> COUNT_BITS) & COUNT_MASK < u64::from(TIME_BUCKETS) {
                v & COUNT_MASK
            } else {
                0
            }
        };
        // Failures and slow calls first, with Acquire: as in `CallWindow::tally`, the calls
        // read after them include the call of every failure read.
        let mut t = Tally::default();
        for [failures, slow] in &self.against {
            t.failures += count(failures, Ordering::Acquire);
            t.slow += count(slow, Ordering::Acquire);
        }
        let sum = |words: &[AtomicU64]| {
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
