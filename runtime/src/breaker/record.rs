//! Recording: a finished call's outcome, judged by the policy of the state it was admitted in.

use core::fmt;
use std::sync::Arc;

use super::inner::Inner;
use super::permit::{Kind, Ticket};
use super::rejected::{CaughtDisplay, message};
use crate::clock::nanos;
use crate::counters::{Count, Slot};
use crate::event::Reason;
use crate::outcome::Outcome;
use crate::state::{State, Streak};
use crate::sync::Ordering;
use crate::window::RateWindow;

impl Inner {
    /// Records a finished call. The closed-state successes are inlined into the caller, and
    /// write nothing shared: a plain breaker's is one counter stripe write and one load of the
    /// streak, a count window's that needs no judgment one write and two loads.
    ///
    /// PERF(`closed_ok/bb_call`): takes the ticket's words as two scalars, not the permit by
    /// reference: a permit spilled across the user's call as two 8-byte stores and read back
    /// as one 16-byte copy stalls store forwarding, which costs more than the rest of a closed
    /// call.
    #[inline(always)]
    pub(super) fn record(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        cause: Option<&dyn fmt::Display>,
    ) {
        // PERF(`closed_ok/bb_call`): only closed successes are taken inline; anything larger
        // here goes past the inliner's budget and costs a call on every success (+1.5 ns).
        if ticket.kind() == Kind::Closed && matches!(outcome, Outcome::Success) {
            if self.plain_success {
                self.count(Count::Success);
                let cur = self.streak.load(Ordering::Relaxed);
                if !cur.is_empty() {
                    self.break_streak(ticket.generation(), cur);
                }
                return;
            }
            // PERF(`rate_count_100/bb_call`): a count window's success that needs no judgment
            // is its count and a load and a store of its thread's window word; a judgment
            // and a time window's success are out of line.
            if self.window_success
                && let Some(window) = &self.window
            {
                let slot = self.count(Count::Success);
                if let RateWindow::Calls(_) = &**window {
                    if window.record_success(self.clock(), slot, ticket.generation()) {
                        self.judge_success(window, ticket.generation());
                    }
                } else {
                    self.window_success_rest(window, ticket.generation(), slot);
                }
                return;
            }
        }
        self.record_any(ticket, outcome, cause, None);
    }

    /// [`record_window_success`](Self::record_window_success), out of line: see `record`.
    #[inline(never)]
    fn window_success_rest(&self, window: &RateWindow, generation: u32, slot: Slot) {
        self.record_window_success(window, generation, slot);
    }

    /// A closed-state success into a rate window: what `record_closed` does for it, inline,
    /// but for the time a time window dates it by (see `RateWindow::record_success`).
    #[inline]
    pub(super) fn record_window_success(&self, window: &RateWindow, generation: u32, slot: Slot) {
        if matches!(window, RateWindow::Time(_))
            && generation != self.state.load(Ordering::Relaxed).generation()
        {
            return; // stale: a time window leaves it out (a count window's words do)
        }
        if window.record_success(self.clock(), slot, generation) {
            self.judge_success(window, generation);
        }
    }

    /// Judges the rates after a success the window asked to be judged (it is short of
    /// `min_calls`, or a time window's bucket turned over). A stale success judges nothing:
    /// a judgment's trip would be refused anyway.
    #[cold]
    #[inline(never)]
    fn judge_success(&self, window: &RateWindow, generation: u32) {
        if generation != self.state.load(Ordering::Relaxed).generation() {
            return;
        }
        // A time window dates a judgment by the clock; a count window reads no time.
        let now = if window.needs_clock() {
            self.clock().coarse()
        } else {
            0 // read by `judge_rates`
        };
        self.judge_rates(window, generation, now, None);
    }

