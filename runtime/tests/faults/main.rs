//! Fault injection wherever user code runs inside a breaker: state-change listeners (per
//! breaker and registry-wide), `classify`, an error's `Display`, the registry's config
//! closures, and clocks. Each one panics, re-enters the breaker and the registry, acts on the
//! breaker, and blocks on another thread that uses them — in every state, and while the
//! protected call itself is panicking where a call is admitted. After each, the breaker must
//! still be right: its state, its counts, its events, and it still trips and closes.
//!
//! Every test runs on `ManualClock`s; nothing sleeps. A test that could deadlock runs under
//! `support::within`, whose limit only turns a hang into a failure: every case here takes
//! milliseconds. One test binary, one module per place user code runs; `support` holds the
//! states, the faults and the checks they share.

mod classify;
mod clocks;
mod config;
mod display;
mod listeners;
mod support;
