//! The admin router (`breakerbox-admin`, `breakerbox::admin`), driven with
//! `tower::ServiceExt::oneshot`: no network. Breakers run on a `ManualClock`, the event stream
//! on tokio's paused clock.
//!
//! Every test uses breakers of its own names: the registry is the process's. The tests that
//! count events on the admin's process-wide channel run [`alone`](support::alone).

mod audit;
mod config_sources;
mod controls;
mod events;
mod keys;
mod keys_stream;
mod latency;
mod refusals;
#[cfg(feature = "replay")]
mod replay;
mod stream;
mod support;
mod ticks;
mod views;
