//! Call latency: a fixed-bucket log-linear histogram per breaker, with a view of the last
//! minute and one since the breaker was made.
//!
//! # Buckets
//!
//! Durations are kept in nanoseconds. Everything under 512 ns falls in bucket 0; from there
//! each power of two is split into [`SUB`] equal buckets, up to 2^37 ns (about 137 s), and
//! anything longer falls in the last bucket. A bucket is at most 1/8 of its lower bound
//! wide, so a percentile read as its bucket's midpoint is off by at most 1/16 (6.25%) of the
//! true value (`tests::a_percentile_lands_in_the_bucket_of_the_sorted_reference`).
//!
//! # The protocol
//!
//! A call adds one to its bucket and its duration to the sum, with relaxed `fetch_add`s on
//! the cumulative histogram: nothing else is written on a call, so its counts are exact
//! however many threads record at once. The cumulative histogram is kept in [`STRIPES`]
//! stripes, summed wherever it is read: a thread records in the stripe of its counter seat,
//! so two threads timing calls through one breaker do not pass one cache line back and forth
//! on every call. The first stripe is allocated with the histogram, each other one by the
//! first call of a thread whose seat picks it: a breaker timed by one thread holds one.
//!
//! The last minute is the cumulative histogram less a copy of it taken at the start of a
//! slot of [`SLOT`] (10 s). The first call of a new slot (the one whose compare-and-swap
//! moves `epoch` on) copies the cumulative counts into that slot's place of a ring of
//! [`SLOTS`] before it adds its own. A reader subtracts the oldest copy within the last
//! [`SLOTS`] slots: what was recorded since, which is the last 50 to 60 seconds. A slot
//! without calls has no copy, and none is needed: nothing was recorded in it. The copy is not
//! atomic with the calls of the slot that race it, so the view of the last minute may count
//! a call at a slot's edge in the slot before; the cumulative one never misses a call.
//! Counts only grow, so the difference is never negative.

use core::time::Duration;

use crate::sync::{AtomicU64, LazyBox, Ordering};

/// Sub-buckets per power of two.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// The first power of two split into buckets: 2^9 ns = 512 ns.
const LOW: u32 = 9;
/// The first power of two not split: 2^37 ns, about 137 s.
#[cfg(not(loom))]
const HIGH: u32 = 37;
/// Under loom, one power of two: the protocol is the same, with fewer atomics to model.
#[cfg(loom)]
const HIGH: u32 = LOW + 1;
/// How many buckets a histogram has.
pub(crate) const BUCKETS: usize = 1 + (HIGH - LOW) as usize * SUB;
/// The length of a slot of the rolling view.
pub(crate) const SLOT: Duration = Duration::from_secs(10);
/// The slots the rolling view spans.
pub(crate) const SLOTS: usize = 6;

/// The bucket of a duration of `ns` nanoseconds.
pub(crate) fn bucket(ns: u64) -> usize {
    if ns < 1 << LOW {
        return 0;
    }
    if ns >= 1 << HIGH {
        return BUCKETS - 1;
    }
    let power = 63 - ns.leading_zeros();
    let sub = (ns >> (power - SUB_BITS)) as usize & (SUB - 1);
    1 + (power - LOW) as usize * SUB + sub
}

/// The durations of bucket `i`: from `lower` (inclusive) to `upper` (exclusive), in
/// nanoseconds. The last bucket's upper bound is `u64::MAX`.
pub(crate) fn bounds(i: usize) -> (u64, u64) {
    if i == 0 {
        return (0, 1 << LOW);
    }
    let power = LOW + ((i - 1) / SUB) as u32;
    let sub = ((i - 1) % SUB) as u64;
    let width = 1u64 << (power - SUB_BITS);
    let lower = (1u64 << power) + sub * width;
    if i == BUCKETS - 1 {
        return (lower, u64::MAX);
    }
    (lower, lower + width)
}