    /// Gives back the bulkhead place of a permit admitted in `generation`, if that generation's
    /// places are still counted: a transition since has freed them all.
    pub(super) fn release_place(&self, generation: u32) {
        let mut cur = self.active.load(Ordering::Relaxed);
        while cur.generation() == generation && cur.taken() != 0 {
            match self.active.compare_exchange_weak(
                cur,
                cur.released(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    #[cold]
    pub(super) fn break_streak(&self, generation: u32, mut cur: Streak) {
        // A failed CAS means a failure slipped in meanwhile: retry, so this success counts as
        // after it. Giving up would keep a streak that includes failures from before this
        // success, which no order of the calls gives (F, F ∥ S must leave 0 or 1, never 2).
        while cur.generation() == generation && !cur.is_empty() {
            match self.streak.compare_exchange_weak(
                cur,
                Streak::new(generation),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Records a call that ran past its timeout of `after` nanoseconds: a failure, counted
    /// among the timeouts too, whose latency is at least `after` (a timer that fired late
    /// makes it longer; a clock other than the timer's, such as the real one under tokio's
    /// paused time, may have seen less).
    #[cold]
    #[inline(never)]
    pub(super) fn record_timeout(&self, ticket: Ticket, after: u64, cause: &dyn fmt::Display) {
        self.record_any(ticket, Outcome::Failure, Some(cause), Some(after));
    }

    /// Counts a timeout, after its failure. Release: a reader that reads the timeouts first,
    /// with Acquire ([`Inner::timeouts`]), sees at least as many failures.
    #[cold]
    #[inline(never)]
    fn count_timeout(&self) {
        self.extras()
            .timeouts
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// A finished call's outcome, counted and judged; `timed_out` is the timeout of a call
    /// that ran past it, in nanoseconds (`None` from `record`).
    ///
    /// PERF(`closed_ok/bb_call`, `rate_count_100/bb_call`): out of line, so that the closed
    /// successes inlined into `record` save no more registers than they use.
    /// PERF(`closed_10pct/bb_call`, `latency/bb_latency`): one body for timeouts too, so that
    /// the functions inlined here (`timed`, `record_closed`, `record_probe`, the window's
    /// `record`) keep one caller and stay inlined: two copies of this body, one per caller,
    /// made the compiler call them.
    #[inline(never)]
    pub(super) fn record_any(
        &self,
        ticket: Ticket,
        outcome: Outcome,
        cause: Option<&dyn fmt::Display>,
        timed_out: Option<u64>,
    ) {
        // A classifier's reason is the failure's message, unless the call's own error is.
        let reason = outcome.reason();
        let cause = cause.or(reason.as_ref().map(|r| r as &dyn fmt::Display));
        let outcome = outcome.verdict();
        if ticket.kind() == Kind::Disabled {
            // Counted in the totals, judged by nothing: a disabled breaker records no verdict.
            self.count(match outcome {
                Outcome::Success => Count::Success,
                Outcome::Ignored => Count::Ignored,
                Outcome::Failure
                | Outcome::TripFor(_)
                | Outcome::FailureWith(_)
                | Outcome::TripForWith(..) => Count::Failure,
            });
            if timed_out.is_some() {
                self.count_timeout();
            }
            return;
        }
        if ticket.kind() == Kind::Closed && self.config.max_concurrent.is_some() {
            self.release_place(ticket.generation());
        }
        // Counted before the duration is read: a user clock that panics there loses no call.
        let slot = match outcome {
            Outcome::Success => self.count(Count::Success),
            Outcome::Failure
            | Outcome::TripFor(_)
            | Outcome::FailureWith(_)
            | Outcome::TripForWith(..) => {
                // Counted first: the log formats the user's `Display`, which may panic (caught
                // by `CaughtDisplay`, but counting must not depend on that).
                let slot = self.count(Count::Failure);
                if timed_out.is_some() {
                    self.count_timeout();
                }
                tracing::debug!(target: "breakerbox", name = %self.name(), key = self.key(), cause = cause.map(|c| tracing::field::display(CaughtDisplay(c))), "call failed");
                slot
            }
            Outcome::Ignored => self.count(Count::Ignored),
        };
        let slow = self.config.timed()
            && !matches!(outcome, Outcome::Ignored)
            && self.timed(ticket.started, timed_out.unwrap_or(0));
        if slow {
            self.count(Count::Slow);
        }
        if let Outcome::TripFor(d) = outcome {
            // The service said how long to stay away: honour it whatever the generation.
            let now = self.clock().coarse();
            let from = [State::Closed, State::Open, State::HalfOpen];
            self.transition_any(
                &from,
                State::Open,
                Reason::TripFor(d),
                cause,
                now,
                Some(d),
                None,
            );
            return;
        }
        // A slow call counts as a failure unless slow calls trip by their own rate. (Discriminant
        // tests, here and below: `verdict()` left no reason, and `==` would compare verdicts.)
        let failed =
            matches!(outcome, Outcome::Failure) || (slow && self.config.slow_rate.is_none());
        match ticket.kind() {
            Kind::Closed => {
                self.record_closed(ticket.generation(), outcome, failed, slow, cause, slot);
            }
            Kind::Probe => {
                self.record_probe(ticket.generation(), outcome, failed || slow, cause);
            }
            Kind::Disabled => {}
        }
    }

    /// The one place a call's duration is read: into the latency histogram, and against the
    /// `slow` threshold (whether it was slow is the answer). Only for a config that times
    /// calls (`Config::timed`), whose permit read the clock at admission. A call known to
    /// have run at least `at_least` nanoseconds (a timeout's) took no less.
    ///
    fn timed(&self, started: u64, at_least: u64) -> bool {
        let now = self.clock().precise();
        let took = now.saturating_sub(started).max(at_least);
        self.extras().latency.get_or_default().record(took, now);
        self.config
            .slow
            .is_some_and(|threshold| took >= nanos(threshold))
    }

    pub(super) fn record_closed(
        &self,
        generation: u32,
        outcome: Outcome,
        failed: bool,
        slow: bool,
        cause: Option<&dyn fmt::Display>,
        slot: Slot,
    ) {
        if matches!(outcome, Outcome::Ignored) {
            return;
        }
        if let Some(window) = &self.window {
            let now = if window.needs_clock() {
                self.clock().coarse()
            } else {
                0
            };
            // A failure or slow call goes through the window's gate, which a close cannot clear
            // under it; a success is only checked (see `RateWindow::enter`).
            let against = failed || slow;
            if against {
                if !window.enter(generation) {
                    return; // stale: admitted before the last transition
                }
            } else if generation != self.state.load(Ordering::Relaxed).generation() {
                return; // stale
            }
            let judge = window.record(failed, slow, now, slot, generation);
            if against {
                // Left before judging: a trip takes the transition lock, under which a seal
                // waits for this record.
                window.leave();
            }
            if judge {
                self.judge_rates(window, generation, now, cause);
            }
            if self.config.failure_rate.is_some() {
                return;
            }
        }
        // Consecutive failures.
        let cur = self.streak.load(Ordering::Relaxed);
        if !failed {
            // Reads and goes: no write unless a streak is to be broken.
            if !cur.is_empty() {
                self.break_streak(generation, cur);
            }
            return;
        }
        self.record_streak_failure(generation, cur, cause);
    }

    #[cold]
    pub(super) fn record_streak_failure(
        &self,
        generation: u32,
        mut cur: Streak,
        cause: Option<&dyn fmt::Display>,
    ) {
        if let Some(within) = self.config.failures_within {
            return self.record_within_failure(generation, nanos(within), cause);
        }
        loop {
            if cur.generation() != generation {
                return; // stale
            }
            let n = cur.failures().saturating_add(1);
            // The trip's time is read before the failure is counted: a user clock that panics
            // leaves the streak one short, so the next failure trips, not never.
            let trips = (n >= self.config.failures).then(|| self.clock().coarse());
            match self.streak.compare_exchange_weak(
                cur,
                cur.with_failures(n),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if let Some(now) = trips {
                        self.trip_streak(generation, n, cause, now);
                    }
                    return;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// A failure under `failures_within`: the streak counts only failures within `within` of
    /// its first, so a streak and its start must be seen together.
    ///
    /// The streak word's low half is then a tag and the count (see [`Streak`]). A failure that
    /// finds no streak stores the start in `mark` first (a compare-and-swap, so a failure that
    /// looked before another started one does not overwrite its start), then publishes the
    /// streak with a fresh tag (Release); a failure that sees the streak (Acquire) so sees its
    /// start, or one stored a moment later by a failure whose start lost the race. An expired
    /// streak is ended first, then started again as from none; the tag makes that end fail
    /// against a streak started meanwhile (`(g, 1)` again, but not the same streak), which a
    /// failure that read the old start would otherwise end.
    ///
    /// Storing the start after the streak would let a second failure at the same moment read
    /// the previous streak's start, find it expired, and start over: two failures in a row
    /// would not trip `failures = 2`.
    #[cold]
    pub(super) fn record_within_failure(
        &self,
        generation: u32,
        within: u64,
        cause: Option<&dyn fmt::Display>,
    ) {
        let now = self.clock().coarse();
        let limit = self.config.failures.min(Streak::MAX_WITHIN);
        let mut cur = self.streak.load(Ordering::Acquire);
        loop {
            if cur.generation() != generation {
                return; // stale
            }
            if cur.within_failures() != 0 {
                let start = self.mark.load(Ordering::Relaxed);
                if now.saturating_sub(start) <= within {
                    let next = cur.within_bumped();
                    match self.streak.compare_exchange(
                        cur,
                        next,
                        Ordering::Relaxed,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            let n = next.within_failures();
                            if n >= limit {
                                self.trip_streak(generation, n, cause, now);
                            }
                            return;
                        }
                        Err(actual) => {
                            cur = actual;
                            continue;
                        }
                    }
                }
                // Too old: this failure starts a new streak, once the old one is ended.
                let none = Streak::new(generation);
                match self
                    .streak
                    .compare_exchange(cur, none, Ordering::Relaxed, Ordering::Acquire)
                {
                    Ok(_) => cur = none,
                    Err(actual) => {
                        cur = actual;
                        continue;
                    }
                }
            }
            // No streak: its start first, then the streak.
            let mark = self.mark.load(Ordering::Relaxed);
            if self
                .mark
                .compare_exchange(mark, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                // Another failure is starting one: count by what it made.
                cur = self.streak.load(Ordering::Acquire);
                continue;
            }
            let number = self.starts.fetch_add(1, Ordering::Relaxed);
            match self.streak.compare_exchange(
                cur,
                Streak::within_started(generation, number),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if limit <= 1 {
                        self.trip_streak(generation, 1, cause, now);
                    }
                    return;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    pub(super) fn trip_streak(
        &self,
        generation: u32,
        n: u32,
        cause: Option<&dyn fmt::Display>,
        now: u64,
    ) {
        self.transition(
            generation,
            &[State::Closed],
            State::Open,
            Reason::Failures(n),
            cause,
            now,
        );
    }

    #[cold]
    pub(super) fn judge_rates(
        &self,
        window: &RateWindow,
        generation: u32,
        now: u64,
        cause: Option<&dyn fmt::Display>,
    ) {
        let t = window.tally(now);
        let short = t.calls < u64::from(self.config.min_calls);
        if short || t.calls == 0 {
            window.judged(short, generation);
            if let Some(cause) = cause {
                // A success may trip the window later, when it reaches `min_calls`: keep what
                // to name then. Formatted only while the window is short, so at most
                // `min_calls` times per count window.
                let text = message(cause);
                *self
                    .extras()
                    .behind
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some((generation, text));
            }
            return;
        }
        // At most 100: a tally read while calls expire may hold a failure whose call it missed.
        let pct = |n: u64| (n.min(t.calls) * 100 / t.calls) as u8;
        let reason = match (self.config.failure_rate, self.config.slow_rate) {
            (Some(limit), _) if pct(t.failures) >= limit => Reason::FailureRate(pct(t.failures)),
            (_, Some(limit)) if pct(t.slow) >= limit => Reason::SlowRate(pct(t.slow)),
            _ => return window.judged(false, generation),
        };
        let bad = match reason {
            Reason::FailureRate(_) => t.failures,
            _ => t.slow,
        };
        *self
            .extras()
            .tally
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some((generation, bad.min(t.calls), t.calls));
        // A count window records and judges without the time (a judgment of every success
        // while the window is short reads no clock); a transition needs it. The window is told
        // it is judged only once the time is read: should a user clock panic, the window stays
        // short, and the next success judges it again and trips.
        let now = if window.needs_clock() {
            now
        } else {
            self.clock().coarse()
        };
        window.judged(false, generation);
        self.transition(
            generation,
            &[State::Closed],
            State::Open,
            reason,
            cause,
            now,
        );
    }

    /// For a failure-rate trip by a success: the last failure of generation `expect` kept by
    /// `judge_rates`.
    pub(super) fn failure_behind(&self, expect: Option<u32>) -> Option<Arc<str>> {
        let extras = self.extras.get()?;
        let behind = extras.behind.lock().unwrap_or_else(|e| e.into_inner());
        match (&*behind, expect) {
            (Some((generation, text)), Some(expect)) if *generation == expect => Some(text.clone()),
            _ => None,
        }
    }

    pub(super) fn record_probe(
        &self,
        generation: u32,
        outcome: Outcome,
        failed: bool,
        cause: Option<&dyn fmt::Display>,
    ) {
        let now = self.clock().coarse();
        if failed {
            self.transition(
                generation,
                &[State::HalfOpen],
                State::Open,
                Reason::ProbeFailed,
                cause,
                now,
            );
            return;
        }
        if matches!(outcome, Outcome::Ignored) && self.probes_timed_out(generation, now) {
            // An ignored or cancelled probe frees its slot only for `probe_timeout` after the
            // round's first probe: probes cancelled one after another (a timeout around the
            // breaker, over a hung service) would otherwise keep the round, and the breaker,
            // half-open for good.
            return self.end_timed_out_round(generation, now);
        }
        let mut cur = self.probe.load(Ordering::Acquire);
        loop {
            if cur.generation() != generation {
                return; // the round is over
            }
            let next = match outcome {
                Outcome::Ignored => cur.free(), // frees the slot
                _ => cur.succeed(),
            };
            match self
                .probe
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        let successes = cur.successes() + 1;
        if matches!(outcome, Outcome::Success) && successes >= self.config.successes {
            self.close_passed_round(generation, now);
        }
    }

    /// Closes the half-open round of `generation`, which has its `successes`: from the success
    /// that reached them, or from an admission that found them reached (a reconfigure lowered
    /// `successes` to what the round had). Whoever gets there first closes it.
    pub(super) fn close_passed_round(&self, generation: u32, now: u64) {
        self.transition(
            generation,
            &[State::HalfOpen],
            State::Closed,
            Reason::ProbesSucceeded,
            None,
            now,
        );
    }
}
