//! Admission: whether a call may run, and its permit.

use super::inner::Inner;
use super::permit::{Kind, Permit, Ticket};
use crate::clock::nanos;
use crate::counters::Count;
use crate::error::{NO_RETRY, Refusal, RejectReason};
use crate::event::Reason;
use crate::state::{Places, State, Word};
use crate::sync::Ordering;
use crate::timer::RETRY_AT;

impl Inner {
    /// When a call admitted now starts, for a config that times its calls (else 0). Read once
    /// the checks that may refuse the call have passed, before a bulkhead place or a probe
    /// slot is taken: a refusal reads no clock, and a user clock that panics here leaves
    /// nothing taken that no permit will give back.
    #[inline]
    fn started(&self) -> u64 {
        if self.config.timed() {
            self.clock().precise()
        } else {
            0
        }
    }

    #[inline]
    fn permit(&self, generation: u32, kind: Kind, started: u64) -> Permit<'_> {
        Permit {
            inner: self,
            ticket: Ticket::new(generation, kind, started),
        }
    }

    /// Admission. PERF(`closed_ok/bb_call`): the path that matters most — a closed breaker
    /// with a plain config — is inlined into the caller (one load, two compares).
    /// PERF(`open_1t/bb_call_static`): so is the rejection of an open breaker whose timer will
    /// move it on (no clock to read): the same load, one bit test, the deadline's load and the
    /// rejection's count. Everything else is out of line.
    #[inline(always)]
    pub(super) fn acquire(&self) -> Result<Permit<'_>, Refusal> {
        // Acquire pairs with the Release store of a transition: whoever sees a state also sees
        // the data prepared for it (deadline, probe word, cleared window).
        let word = self.state.load(Ordering::Acquire);
        match self.admit_closed(word) {
            Some(permit) => Ok(permit),
            // Only an open word is ever timed (`Inner::change`).
            None if word.is_timed() => Err(self.reject_timed()),
            None => self.acquire_word(word),
        }
    }

    /// The permit of a closed breaker with a plain config, whose state word is `word`.
    #[inline(always)]
    pub(super) fn admit_closed(&self, word: Word) -> Option<Permit<'_>> {
        (word.state() == State::Closed && self.plain_acquire).then(|| Permit {
            inner: self,
            ticket: Ticket::closed(word),
        })
    }

    /// The rejection of a timed open breaker: a timer moves it on when the time is up, so no
    /// clock read. The retry word is the deadline, which `Rejected::retry_after` turns into the
    /// time left when asked.
    #[inline(always)]
    fn reject_timed(&self) -> Refusal {
        // Relaxed: the state word's Acquire load showed this opening (or a later one's
        // deadline is read, which is as good: the rejection is of that state).
        let until = self.open_until.load(Ordering::Relaxed);
        self.count(Count::Rejected);
        (RejectReason::Open.code() | RETRY_AT, until)
    }

    /// [`reject_timed`](Self::reject_timed) with the rejection counted by one call: what
    /// `Breaker::try_acquire_lean` inlines.
    #[inline(always)]
    pub(super) fn reject_timed_lean(&self) -> Refusal {
        let until = self.open_until.load(Ordering::Relaxed);
        self.count_rejected();
        (RejectReason::Open.code() | RETRY_AT, until)
    }

    #[inline(never)]
    fn count_rejected(&self) {
        self.count(Count::Rejected);
    }

    /// Admission by the state in `word`, when it is neither the plain closed one nor a timed open
    /// one (both answered inline by `acquire`); re-entered after a transition. The rejection of
    /// an open breaker on a clock without timers is answered here, in a frame of its own:
    /// inlining the other states' paths makes every such rejection pay for saving the registers
    /// they use, and for a jump table.
    #[inline(never)]
    pub(super) fn acquire_word(&self, word: Word) -> Result<Permit<'_>, Refusal> {
        if word.state() == State::Open {
            return self.acquire_open(word);
        }
        self.acquire_other(word)
    }

    #[inline(never)]
    pub(super) fn acquire_other(&self, word: Word) -> Result<Permit<'_>, Refusal> {
        let generation = word.generation();
        match word.state() {
            State::Closed => {
                let mut started = None;
                if let Some(max) = self.config.max_concurrent {
                    // Each admission is one compare-and-swap below the limit. Not an increment
                    // undone on refusal: a refused call's passing increment would refuse
                    // another call while a place is free.
                    //
                    // The count is of this generation's places. The first admission of a
                    // generation finds an older one's count and starts it over: every place
                    // taken before the last transition is free, even that of a permit that
                    // will never record. Release/Acquire: a count is stamped with a generation
                    // only by a thread that saw that generation's state word, so a thread that
                    // sees the stamp and admits again by the state sees that state too.
                    let mut cur = self.active.load(Ordering::Acquire);
                    loop {
                        let stamped = cur.generation();
                        let taken = if stamped == generation {
                            cur.taken()
                        } else if (generation.wrapping_sub(stamped) as i32) > 0 {
                            0 // an older generation's places: all free now
                        } else {
                            // A transition came between: admit by the state now.
                            return self.acquire_word(self.state.load(Ordering::Acquire));
                        };
                        if taken >= max {
                            return Err(self.reject(RejectReason::BulkheadFull, NO_RETRY));
                        }
                        started.get_or_insert_with(|| self.started());
                        match self.active.compare_exchange_weak(
                            cur,
                            Places::new(generation, taken + 1),
                            Ordering::Release,
                            Ordering::Acquire,
                        ) {
                            Ok(_) => break,
                            Err(actual) => cur = actual,
                        }
                    }
                }
                let started = started.unwrap_or_else(|| self.started());
                Ok(self.permit(generation, Kind::Closed, started))
            }
            State::Disabled => Ok(self.permit(generation, Kind::Disabled, 0)),
            State::ForcedOpen => Err(self.reject(RejectReason::ForcedOpen, NO_RETRY)),
            State::Open => self.acquire_open(word),
            State::HalfOpen => self.acquire_probe(generation, self.clock().coarse()),
        }
    }

    /// Whether the half-open round has run for `probe_timeout` at `now`. The round's time runs
    /// from entering half-open, not from the last admission: a second probe admitted late must
    /// not give a hung first one more time. Relaxed: the caller's Acquire load of the state or
    /// probe word showed this round, so this reads the time its transition stored, or a later
    /// one's (and then the transition that ends the round finds its generation gone).
    pub(super) fn round_timed_out(&self, now: u64) -> bool {
        let entered = self.state_since.load(Ordering::Relaxed);
        now.saturating_sub(entered) >= nanos(self.config.probe_timeout)
    }

    /// Notes `now` as when the half-open round of `generation` admitted its first probe,
    /// unless it has such a time already.
    fn note_round_start(&self, generation: u32, now: u64) {
        let mut start = self
            .extras()
            .round_start
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if start.is_none_or(|(g, _)| g != generation) {
            *start = Some((generation, now));
        }
    }

    /// Whether the half-open round of `generation` admitted its first probe `probe_timeout`
    /// or more before `now`. Counted from that probe, not from entering half-open: after a
    /// quiet spell with no call, the first probe's round starts with it.
    pub(super) fn probes_timed_out(&self, generation: u32, now: u64) -> bool {
        let start = *self
            .extras()
            .round_start
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        start.is_some_and(|(g, first)| {
            g == generation && now.saturating_sub(first) >= nanos(self.config.probe_timeout)
        })
    }

    /// Re-opens the breaker from the half-open round of `generation`, which ran past
    /// `probe_timeout` (whoever gets there first ends it).
    pub(super) fn end_timed_out_round(&self, generation: u32, now: u64) {
        self.transition(
            generation,
            &[State::HalfOpen],
            State::Open,
            Reason::ProbeTimeout,
            None,
            now,
        );
    }

    #[inline]
    pub(super) fn reject(&self, reason: RejectReason, retry_after_ns: u64) -> Refusal {
        let reason = reason.code();
        self.count(Count::Rejected);
        (reason, retry_after_ns)
    }

    #[inline]
    pub(super) fn acquire_open(&self, word: Word) -> Result<Permit<'_>, Refusal> {
        if word.is_timed() {
            // A timed word re-read after a transition (`acquire` answers the first one).
            return Err(self.reject_timed());
        }
        let until = self.open_until.load(Ordering::Relaxed);
        let now = self.clock().coarse();
        if now < until {
            let shown = self.report.shown(until).saturating_sub(now);
            return Err(self.reject(RejectReason::Open, shown));
        }
        self.open_elapsed(word.generation(), now)
    }

    #[cold]
    pub(super) fn open_elapsed(&self, generation: u32, now: u64) -> Result<Permit<'_>, Refusal> {
        if self.probe_limit() == 0 {
            // A budget of no probes: the breaker stays open, with no time to retry after.
            return Err(self.reject(RejectReason::Open, NO_RETRY));
        }
        self.transition(
            generation,
            &[State::Open],
            State::HalfOpen,
            Reason::OpenElapsed,
            None,
            now,
        );
        // Whoever won the transition, the breaker is now past `Open` (or changed by hand):
        // admit by what it is now.
        let word = self.state.load(Ordering::Acquire);
        match word.state() {
            State::HalfOpen => self.acquire_probe(word.generation(), now),
            _ => self.acquire_word(word),
        }
    }

    pub(super) fn acquire_probe(&self, generation: u32, now: u64) -> Result<Permit<'_>, Refusal> {
        let limit = self.probe_limit();
        let mut first_read = None;
        let mut cur = self.probe.load(Ordering::Acquire);
        loop {
            if cur.generation() != generation {
                // The round ended while we looked; admit by the state now.
                return self.acquire_word(self.state.load(Ordering::Acquire));
            }
            if cur.successes() >= self.config.successes {
                // The round has passed (see `close_passed_round`): closed, the call is admitted
                // by the state then.
                self.close_passed_round(generation, now);
                return self.acquire_word(self.state.load(Ordering::Acquire));
            }
            if cur.admitted() >= limit {
                if self.round_timed_out(now) {
                    self.end_timed_out_round(generation, now);
                    // The round is over, whoever ended it: answer as the breaker is now,
                    // which for an open one says when to retry.
                    return self.acquire_word(self.state.load(Ordering::Acquire));
                }
                return Err(self.reject(RejectReason::HalfOpenFull, NO_RETRY));
            }
            let started = *first_read.get_or_insert_with(|| self.started());
            match self.probe.compare_exchange_weak(
                cur,
                cur.admit(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.note_round_start(generation, now);
                    return Ok(self.permit(generation, Kind::Probe, started));
                }
                Err(actual) => cur = actual,
            }
        }
    }
}
