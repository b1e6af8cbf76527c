//! Every transition and config rule of the breaker, its handles and permits, its bulkhead,
//! and what it reports (metrics, latency, rejections, failure reasons, exported state, the
//! registry's health), on a
//! `ManualClock`: no test sleeps.
//!
//! One test binary (linked once), one module per topic; `support` and `calls` hold what they
//! share.

#[path = "../common/alone.rs"]
mod alone;
mod backoff;
mod bulkhead;
#[allow(dead_code)]
#[path = "../common/calls.rs"]
mod calls;
mod clock_reads;
mod config;
mod consecutive;
mod errors;
mod events;
mod failure_reasons;
mod failures_within;
mod half_open;
mod handles;
mod health;
mod latency;
mod manual;
mod permits;
mod rate;
mod registry;
mod reports;
mod slow;
mod support;
mod timeouts;
