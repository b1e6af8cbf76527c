//! Runs the model and the real breaker side by side; the property tests and a hand-written
//! history.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use breakerbox_runtime::{Breaker, ManualClock, Outcome, Permit, State};
use proptest::prelude::*;

use crate::ops::{Op, consecutive, count_rate, op, slow_rate, time_rate};
use crate::reference::{Kind, Manual, Model, ModelPermit, Policy, Setup, Win};

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
