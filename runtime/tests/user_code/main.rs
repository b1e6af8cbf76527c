//! User code that runs inside a breaker: state-change listeners (per breaker and
//! registry-wide), `classify`, an error's `Display`, the registry's config closures, and
//! clocks. Each one panics, re-enters the breaker and the registry, acts on the breaker, and
//! blocks on another thread that uses them — in every state, and while the protected call
//! itself is panicking where a call is admitted. After each, the breaker must still be right:
//! its state, its counts, its events, and it still trips and closes.
//!
//! `support` holds the states, the faults and the checks that the fault-injection modules
//! (`classify`, `clocks`, `config`, `display`, `listeners`) share; `calls` the panicking and
//! re-entering user code of the others (`display_panics`, `listener_panics`,
//! `registry_closures`, `unwinding`).
//!
//! Every test runs on `ManualClock`s; nothing sleeps. A test that could deadlock runs under
//! `within`, whose limit only turns a hang into a failure: every case here takes
//! milliseconds. A case that would abort the process runs in a child process of this binary.

#[path = "../common/calls.rs"]
mod calls;
mod classify;
mod clocks;
mod config;
mod display;
mod display_panics;
mod listener_panics;
mod listeners;
mod registry_closures;
mod support;
mod unwinding;
