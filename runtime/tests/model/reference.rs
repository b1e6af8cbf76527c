//! The reference model: the breaker's rules as a plain single-threaded state machine.

use std::collections::VecDeque;
use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, ManualClock, Outcome, RejectReason, State, Window};
use proptest::prelude::*;

#[derive(Clone, Copy, Debug)]
pub enum Win {
    Calls(usize),
    Time(Duration),
}

#[derive(Clone, Debug)]
pub enum Policy {
    Consecutive {
        failures: u32,
        within: Option<Duration>,
    },
    /// A failure rate, a slow-call rate, or both, over one window. Without a failure rate,
    /// the consecutive policy (default 5) runs beside the slow-call rate.
    Rate {
        window: Win,
        min_calls: usize,
        rate: Option<u64>,
        slow_rate: Option<u64>,
    },
}

#[derive(Clone, Debug)]
pub struct Setup {
    pub policy: Policy,
    pub slow: Option<Duration>,
    pub open_for: Duration,
    pub backoff: f64,
    pub max_open_for: Duration,
    pub half_open_calls: u32,
    pub successes: u32,
    pub probe_timeout: Duration,
    pub max_concurrent: Option<u32>,
}

impl Setup {
    pub fn config(&self, clock: &ManualClock) -> Config {
        let mut b = Config::builder()
            .open_for(self.open_for)
            .backoff(self.backoff)
            .max_open_for(self.max_open_for)
            .half_open_calls(self.half_open_calls)
            .successes(self.successes)
            .probe_timeout(self.probe_timeout)
            .clock(clock.clone());
        if let Some(s) = self.slow {
            b = b.slow(s);
        }
        if let Some(m) = self.max_concurrent {
            b = b.max_concurrent(m);
        }
        let b = match self.policy {
            Policy::Consecutive { failures, within } => {
                let b = b.failures(failures);
                match within {
                    Some(w) => b.failures_within(w),
                    None => b,
                }
            }
            Policy::Rate {
                window,
                min_calls,
                rate,
                slow_rate,
            } => {
                let mut b = b
                    .window(match window {
                        Win::Calls(n) => Window::Calls(n as u32),
                        Win::Time(d) => Window::Time(d),
                    })
                    .min_calls(min_calls as u32);
                if let Some(r) = rate {
                    b = b.failure_rate(r as u8);
                }
                if let Some(r) = slow_rate {
                    b = b.slow_rate(r as u8);
                }
                b
            }
        };
        b.build().expect("valid config")
    }

    pub fn failures(&self) -> Option<(u32, Option<Duration>)> {
        match self.policy {
            Policy::Consecutive { failures, within } => Some((failures, within)),
            Policy::Rate { rate: None, .. } => Some((5, None)),
            Policy::Rate { .. } => None,
        }
    }

    pub fn slow_rate(&self) -> Option<u64> {
        match self.policy {
            Policy::Rate { slow_rate, .. } => slow_rate,
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Closed,
    Probe,
    Disabled,
}

#[derive(Clone, Copy, Debug)]
pub struct ModelPermit {
    pub generation: u64,
    pub kind: Kind,
    pub started: Duration,
}

/// One call in a rate window.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub at: Duration,
    pub failed: bool,
    pub slow: bool,
}

#[derive(Debug)]
pub struct Model {
    pub setup: Setup,
    pub now: Duration,
    pub state: State,
    pub generation: u64,
    pub since: Duration,
    // Closed.
    pub streak: u32,
    pub streak_start: Duration,
    pub window: VecDeque<Call>,
    pub active: u32,
    // Open.
    pub open_until: Duration,
    pub reopens: i32,
    // Half-open.
    pub admitted: u32,
    pub probe_successes: u32,
    pub progress: Duration,
    /// When the half-open round admitted its first probe.
    pub round_start: Option<Duration>,
    // Totals.
    pub successes: u64,
    pub failures: u64,
    pub ignored: u64,
    pub rejected: u64,
    pub slow: u64,
    pub times_opened: u64,
}

/// The bucket a time falls in: `floor(t / width)`, as the breaker numbers them, by multiplying
/// by `2^64 / width` rounded up and keeping the high half (no division on the call path). Far
/// from the clock's origin an edge so comes a few nanoseconds early (about 1 ns per
/// `2^64 / width` ns of clock), which the model must follow to agree at ±1 ns of an edge.
pub fn bucket(t: Duration, width: u64) -> u128 {
    (t.as_nanos() * (1u128 << 64).div_ceil(u128::from(width))) >> 64
}

impl Model {
    pub fn new(setup: Setup) -> Model {
        Model {
            setup,
            now: Duration::ZERO,
            state: State::Closed,
            generation: 0,
            since: Duration::ZERO,
            streak: 0,
            streak_start: Duration::ZERO,
            window: VecDeque::new(),
            active: 0,
            open_until: Duration::ZERO,
            reopens: 0,
            admitted: 0,
            probe_successes: 0,
            progress: Duration::ZERO,
            round_start: None,
            successes: 0,
            failures: 0,
            ignored: 0,
            rejected: 0,
            slow: 0,
            times_opened: 0,
        }
    }

