//! A reference model of the breaker — a plain single-threaded state machine written for
//! clarity, not speed — checked against the real `Breaker` with proptest on random sequences
//! of calls, outcomes, held permits, panics, drops, clock advances and manual control.
//!
//! After every step the two must agree on the admission decision, the state and every number
//! in `metrics()`.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Config, ManualClock, Outcome, Permit, RejectReason, State, Window,
};
use proptest::prelude::*;

// ---------------------------------------------------------------- the model

#[derive(Clone, Debug)]
enum Policy {
    Consecutive {
        failures: u32,
    },
    Rate {
        size: usize,
        min_calls: usize,
        rate: u64,
    },
}

#[derive(Clone, Debug)]
struct Setup {
    policy: Policy,
    open_for: Duration,
    backoff: f64,
    max_open_for: Duration,
    half_open_calls: u32,
    successes: u32,
    probe_timeout: Duration,
}

impl Setup {
    fn config(&self, clock: &ManualClock) -> Config {
        let b = Config::builder()
            .open_for(self.open_for)
            .backoff(self.backoff)
            .max_open_for(self.max_open_for)
            .half_open_calls(self.half_open_calls)
            .successes(self.successes)
            .probe_timeout(self.probe_timeout)
            .clock(clock.clone());
        let b = match self.policy {
            Policy::Consecutive { failures } => b.failures(failures),
            Policy::Rate {
                size,
                min_calls,
                rate,
            } => b
                .failure_rate(rate as u8)
                .window(Window::Calls(size as u32))
                .min_calls(min_calls as u32),
        };
        b.build().expect("valid config")
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
    window: VecDeque<bool>,
    recorded_since_clear: usize,
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
    times_opened: u64,
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
            window: VecDeque::new(),
            recorded_since_clear: 0,
            open_until: Duration::ZERO,
            reopens: 0,
            admitted: 0,
            probe_successes: 0,
            progress: Duration::ZERO,
            successes: 0,
            failures: 0,
            ignored: 0,
            rejected: 0,
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
                self.recorded_since_clear = 0;
                self.reopens = 0;
            }
            _ => {}
        }
        self.streak = 0;
        self.state = to;
        self.generation += 1;
        self.since = self.now;
    }

    fn acquire(&mut self) -> Result<ModelPermit, (RejectReason, Option<Duration>)> {
        let admit = |m: &Model, kind| {
            Ok(ModelPermit {
                generation: m.generation,
                kind,
            })
        };
        match self.state {
            State::Closed => admit(self, Kind::Closed),
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
                    self.progress = self.now;
                    return admit(self, Kind::Probe);
                }
                if self.now - self.progress >= self.setup.probe_timeout {
                    self.go(State::Open, None);
                }
                self.rejected += 1;
                Err((RejectReason::HalfOpenFull, None))
            }
            _ => unreachable!(),
        }
    }

    fn record(&mut self, p: ModelPermit, outcome: Outcome) {
        if p.kind == Kind::Disabled {
            return;
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
        let failed = outcome == Outcome::Failure;
        match p.kind {
            Kind::Closed if current && outcome != Outcome::Ignored => match self.setup.policy {
                Policy::Consecutive { failures } => {
                    if !failed {
                        self.streak = 0;
                    } else {
                        self.streak += 1;
                        if self.streak >= failures {
                            self.go(State::Open, None);
                        }
                    }
                }
                Policy::Rate {
                    size,
                    min_calls,
                    rate,
                } => {
                    if self.window.len() == size {
                        self.window.pop_front();
                    }
                    self.window.push_back(failed);
                    self.recorded_since_clear += 1;
                    // Judged on a failure, or when the window first holds min_calls calls.
                    let judge = failed || self.recorded_since_clear == min_calls;
                    let calls = self.window.len() as u64;
                    let failed_calls = self.window.iter().filter(|f| **f).count() as u64;
                    if judge && calls >= min_calls as u64 && failed_calls * 100 / calls >= rate {
                        self.go(State::Open, None);
                    }
                }
            },
            Kind::Probe if current => {
                if failed {
                    self.go(State::Open, None);
                    return;
                }
                self.progress = self.now;
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
            (m.successes, m.failures, m.ignored, m.rejected),
            (self.successes, self.failures, self.ignored, self.rejected)
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
            let calls = self.window.len() as u64;
            prop_assert_eq!(m.window_calls, calls);
            let failed = self.window.iter().filter(|f| **f).count() as f64;
            prop_assert_eq!(
                m.failure_rate,
                (calls > 0).then(|| failed * 100.0 / calls as f64)
            );
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
        4 => (-1i8..=1).prop_map(Op::ToDeadline),
        1 => prop_oneof![
            Just(Manual::ForceOpen),
            Just(Manual::Disable),
            Just(Manual::Reset),
            (1u64..3000).prop_map(|ms| Manual::TripFor(Duration::from_millis(ms))),
        ]
        .prop_map(Op::Manual),
    ]
}

fn common(policy: impl Strategy<Value = Policy>) -> impl Strategy<Value = Setup> {
    (
        policy,
        1u64..3000,
        prop_oneof![Just(1.0), Just(2.0), Just(1.5)],
        1u64..4,
        (1u32..4, 0u32..3),
        1u64..5000,
    )
        .prop_map(
            |(policy, open_ms, backoff, cap, (half_open_calls, extra), timeout_ms)| {
                let open_for = Duration::from_millis(open_ms);
                Setup {
                    policy,
                    open_for,
                    backoff,
                    max_open_for: open_for * (cap as u32) * 2,
                    half_open_calls: half_open_calls + extra,
                    successes: half_open_calls,
                    probe_timeout: Duration::from_millis(timeout_ms),
                }
            },
        )
}

fn consecutive() -> impl Strategy<Value = Setup> {
    common((1u32..6).prop_map(|failures| Policy::Consecutive { failures }))
}

fn count_rate() -> impl Strategy<Value = Setup> {
    common(
        (1usize..12, 1u64..=100)
            .prop_flat_map(|(size, rate)| (Just(size), 1..=size, Just(rate)))
            .prop_map(|(size, min_calls, rate)| Policy::Rate {
                size,
                min_calls,
                rate,
            }),
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

fn run(setup: Setup, ops: Vec<Op>) -> Result<(), TestCaseError> {
    quiet_panics();
    let clock = ManualClock::new();
    let breaker = Breaker::new("model", setup.config(&clock));
    let mut model = Model::new(setup);
    let mut held: Vec<(Permit<'_>, ModelPermit)> = Vec::new();
    for op in ops {
        match op {
            Op::Call(outcome) => {
                let real = breaker.try_acquire();
                let want = model.acquire();
                match (real, want) {
                    (Ok(p), Ok(mp)) => {
                        prop_assert_eq!(p.is_probe(), mp.kind == Kind::Probe);
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
                clock.advance(d);
                model.now += d;
            }
            Op::ToDeadline(delta) => {
                let target = match model.state {
                    State::Open => model.open_until,
                    State::HalfOpen => model.progress + model.setup.probe_timeout,
                    _ => model.now,
                };
                let target = match delta {
                    -1 => target.saturating_sub(Duration::from_nanos(1)),
                    0 => target,
                    _ => target + Duration::from_nanos(1),
                };
                if target > model.now {
                    clock.advance(target - model.now);
                    model.now = target;
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
    // Whatever happened, the breaker is not stuck: past any deadline, a reset or a probe
    // success closes it.
    drop(held);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

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
}

#[test]
fn the_model_agrees_on_a_hand_written_history() {
    let setup = Setup {
        policy: Policy::Consecutive { failures: 2 },
        open_for: Duration::from_secs(1),
        backoff: 2.0,
        max_open_for: Duration::from_secs(3),
        half_open_calls: 2,
        successes: 1,
        probe_timeout: Duration::from_secs(2),
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
