//! Faults in an error's `Display`, formatted when its failure trips the breaker.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use breakerbox_runtime::{Breaker, Error, ManualClock, State};

use crate::support::{Arm, Fault, STARTS, Start, config, enter, still_works, within};

/// An error whose `Display` runs the armed fault. It is formatted when its failure trips the
/// breaker (closed, or a failing probe); in the other states it is never formatted.
struct Faulty(Arc<Arm>);

impl fmt::Display for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.run(None);
        f.write_str("faulty error")
    }
}

fn display_faults(fault: Fault) {
    within("Display faults", move || {
        for start in STARTS {
            let case = format!("Display, {fault:?}, in {start:?}");
            let clock = ManualClock::new();
            let b = Breaker::new("faults.display", config(&clock).build().unwrap());
            let arm = Arm::new(&b);
            enter(&b, start);
            let before = b.metrics();
            arm.set(fault);
            let r = catch_unwind(AssertUnwindSafe(|| {
                b.call(|| Err::<(), _>(Faulty(arm.clone())))
            }));
            arm.set(Fault::None);
            let after = b.metrics();
            if fault != Fault::Panic {
                assert!(r.is_ok(), "{case}: a panic got out");
            }
            match start {
                Start::Open | Start::ForcedOpen => {
                    assert!(matches!(r, Ok(Err(Error::Rejected(_)))), "{case}");
                    assert_eq!(arm.ran.load(SeqCst), 0, "{case}: formatted");
                    assert_eq!(b.state(), start.state(), "{case}");
                }
                Start::Disabled => assert_eq!(b.state(), State::Disabled, "{case}"),
                Start::Closed | Start::HalfOpen => {
                    let want = if fault.forces_open() {
                        State::ForcedOpen
                    } else {
                        State::Open
                    };
                    assert_eq!(b.state(), want, "{case}");
                    assert_eq!(after.failures - before.failures, 1, "{case}");
                    // The message is formatted before the transition: a `Display` that
                    // forces the breaker open acts first, and the trip then finds the state
                    // moved on and opens nothing.
                    let opened = u64::from(!fault.forces_open());
                    assert_eq!(after.times_opened - before.times_opened, opened, "{case}");
                    if fault != Fault::Panic && !fault.forces_open() {
                        assert_eq!(b.last_failure().as_deref(), Some("faulty error"), "{case}");
                    }
                }
            }
            arm.assert_clean(&case);
            still_works(&b, &clock);
        }
    });
}

#[test]
fn a_panicking_display_disturbs_nothing_in_any_state() {
    display_faults(Fault::Panic);
}

#[test]
fn a_re_entering_display_disturbs_nothing_in_any_state() {
    display_faults(Fault::ReEnter);
}

#[test]
fn a_display_acting_on_its_breaker_does_not_deadlock() {
    display_faults(Fault::Act);
}

#[test]
fn a_display_blocking_on_a_thread_that_uses_the_breaker_does_not_deadlock() {
    display_faults(Fault::Block);
}

/// An error whose `Display` writes `prefix`, then `piece` `times` times, counting its writes.
struct Huge {
    prefix: &'static str,
    piece: &'static str,
    times: usize,
    writes: std::sync::atomic::AtomicUsize,
}

impl fmt::Display for Huge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix)?;
        for _ in 0..self.times {
            self.writes.fetch_add(1, SeqCst);
            f.write_str(self.piece)?;
        }
        Ok(())
    }
}

#[test]
fn a_huge_failure_message_is_kept_cut_at_a_kilobyte_and_not_formatted_past_it() {
    let clock = ManualClock::new();
    let b = Breaker::new("faults.display.huge", config(&clock).build().unwrap());
    // One byte, then two-byte characters: the cut falls inside one.
    let huge = Huge {
        prefix: "a",
        piece: "é",
        times: 1_000_000,
        writes: Default::default(),
    };
    assert!(matches!(
        b.call(|| Err::<(), _>(&huge)),
        Err(Error::Inner(_))
    ));
    assert_eq!(b.state(), State::Open);
    let kept = b.last_failure().expect("the trip keeps its failure");
    let text = kept.strip_suffix("… (cut)").expect("a cut message says so");
    assert_eq!(
        text.len(),
        1023,
        "the last whole character within 1 024 bytes"
    );
    assert_eq!(text, format!("a{}", "é".repeat(511)));
    // Formatting stopped at the cut, not after a million writes.
    assert_eq!(huge.writes.load(SeqCst), 512);
    // A rejection's message carries the cut text, not the body.
    let Err(Error::Rejected(r)) = b.call(|| Ok::<(), &str>(())) else {
        panic!("open: rejected");
    };
    assert!(r.to_string().ends_with("… (cut))"), "{r}");
    assert!(r.to_string().len() < 1200, "{r}");
    // A message of exactly 1 024 bytes is whole.
    let b = Breaker::new("faults.display.exact", config(&clock).build().unwrap());
    let exact = "x".repeat(1024);
    let _ = b.call(|| Err::<(), _>(exact.as_str()));
    assert_eq!(b.last_failure().as_deref(), Some(exact.as_str()));
}
