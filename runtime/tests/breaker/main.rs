//! Every transition and config rule of the breaker, on a `ManualClock`: no test sleeps.
//!
//! One test binary (linked once), one module per topic; `support` holds what they share.

mod backoff;
mod config;
mod consecutive;
mod errors;
mod events;
mod half_open;
mod manual;
mod permits;
mod rate;
mod registry;
mod slow;
mod support;
