//! The operations a history is made of, and the proptest strategies for them and for configs.

use std::time::Duration;

use breakerbox_runtime::Outcome;
use proptest::prelude::*;

use crate::reference::{Manual, Policy, Setup, Win};

#[derive(Clone, Debug)]
pub enum Op {
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

pub fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        6 => Just(Outcome::Success),
        6 => Just(Outcome::Failure),
        2 => Just(Outcome::Ignored),
        1 => (1u64..3000).prop_map(|ms| Outcome::TripFor(Duration::from_millis(ms))),
    ]
}

pub fn op() -> impl Strategy<Value = Op> {
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

pub fn common(
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

pub fn slow_threshold() -> impl Strategy<Value = Duration> {
    (1u64..2000).prop_map(Duration::from_millis)
}

pub fn consecutive() -> impl Strategy<Value = Setup> {
    common(
        (
            1u32..6,
            prop::option::of((1u64..8000).prop_map(Duration::from_millis)),
        )
            .prop_map(|(failures, within)| Policy::Consecutive { failures, within }),
        prop::option::of(slow_threshold()),
    )
}

pub fn count_rate() -> impl Strategy<Value = Setup> {
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

pub fn time_rate() -> impl Strategy<Value = Setup> {
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

pub fn slow_rate() -> impl Strategy<Value = Setup> {
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
