//! Two threads × a million mixed calls on one breaker, with trips and recoveries driven by a
//! shared `ManualClock` that one of them advances. Afterwards every count must be exact
//! (`calls == successes + failures + ignored + rejected`, and each total what the threads
//! counted themselves), and the breaker must be in a legal state and not stuck.
//!
//! One test binary: `support` holds the tally, the random calls and the checks; one module
//! per subject.

mod churn;
mod policies;
mod support;
mod windows;
