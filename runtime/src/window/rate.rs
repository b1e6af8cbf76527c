//! [`RateWindow`]: a breaker's window, by calls or by time, and the gate that keeps a
//! transition's clearing apart from the failures being recorded.

use super::calls::CallWindow;
use super::gate::{Gate, Tally};
use super::time::TimeWindow;
use crate::clock::ClockRef;
use crate::config::Window;
use crate::counters::Slot;
use crate::sync::{Atomic, Ordering, yield_now};

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

    /// Records one call admitted in `generation`. Returns whether the rates should be judged
    /// now: they can only rise with a failure or slow call, when the window first holds
    /// `min_calls` calls, or when old calls slide out of a time window.
    ///
    /// `slot` is the recording thread's counter slot: each window counts the calls of a
    /// thread with a stripe of its own in words only that thread writes. A failure or slow
    /// call is recorded inside the gate ([`enter`](RateWindow::enter)).
    #[inline]
    pub(crate) fn record(
        &self,
        failed: bool,
        slow: bool,
        now: u64,
        slot: Slot,
        generation: u32,
    ) -> bool {
        match self {
            RateWindow::Calls(w) => {
                if failed || slow {
                    w.record(failed, slow);
                    true
                } else {
                    w.success(slot, generation)
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

    /// Records one closed-state success admitted in `generation`: [`record`](RateWindow::record)
    /// with nothing against it, dated in a time window by [`ClockRef::recent`] (see
    /// `TimeWindow::record_success`).
    /// PERF(`rate_time_10s/bb_call`): a time window's success by the thread that owns the
    /// breaker's first counter stripe is inlined into the recording path: a load of the
    /// recent time, the bucket's number, a load and a store of that thread's own word, and
    /// the `short` flag. No clock read: that alone cost ~12 ns, most of the success.
    /// PERF(`rate_count_100/bb_call`, `rate_count_100_2t/bb_call`): a count window's success
    /// by that thread is a load and a store of its own word, and the `short` flag's load.
    #[inline(always)]
    pub(crate) fn record_success(&self, clock: &ClockRef, slot: Slot, generation: u32) -> bool {
        match self {
            RateWindow::Time(w) => {
                w.record_success(clock.recent(), slot, || clock.coarse())
                    || w.short.load(Ordering::Relaxed)
            }
            RateWindow::Calls(w) => w.success(slot, generation),
        }
    }

    /// Notes whether the last judgment found fewer than `min_calls` calls. Neither window
    /// can tell cheaply when it crosses `min_calls` (their calls are counted per thread), so
    /// until a judgment finds enough calls, every call is judged: a success that brings the
    /// window to `min_calls` may trip it.
    pub(crate) fn judged(&self, short: bool, generation: u32) {
        match self {
            RateWindow::Calls(w) => w.judged(short, generation),
            RateWindow::Time(w) => {
                if w.short.load(Ordering::Relaxed) != short {
                    w.short.store(short, Ordering::Relaxed);
                }
            }
        }
    }

    /// The window's calls, failures and slow calls at `now` (read by a time window).
    pub(crate) fn tally(&self, now: u64) -> Tally {
        match self {
            RateWindow::Calls(w) => w.tally(),
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
    /// Successes skip the gate (it costs two read-modify-writes): a count window counts one
    /// in a word stamped with its generation, and a time window's stale one can only dilute
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

    /// The breaker leaves the closed state (transition lock held, after `seal`): a count
    /// window holds its calls until the next clear.
    pub(crate) fn freeze(&self) {
        if let RateWindow::Calls(w) = self {
            w.freeze();
        }
    }

    /// Empties the window for the closed state of `generation`. Called with the transition
    /// lock held, after `seal`.
    pub(crate) fn clear(&self, generation: u32) {
        match self {
            RateWindow::Calls(w) => w.clear(generation),
            RateWindow::Time(w) => w.clear(),
        }
    }
}
