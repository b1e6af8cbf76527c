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
//!
//! One test binary: `reference` is the model, `ops` the random operations and configs, `check`
//! runs both side by side.

mod check;
mod ops;
mod reference;