/// The duration a percentile in bucket `i` is read as: the bucket's midpoint (the last
/// bucket's lower bound, which has no upper one).
fn value(i: usize) -> u64 {
    let (lower, upper) = bounds(i);
    if upper == u64::MAX {
        lower
    } else {
        lower + (upper - lower) / 2
    }
}

/// One histogram's counts.
struct Counts([AtomicU64; BUCKETS]);

impl Default for Counts {
    fn default() -> Self {
        Counts(core::array::from_fn(|_| AtomicU64::new(0)))
    }
}

/// A copy of the cumulative counts taken at the start of a slot (a mark to subtract).
#[derive(Default)]
struct Mark {
    /// The slot it was taken at, plus one (0: never taken). Written after the counts with
    /// Release, and read before and after them, so a reader can tell a copy overwritten
    /// while it read.
    slot: AtomicU64,
    counts: Counts,
}

/// How many stripes the cumulative histogram is split into (see the module doc).
const STRIPES: usize = 4;

/// One stripe of the cumulative histogram: its counts and their durations' sum. On cache
/// lines of its own, so that no stripe shares one with another's hot end.
#[derive(Default)]
#[repr(align(64))]
struct Stripe {
    counts: Counts,
    /// The durations recorded here, summed, in nanoseconds (saturating at `u64::MAX` is not
    /// checked: 584 years of calls).
    sum: AtomicU64,
}

/// A breaker's latency histogram: allocated the first time a call records its latency.
#[derive(Default)]
pub(crate) struct Latency {
    /// The stripe of seat 0 and of threads without a seat yet.
    first: Stripe,
    /// The other stripes, each allocated by the first call that records in it.
    more: [LazyBox<Stripe>; STRIPES - 1],
    /// The slot of the last call, plus one (0: none yet).
    epoch: AtomicU64,
    copies: [Mark; SLOTS],
}

/// The slot that time `now` (nanoseconds on the breaker's clock) falls in, plus one.
fn slot_of(now: u64) -> u64 {
    now / SLOT.as_nanos() as u64 + 1
}

impl Latency {
    /// Records a call that took `took` nanoseconds and ended at `now`.
    #[inline]
    pub(crate) fn record(&self, took: u64, now: u64) {
        self.record_in(
            crate::counters::current_seat().map_or(0, |seat| seat % STRIPES),
            took,
            now,
        );
    }

    /// Records a call in stripe `stripe` (below [`STRIPES`]): [`record`](Self::record) with
    /// the stripe chosen, which the loom model chooses itself (its threads have no seats).
    #[inline]
    fn record_in(&self, stripe: usize, took: u64, now: u64) {
        let slot = slot_of(now);
        // Relaxed: a stale read only sends this call to `turn`, which compares again.
        let seen = self.epoch.load(Ordering::Relaxed);
        if seen < slot {
            self.turn(seen, slot);
        }
        // Relaxed: counts that nothing is ordered by; a reader sums what it sees.
        let stripe = match stripe {
            0 => &self.first,
            i => self.more[i - 1].get_or_default(),
        };
        stripe.counts.0[bucket(took)].fetch_add(1, Ordering::Relaxed);
        stripe.sum.fetch_add(took, Ordering::Relaxed);
    }

    /// The stripes allocated so far.
    fn stripes(&self) -> impl Iterator<Item = &Stripe> {
        core::iter::once(&self.first).chain(self.more.iter().filter_map(LazyBox::get))
    }

    /// The cumulative counts, summed over the stripes, and their sum.
    fn cumulative(&self) -> ([u64; BUCKETS], u64) {
        let mut counts = [0; BUCKETS];
        let mut sum = 0u64;
        for stripe in self.stripes() {
            for (to, c) in counts.iter_mut().zip(&stripe.counts.0) {
                *to += c.load(Ordering::Relaxed);
            }
            sum = sum.saturating_add(stripe.sum.load(Ordering::Relaxed));
        }
        (counts, sum)
    }