    /// `open_for × backoff^reopens`, capped; the same arithmetic the breaker documents.
    pub fn next_open_for(&mut self) -> Duration {
        let s = &self.setup;
        let secs = (s.open_for.as_secs_f64() * s.backoff.powi(self.reopens))
            .min(s.max_open_for.as_secs_f64());
        self.reopens += 1;
        Duration::try_from_secs_f64(secs)
            .unwrap_or(s.max_open_for)
            .max(Duration::from_nanos(1))
    }

    pub fn go(&mut self, to: State, open_for: Option<Duration>) {
        match to {
            State::Open => {
                let d = open_for.unwrap_or_else(|| self.next_open_for());
                self.open_until = self.now.saturating_add(d);
                if self.state != State::Open {
                    self.times_opened += 1;
                }
            }
            State::HalfOpen => {
                self.admitted = 0;
                self.probe_successes = 0;
                self.progress = self.now;
                self.round_start = None;
            }
            State::Closed => {
                self.window.clear();
                self.reopens = 0;
            }
            _ => {}
        }
        self.streak = 0;
        // Every transition frees every bulkhead place.
        self.active = 0;
        self.state = to;
        self.generation += 1;
        self.since = self.now;
    }

    pub fn acquire(&mut self) -> Result<ModelPermit, (RejectReason, Option<Duration>)> {
        let admit = |m: &Model, kind| {
            Ok(ModelPermit {
                generation: m.generation,
                kind,
                started: m.now,
            })
        };
        match self.state {
            State::Closed => {
                if let Some(max) = self.setup.max_concurrent {
                    if self.active >= max {
                        self.rejected += 1;
                        return Err((RejectReason::BulkheadFull, None));
                    }
                    self.active += 1;
                }
                admit(self, Kind::Closed)
            }
            State::Disabled => admit(self, Kind::Disabled),
            State::ForcedOpen => {
                self.rejected += 1;
                Err((RejectReason::ForcedOpen, None))
            }
            State::Open if self.now < self.open_until => {
                self.rejected += 1;
                Err((RejectReason::Open, Some(self.open_until - self.now)))
            }
            State::Open => {
                self.go(State::HalfOpen, None);
                self.acquire()
            }
            State::HalfOpen => {
                if self.admitted < self.setup.half_open_calls {
                    self.admitted += 1;
                    self.round_start.get_or_insert(self.now);
                    return admit(self, Kind::Probe);
                }
                if self.now - self.progress >= self.setup.probe_timeout {
                    // The round is over: the call is answered as the breaker is now, open.
                    self.go(State::Open, None);
                    return self.acquire();
                }
                self.rejected += 1;
                Err((RejectReason::HalfOpenFull, None))
            }
            _ => unreachable!(),
        }
    }

    /// The calls of the window that count now.
    pub fn live(&self) -> Vec<Call> {
        match self.setup.policy {
            Policy::Rate {
                window: Win::Time(span),
                ..
            } => {
                // Ten buckets of span/10; live: the current one and the nine before it.
                let width = (span.as_nanos() / 10).max(1) as u64;
                let bucket = |t: Duration| bucket(t, width);
                let now = bucket(self.now);
                self.window
                    .iter()
                    .filter(|c| now - bucket(c.at) < 10)
                    .copied()
                    .collect()
            }
            _ => self.window.iter().copied().collect(),
        }
    }

