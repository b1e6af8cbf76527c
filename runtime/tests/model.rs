//! A reference model of the breaker — a plain single-threaded state machine written for
//! clarity, not speed — checked against the real `Breaker` with proptest on random sequences
//! of calls, outcomes, held permits, panics, drops, clock advances and manual control.
//!
//! After every step the two must agree on the admission decision, the state and every number
//! in `metrics()`.
//!
//! The model says what the rules are, not how the breaker implements them: a rate window is a
//! list of calls, judged after every call (the breaker judges only when the rate may have
//! risen); a time window is the calls of the last ten buckets.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Config, ManualClock, Outcome, Permit, RejectReason, State, Window,
};
use proptest::prelude::*;

// ---------------------------------------------------------------- the model

#[derive(Clone, Copy, Debug)]
enum Win {
    Calls(usize),
    Time(Duration),
}

#[derive(Clone, Debug)]
enum Policy {
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
struct Setup {
    policy: Policy,
    slow: Option<Duration>,
    open_for: Duration,
    backoff: f64,
    max_open_for: Duration,
    half_open_calls: u32,
    successes: u32,
    probe_timeout: Duration,
    max_concurrent: Option<u32>,
}

impl Setup {
    fn config(&self, clock: &ManualClock) -> Config {
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

    fn failures(&self) -> Option<(u32, Option<Duration>)> {
        match self.policy {
            Policy::Consecutive { failures, within } => Some((failures, within)),
            Policy::Rate { rate: None, .. } => Some((5, None)),
            Policy::Rate { .. } => None,
        }
    }

    fn slow_rate(&self) -> Option<u64> {
        match self.policy {
            Policy::Rate { slow_rate, .. } => slow_rate,
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Closed,
    Probe,
    Disabled,
}

#[derive(Clone, Copy, Debug)]
struct ModelPermit {
    generation: u64,
    kind: Kind,
    started: Duration,
}

/// One call in a rate window.
#[derive(Clone, Copy, Debug)]
struct Call {
    at: Duration,
    failed: bool,
    slow: bool,
}

#[derive(Debug)]
struct Model {
    setup: Setup,
    now: Duration,
    state: State,
    generation: u64,
    since: Duration,
    // Closed.
    streak: u32,
    streak_start: Duration,
    window: VecDeque<Call>,
    active: u32,
    // Open.
    open_until: Duration,
    reopens: i32,
    // Half-open.
    admitted: u32,
    probe_successes: u32,
    progress: Duration,
    // Totals.
    successes: u64,
    failures: u64,
    ignored: u64,
    rejected: u64,
    slow: u64,
    times_opened: u64,
}

/// The bucket a time falls in: `floor(t / width)`, as the breaker numbers them, by multiplying
/// by `2^64 / width` rounded up and keeping the high half (no division on the call path). Far
/// from the clock's origin an edge so comes a few nanoseconds early (about 1 ns per
/// `2^64 / width` ns of clock), which the model must follow to agree at ±1 ns of an edge.
fn bucket(t: Duration, width: u64) -> u128 {
    (t.as_nanos() * (1u128 << 64).div_ceil(u128::from(width))) >> 64
}

impl Model {
    fn new(setup: Setup) -> Model {
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
            successes: 0,
            failures: 0,
            ignored: 0,
            rejected: 0,
            slow: 0,
            times_opened: 0,
        }
    }

    /// `open_for × backoff^reopens`, capped; the same arithmetic the breaker documents.
    fn next_open_for(&mut self) -> Duration {
        let s = &self.setup;
        let secs = (s.open_for.as_secs_f64() * s.backoff.powi(self.reopens))
            .min(s.max_open_for.as_secs_f64());
        self.reopens += 1;
        Duration::try_from_secs_f64(secs)
            .unwrap_or(s.max_open_for)
            .max(Duration::from_nanos(1))
    }

    fn go(&mut self, to: State, open_for: Option<Duration>) {
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

    fn acquire(&mut self) -> Result<ModelPermit, (RejectReason, Option<Duration>)> {
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
    fn live(&self) -> Vec<Call> {
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

    fn record(&mut self, p: ModelPermit, outcome: Outcome) {
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

    fn record_closed(&mut self, failed: bool, slow: bool) {
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

    fn manual(&mut self, op: &Manual) {
        match *op {
            Manual::ForceOpen => self.go(State::ForcedOpen, None),
            Manual::Disable => self.go(State::Disabled, None),
            Manual::Reset => self.go(State::Closed, None),
            Manual::TripFor(d) => self.go(State::Open, Some(d)),
        }
    }

    fn check(&self, b: &Breaker) -> Result<(), TestCaseError> {
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

// ---------------------------------------------------------------- operations

#[derive(Clone, Debug)]
enum Manual {
    ForceOpen,
    Disable,
    Reset,
    TripFor(Duration),
}

#[derive(Clone, Debug)]
enum Op {
    /// Acquire and record at once.
    Call(Outcome),
    /// Acquire, let the clock run the `slow` threshold plus `delta` ns, record.
    SlowCall(Outcome, i8),
    /// Acquire and keep the permit.
    Hold,
    /// Record a held permit (index modulo the number held).
    Record(usize, Outcome),
    /// Drop a held permit while panicking.
    Panic(usize),
    /// Drop a held permit without a verdict.
    Drop(usize),
    /// Acquire inside a closure that panics.
    CallPanics,
    /// Move the clock forward.
    Advance(Duration),
    /// Move the clock to the open deadline, or to the probe timeout, plus `delta` ns.
    ToDeadline(i8),
    /// Move the clock to the next edge of a time window's bucket, plus `delta` ns.
    ToBucketEdge(i8),
    Manual(Manual),
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        6 => Just(Outcome::Success),
        6 => Just(Outcome::Failure),
        2 => Just(Outcome::Ignored),
        1 => (1u64..3000).prop_map(|ms| Outcome::TripFor(Duration::from_millis(ms))),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => outcome().prop_map(Op::Call),
        4 => (outcome(), -1i8..=1).prop_map(|(o, d)| Op::SlowCall(o, d)),
        4 => Just(Op::Hold),
        4 => (any::<usize>(), outcome()).prop_map(|(i, o)| Op::Record(i, o)),
        1 => any::<usize>().prop_map(Op::Panic),
        1 => any::<usize>().prop_map(Op::Drop),
        1 => Just(Op::CallPanics),
        4 => prop_oneof![
            Just(Duration::from_nanos(1)),
            (1u64..5000).prop_map(Duration::from_millis),
        ]
        .prop_map(Op::Advance),
        3 => (-1i8..=1).prop_map(Op::ToDeadline),
        2 => (-1i8..=1).prop_map(Op::ToBucketEdge),
        1 => prop_oneof![
            Just(Manual::ForceOpen),
            Just(Manual::Disable),
            Just(Manual::Reset),
            (1u64..3000).prop_map(|ms| Manual::TripFor(Duration::from_millis(ms))),
        ]
        .prop_map(Op::Manual),
    ]
}

fn common(
    policy: impl Strategy<Value = Policy>,
    slow: impl Strategy<Value = Option<Duration>>,
) -> impl Strategy<Value = Setup> {
    (
        (policy, slow),
        1u64..3000,
        prop_oneof![Just(1.0), Just(2.0), Just(1.5)],
        1u64..4,
        (1u32..4, 0u32..3),
        1u64..5000,
        prop::option::weighted(0.3, 1u32..4),
    )
        .prop_map(
            |(
                (policy, slow),
                open_ms,
                backoff,
                cap,
                (half_open_calls, extra),
                timeout_ms,
                max_concurrent,
            )| {
                let open_for = Duration::from_millis(open_ms);
                Setup {
                    policy,
                    slow,
                    open_for,
                    backoff,
                    max_open_for: open_for * (cap as u32) * 2,
                    half_open_calls: half_open_calls + extra,
                    successes: half_open_calls,
                    probe_timeout: Duration::from_millis(timeout_ms),
                    max_concurrent,
                }
            },
        )
}

fn slow_threshold() -> impl Strategy<Value = Duration> {
    (1u64..2000).prop_map(Duration::from_millis)
}

fn consecutive() -> impl Strategy<Value = Setup> {
    common(
        (
            1u32..6,
            prop::option::of((1u64..8000).prop_map(Duration::from_millis)),
        )
            .prop_map(|(failures, within)| Policy::Consecutive { failures, within }),
        prop::option::of(slow_threshold()),
    )
}

fn count_rate() -> impl Strategy<Value = Setup> {
    common(
        (1usize..12, 1u64..=100)
            .prop_flat_map(|(size, rate)| (Just(size), 1..=size, Just(rate)))
            .prop_map(|(size, min_calls, rate)| Policy::Rate {
                window: Win::Calls(size),
                min_calls,
                rate: Some(rate),
                slow_rate: None,
            }),
        prop::option::of(slow_threshold()),
    )
}

fn time_rate() -> impl Strategy<Value = Setup> {
    common(
        (10u64..6000, 1usize..12, 1u64..=100).prop_map(|(span_ms, min_calls, rate)| Policy::Rate {
            window: Win::Time(Duration::from_millis(span_ms)),
            min_calls,
            rate: Some(rate),
            slow_rate: None,
        }),
        prop::option::of(slow_threshold()),
    )
}

fn slow_rate() -> impl Strategy<Value = Setup> {
    common(
        (
            prop_oneof![
                (1usize..12).prop_map(Win::Calls),
                (10u64..6000).prop_map(|ms| Win::Time(Duration::from_millis(ms))),
            ],
            1usize..12,
            prop::option::of(1u64..=100),
            1u64..=100,
        )
            .prop_map(|(window, min_calls, rate, slow_rate)| Policy::Rate {
                min_calls: match window {
                    Win::Calls(n) => min_calls.min(n),
                    Win::Time(_) => min_calls,
                },
                window,
                rate,
                slow_rate: Some(slow_rate),
            }),
        slow_threshold().prop_map(Some),
    )
}

// ---------------------------------------------------------------- the check

/// Keeps the panics this test causes on purpose out of the output.
fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&"model: a call panicked") {
                default(info);
            }
        }));
    });
}

fn advance(clock: &ManualClock, model: &mut Model, to: Duration) {
    if to > model.now {
        clock.advance(to - model.now);
        // The clock's timer moves an open breaker to half-open at its deadline, without a call.
        if model.state == State::Open && to >= model.open_until {
            model.now = model.open_until;
            model.go(State::HalfOpen, None);
        }
        model.now = to;
    }
}

fn call(
    breaker: &Breaker,
    clock: &ManualClock,
    model: &mut Model,
    outcome: Outcome,
    took: Duration,
) -> Result<(), TestCaseError> {
    let real = breaker.try_acquire();
    let want = model.acquire();
    match (real, want) {
        (Ok(p), Ok(mp)) => {
            prop_assert_eq!(p.is_probe(), mp.kind == Kind::Probe);
            let to = model.now + took;
            advance(clock, model, to);
            p.record(outcome);
            model.record(mp, outcome);
        }
        (Err(r), Err((reason, after))) => {
            prop_assert_eq!(r.reason(), reason);
            prop_assert_eq!(r.retry_after(), after);
        }
        (real, want) => prop_assert!(
            false,
            "breaker admitted: {:?}, model: {:?}",
            real.is_ok(),
            want
        ),
    }
    Ok(())
}

fn run(setup: Setup, ops: Vec<Op>) -> Result<(), TestCaseError> {
    quiet_panics();
    let clock = ManualClock::new();
    let breaker = Breaker::new("model", setup.config(&clock));
    let mut model = Model::new(setup);
    let mut held: Vec<(Permit<'_>, ModelPermit)> = Vec::new();
    for op in ops {
        match op {
            Op::Call(outcome) => call(&breaker, &clock, &mut model, outcome, Duration::ZERO)?,
            Op::SlowCall(outcome, delta) => {
                let took = match model.setup.slow {
                    Some(t) => match delta {
                        -1 => t - Duration::from_nanos(1),
                        0 => t,
                        _ => t + Duration::from_nanos(1),
                    },
                    None => Duration::from_millis(1),
                };
                call(&breaker, &clock, &mut model, outcome, took)?
            }
            Op::Hold => match (breaker.try_acquire(), model.acquire()) {
                (Ok(p), Ok(mp)) => held.push((p, mp)),
                (Err(r), Err((reason, _))) => prop_assert_eq!(r.reason(), reason),
                (real, want) => prop_assert!(false, "{:?} vs {:?}", real.is_ok(), want),
            },
            Op::Record(i, outcome) if !held.is_empty() => {
                let (p, mp) = held.swap_remove(i % held.len());
                p.record(outcome);
                model.record(mp, outcome);
            }
            Op::Panic(i) if !held.is_empty() => {
                let (p, mp) = held.swap_remove(i % held.len());
                let r = catch_unwind(AssertUnwindSafe(move || {
                    let _p = p;
                    panic!("model: a call panicked");
                }));
                prop_assert!(r.is_err());
                model.record(mp, Outcome::Failure);
            }
            Op::Drop(i) if !held.is_empty() => {
                let (p, mp) = held.swap_remove(i % held.len());
                drop(p);
                model.record(mp, Outcome::Ignored);
            }
            Op::Record(..) | Op::Panic(_) | Op::Drop(_) => {}
            Op::CallPanics => {
                let r = catch_unwind(AssertUnwindSafe(|| {
                    breaker.call(|| -> Result<(), &str> { panic!("model: a call panicked") })
                }));
                match (r, model.acquire()) {
                    (Err(_), Ok(mp)) => model.record(mp, Outcome::Failure),
                    (Ok(Err(e)), Err((reason, _))) => {
                        prop_assert_eq!(e.rejected().map(|r| r.reason()), Some(reason))
                    }
                    (r, want) => prop_assert!(false, "{:?} vs {:?}", r.is_ok(), want),
                }
            }
            Op::Advance(d) => {
                let to = model.now + d;
                advance(&clock, &mut model, to)
            }
            Op::ToDeadline(delta) => {
                let target = match model.state {
                    State::Open => model.open_until,
                    State::HalfOpen => model.progress + model.setup.probe_timeout,
                    _ => model.now,
                };
                advance(&clock, &mut model, nudge(target, delta));
            }
            Op::ToBucketEdge(delta) => {
                if let Policy::Rate {
                    window: Win::Time(span),
                    ..
                } = model.setup.policy
                {
                    let width = (span.as_nanos() / 10).max(1) as u64;
                    let now = model.now.as_nanos() as u64;
                    let edge = Duration::from_nanos((now / width + 1) * width);
                    advance(&clock, &mut model, nudge(edge, delta));
                }
            }
            Op::Manual(m) => {
                match m {
                    Manual::ForceOpen => breaker.force_open(),
                    Manual::Disable => breaker.disable(),
                    Manual::Reset => breaker.reset(),
                    Manual::TripFor(d) => breaker.trip_for(d),
                }
                model.manual(&m);
            }
        }
        model.check(&breaker)?;
    }
    Ok(())
}

fn nudge(t: Duration, delta: i8) -> Duration {
    match delta {
        -1 => t.saturating_sub(Duration::from_nanos(1)),
        0 => t,
        _ => t + Duration::from_nanos(1),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn consecutive_policy_matches_the_model(
        setup in consecutive(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(setup, ops)?;
    }

    #[test]
    fn count_window_rate_policy_matches_the_model(
        setup in count_rate(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(setup, ops)?;
    }

    #[test]
    fn time_window_rate_policy_matches_the_model(
        setup in time_rate(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(setup, ops)?;
    }

    #[test]
    fn slow_rate_policy_matches_the_model(
        setup in slow_rate(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(setup, ops)?;
    }
}

#[test]
fn the_model_agrees_on_a_hand_written_history() {
    let setup = Setup {
        policy: Policy::Consecutive {
            failures: 2,
            within: None,
        },
        slow: None,
        open_for: Duration::from_secs(1),
        backoff: 2.0,
        max_open_for: Duration::from_secs(3),
        half_open_calls: 2,
        successes: 1,
        probe_timeout: Duration::from_secs(2),
        max_concurrent: None,
    };
    use Op::*;
    let f = Outcome::Failure;
    let s = Outcome::Success;
    run(
        setup,
        vec![
            Hold,
            Call(f),
            Call(f),
            Call(s),
            ToDeadline(0),
            Hold,
            Hold,
            Call(s),
            Record(0, f),
            Panic(0),
            Advance(Duration::from_secs(5)),
            Call(f),
            Manual(self::Manual::Reset),
            Call(s),
        ],
    )
    .unwrap();
}
