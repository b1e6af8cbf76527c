//! The admin router (`breakerbox::admin`), driven with `tower::ServiceExt::oneshot`: no network.
//! Breakers run on a `ManualClock`, the event stream on tokio's paused clock.
//!
//! Every test uses breakers of its own names: the registry is the process's.

mod controls;
mod refusals;
mod stream;
mod support;
mod views;