    /// The first call of slot `slot` copies the counts for the rolling view.
    #[cold]
    #[inline(never)]
    fn turn(&self, mut seen: u64, slot: u64) {
        loop {
            match self
                .epoch
                .compare_exchange_weak(seen, slot, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                // Another call moved it to this slot or a later one: it copies.
                Err(now) if now >= slot => return,
                Err(now) => seen = now,
            }
        }
        let copy = &self.copies[(slot % SLOTS as u64) as usize];
        // 0 first, so a reader that sees the counts change under it finds the tag changed.
        copy.slot.store(0, Ordering::Relaxed);
        crate::sync::fence(Ordering::Release);
        let (counts, _) = self.cumulative();
        for (to, from) in copy.counts.0.iter().zip(counts) {
            to.store(from, Ordering::Relaxed);
        }
        copy.slot.store(slot, Ordering::Release);
    }

    /// The counts and sum since the breaker was made, and those of the last minute as of
    /// `now`.
    pub(crate) fn snapshot(&self, now: u64) -> LatencySnapshot {
        let mut merged = Merged::default();
        merged.add(self, now);
        merged.snapshot()
    }

    /// The counts since the breaker was made, for a keyed family to keep once the breaker is
    /// gone ([`Merged::add_total`]), and their sum.
    pub(crate) fn total(&self) -> (Box<[u64]>, u64) {
        let (total, sum) = self.cumulative();
        (Box::new(total), sum)
    }

    /// Adds the counts since the breaker was made to `total` and those of the last minute as
    /// of `now` to `recent`; returns the sum since it was made.
    ///
    /// Allocates nothing: a family merges its keys' histograms one after another.
    fn read_into(&self, now: u64, total_out: &mut [u64], recent_out: &mut [u64]) -> u64 {
        let load = |to: &mut [u64; BUCKETS], from: &Counts| {
            for (t, c) in to.iter_mut().zip(&from.0) {
                *t = c.load(Ordering::Relaxed);
            }
        };
        let (total, sum) = self.cumulative();
        let current = slot_of(now);
        let oldest = current.saturating_sub(SLOTS as u64 - 1);
        // The oldest copy taken within the last `SLOTS` slots.
        let mut counts = [0; BUCKETS];
        let mut base = None;
        'slots: for slot in oldest..=current {
            let copy = &self.copies[(slot % SLOTS as u64) as usize];
            if copy.slot.load(Ordering::Acquire) != slot {
                continue;
            }
            load(&mut counts, &copy.counts);
            crate::sync::fence(Ordering::Acquire);
            if copy.slot.load(Ordering::Relaxed) != slot {
                continue 'slots;
            }
            base = Some(&counts);
            break;
        }
        // No copy in the last minute: no call turned a slot, so none was recorded then,
        // unless the last call's slot is this minute's (its copy being overwritten now).
        match base {
            Some(base) => {
                for ((to, t), b) in recent_out.iter_mut().zip(&total).zip(base.iter()) {
                    *to += t.saturating_sub(*b);
                }
            }
            None if self.epoch.load(Ordering::Relaxed) >= oldest => {
                for (to, t) in recent_out.iter_mut().zip(&total) {
                    *to += t;
                }
            }
            None => {}
        }
        for (to, t) in total_out.iter_mut().zip(&total) {
            *to += t;
        }
        sum
    }
}

/// Histograms read as one: a keyed family's, its keys' merged when it is read (so a call
/// records into its key's histogram alone, as any breaker's call does). Reading costs a pass
/// over each histogram's buckets: [`BUCKETS`] counts, and those of one copy.
pub(crate) struct Merged {
    total: Box<[u64]>,
    recent: Box<[u64]>,
    sum: u64,
}

impl Default for Merged {
    fn default() -> Self {
        Merged {
            total: vec![0; BUCKETS].into_boxed_slice(),
            recent: vec![0; BUCKETS].into_boxed_slice(),
            sum: 0,
        }
    }
}

impl Merged {
    /// Adds a live histogram: its calls since it was made, and its last minute as of `now`.
    pub(crate) fn add(&mut self, latency: &Latency, now: u64) {
        self.sum =
            self.sum
                .saturating_add(latency.read_into(now, &mut self.total, &mut self.recent));
    }