    pub fn record(&mut self, p: ModelPermit, outcome: Outcome) {
        if p.kind == Kind::Disabled {
            // Counted, judged by nothing.
            match outcome {
                Outcome::Success => self.successes += 1,
                Outcome::Ignored => self.ignored += 1,
                _ => self.failures += 1,
            }
            return;
        }
        if p.kind == Kind::Closed
            && self.setup.max_concurrent.is_some()
            && p.generation == self.generation
        {
            self.active -= 1;
        }
        let slow = match self.setup.slow {
            Some(t) => outcome != Outcome::Ignored && self.now - p.started >= t,
            None => false,
        };
        if slow {
            self.slow += 1;
        }
        match outcome {
            Outcome::Success => self.successes += 1,
            Outcome::Ignored => self.ignored += 1,
            _ => self.failures += 1,
        }
        // Whether the permit belongs to the state the breaker is in now.
        let current = p.generation == self.generation;
        if let Outcome::TripFor(d) = outcome {
            if matches!(self.state, State::Closed | State::Open | State::HalfOpen) {
                self.go(State::Open, Some(d));
            }
            return;
        }
        // A slow call is a failure, unless slow calls have a rate of their own.
        let failed = outcome == Outcome::Failure || (slow && self.setup.slow_rate().is_none());
        match p.kind {
            Kind::Closed if current && outcome != Outcome::Ignored => {
                self.record_closed(failed, slow)
            }
            Kind::Probe if current => {
                if failed || slow {
                    self.go(State::Open, None);
                    return;
                }
                if outcome == Outcome::Ignored {
                    // Frees its slot for `probe_timeout` after the round's first probe;
                    // after, it ends the round.
                    if self
                        .round_start
                        .is_some_and(|t| self.now - t >= self.setup.probe_timeout)
                    {
                        self.go(State::Open, None);
                        return;
                    }
                    self.admitted -= 1;
                } else {
                    self.probe_successes += 1;
                    if self.probe_successes >= self.setup.successes {
                        self.go(State::Closed, None);
                    }
                }
            }
            _ => {} // stale, or ignored while closed
        }
    }

    pub fn record_closed(&mut self, failed: bool, slow: bool) {
        if let Policy::Rate {
            window,
            min_calls,
            rate,
            slow_rate,
        } = self.setup.policy
        {
            if let Win::Calls(size) = window
                && self.window.len() == size
            {
                self.window.pop_front();
            }
            self.window.push_back(Call {
                at: self.now,
                failed,
                slow,
            });
            // Judged after every call.
            let live = self.live();
            let calls = live.len() as u64;
            let pct = |n: usize| n as u64 * 100 / calls;
            if calls >= min_calls as u64 {
                let failed = pct(live.iter().filter(|c| c.failed).count());
                let slow = pct(live.iter().filter(|c| c.slow).count());
                if rate.is_some_and(|r| failed >= r) || slow_rate.is_some_and(|r| slow >= r) {
                    self.go(State::Open, None);
                    return;
                }
            }
        }
        let Some((failures, within)) = self.setup.failures() else {
            return;
        };
        if !failed {
            self.streak = 0;
            return;
        }
        self.streak += 1;
        if let Some(within) = within
            && (self.streak == 1 || self.now - self.streak_start > within)
        {
            self.streak = 1;
        }
        if self.streak == 1 {
            self.streak_start = self.now;
        }
        if self.streak >= failures {
            self.go(State::Open, None);
        }
    }

    pub fn manual(&mut self, op: &Manual) {
        match *op {
            Manual::ForceOpen => self.go(State::ForcedOpen, None),
            Manual::Disable => self.go(State::Disabled, None),
            Manual::Reset => self.go(State::Closed, None),
            Manual::TripFor(d) => self.go(State::Open, Some(d)),
        }
    }

    pub fn check(&self, b: &Breaker) -> Result<(), TestCaseError> {
        let m = b.metrics();
        prop_assert_eq!(m.state, self.state);
        prop_assert_eq!(b.state(), self.state);
        prop_assert_eq!(m.time_in_state, self.now - self.since);
        prop_assert_eq!(
            (m.successes, m.failures, m.ignored, m.rejected, m.slow),
            (
                self.successes,
                self.failures,
                self.ignored,
                self.rejected,
                self.slow
            )
        );
        prop_assert_eq!(
            m.calls,
            self.successes + self.failures + self.ignored + self.rejected
        );
        prop_assert_eq!(m.times_opened, self.times_opened);
        let open = self.state == State::Open;
        prop_assert_eq!(
            m.retry_after,
            open.then(|| self.open_until.saturating_sub(self.now))
        );
        prop_assert_eq!(
            m.consecutive_failures,
            if self.state == State::Closed {
                u64::from(self.streak)
            } else {
                0
            }
        );
        prop_assert_eq!(
            m.consecutive_successes,
            if self.state == State::HalfOpen {
                u64::from(self.probe_successes)
            } else {
                0
            }
        );
        if let Policy::Rate { .. } = self.setup.policy {
            let live = self.live();
            let calls = live.len() as u64;
            prop_assert_eq!(m.window_calls, calls);
            let rate = |n: usize| (calls > 0).then(|| n as f64 * 100.0 / calls as f64);
            prop_assert_eq!(
                m.failure_rate,
                rate(live.iter().filter(|c| c.failed).count())
            );
            prop_assert_eq!(m.slow_rate, rate(live.iter().filter(|c| c.slow).count()));
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub enum Manual {
    ForceOpen,
    Disable,
    Reset,
    TripFor(Duration),
}
