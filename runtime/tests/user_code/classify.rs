//! Faults in `classify` (through `call_with`), in every state.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::Ordering::SeqCst;

use breakerbox_runtime::{Breaker, ManualClock, Outcome, State};

use crate::support::{Arm, Fault, STARTS, Start, config, enter, message, still_works, within};

/// `classify` (through `call_with`) faults in every state: where a call is admitted it runs
/// after the call, with the permit held; where not, it never runs.
fn classify_faults(fault: Fault) {
    within("classify faults", move || {
        for start in STARTS {
            let case = format!("classify, {fault:?}, in {start:?}");
            let clock = ManualClock::new();
            let b = Breaker::new("faults.classify", config(&clock).build().unwrap());
            let arm = Arm::new(&b);
            enter(&b, start);
            let before = b.metrics();
            arm.set(fault);
            let r = catch_unwind(AssertUnwindSafe(|| {
                b.call_with(
                    || 42,
                    |_| {
                        arm.run(None);
                        Outcome::Failure
                    },
                )
            }));
            arm.set(Fault::None);
            let after = b.metrics();
            if !start.admits() {
                assert!(matches!(r, Ok(Err(_))), "{case}: admitted");
                assert_eq!(arm.ran.load(SeqCst), 0, "{case}: classify ran");
                assert_eq!(after.rejected - before.rejected, 1, "{case}");
                assert_eq!(b.state(), start.state(), "{case}");
                still_works(&b, &clock);
                continue;
            }
            match (fault, r) {
                (Fault::Panic, Err(panic)) => {
                    assert_eq!(message(&*panic), "injected fault in faults.classify")
                }
                (Fault::Panic, Ok(_)) => panic!("{case}: the panic was swallowed"),
                (_, Ok(Ok(42))) => {}
                (_, other) => panic!("{case}: {other:?}"),
            }
            // A panicking classify counts the call a failure (its permit drops while
            // panicking); otherwise it said `Failure`. Either way, one failure.
            let want = match (start, fault.forces_open()) {
                (Start::Disabled, true) => State::ForcedOpen,
                (Start::Disabled, false) => State::Disabled,
                (_, true) => State::ForcedOpen,
                (_, false) => State::Open,
            };
            assert_eq!(b.state(), want, "{case}");
            if start != Start::Disabled {
                assert_eq!(after.failures - before.failures, 1, "{case}");
                assert_eq!(after.calls - before.calls, 1, "{case}");
            }
            arm.assert_clean(&case);
            still_works(&b, &clock);
        }
    });
}

#[test]
fn a_panicking_classify_counts_a_failure_in_any_state() {
    classify_faults(Fault::Panic);
}

#[test]
fn a_re_entering_classify_disturbs_nothing() {
    classify_faults(Fault::ReEnter);
}

#[test]
fn a_classify_acting_on_its_breaker_wins_over_its_stale_verdict() {
    classify_faults(Fault::Act);
}

#[test]
fn a_classify_blocking_on_a_thread_that_uses_the_breaker_does_not_deadlock() {
    classify_faults(Fault::Block);
}