    /// Adds the calls of a histogram gone (an evicted key's, from [`Latency::total`]): to the
    /// calls since the family was made, not to the last minute.
    pub(crate) fn add_total(&mut self, total: &[u64], sum: u64) {
        for (to, t) in self.total.iter_mut().zip(total) {
            *to += t;
        }
        self.sum = self.sum.saturating_add(sum);
    }

    /// The merged histograms as one snapshot.
    pub(crate) fn snapshot(self) -> LatencySnapshot {
        LatencySnapshot::new(self.total, self.sum, &self.recent)
    }
}

/// A breaker's call latency: percentiles of the last minute, and the histogram since the
/// breaker was made (what an exporter turns into a `metrics` histogram).
///
/// Only calls that finish with a verdict are timed: successes and failures, slow ones
/// included; not rejections, not calls a classifier ignored, not the calls of a disabled
/// breaker. A percentile is read as the midpoint of the histogram bucket it falls in, within
/// 6.25% of the true value, and durations under 512 ns read as 256 ns. See
/// [`Breaker::latency`](crate::Breaker::latency) for which breakers record.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LatencySnapshot {
    /// Calls timed in the last minute (from 50 to 60 seconds: the view moves in steps of
    /// 10 s).
    pub recent_calls: u64,
    /// The median duration of the last minute's calls; `None` without calls.
    pub p50: Option<Duration>,
    /// The 90th percentile of the last minute; `None` without calls.
    pub p90: Option<Duration>,
    /// The 99th percentile of the last minute; `None` without calls.
    pub p99: Option<Duration>,
    /// Calls timed since the breaker was made.
    pub calls: u64,
    /// Their durations, summed.
    pub sum: Duration,
    total: Box<[u64]>,
    recent: Box<[u64]>,
}

impl LatencySnapshot {
    /// The snapshot of a breaker that has timed no call yet.
    pub(crate) fn empty() -> LatencySnapshot {
        LatencySnapshot::new(vec![0; BUCKETS].into_boxed_slice(), 0, &[0; BUCKETS])
    }

    fn new(total: Box<[u64]>, sum: u64, recent: &[u64]) -> LatencySnapshot {
        let recent_calls = recent.iter().sum();
        let q = |q| quantile(recent, q).map(Duration::from_nanos);
        LatencySnapshot {
            recent_calls,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            calls: total.iter().sum(),
            sum: Duration::from_nanos(sum),
            total,
            recent: recent.into(),
        }
    }

    /// The `q`-quantile (0.0 to 1.0) of the last minute's calls: `quantile(0.999)` for the
    /// 99.9th percentile. `None` without calls, or for a `q` outside 0 to 1.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.recent, q).map(Duration::from_nanos)
    }

    /// The buckets since the breaker was made that hold calls, in order: each bucket's
    /// upper bound (exclusive; `Duration::MAX` for the last, which holds every call of
    /// 2^37 ns, about 137 s, or longer) and how many calls fell in it. A Prometheus
    /// exporter's cumulative `le` buckets are the running sums of these counts.
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.total
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| {
                let (_, upper) = bounds(i);
                let upper = if upper == u64::MAX {
                    Duration::MAX
                } else {
                    Duration::from_nanos(upper)
                };
                (upper, *n)
            })
    }

    /// The same buckets, each as the duration an exporter records its calls at (its
    /// midpoint; the last bucket's lower bound), with its count.
    pub fn bucket_values(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.total
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (Duration::from_nanos(value(i)), *n))
    }
}

/// The `q`-quantile of the durations counted in `counts`: the bucket holding the call of rank
/// `ceil(q * n)` (at least 1), read as its midpoint.
fn quantile(counts: &[u64], q: f64) -> Option<u64> {
    if !(0.0..=1.0).contains(&q) {
        return None;
    }
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(value(i));
        }
    }
    None
}

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;
