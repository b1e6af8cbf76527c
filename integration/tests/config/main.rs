//! breakerbox's configuration through the public API, with every feature: config files and
//! environment overrides loaded over the attribute's configs (`loading`), and configs,
//! snapshots and events through serde (`serialize`, `round_trip`). ManualClock only; no
//! sleeps; nothing talks to the network.
//!
//! Every test that sets an environment variable or loads a file holds `support::env_lock()`.
//! `client` sits at the crate root because its breaker's default name,
//! `config::client::fetch_user`, is its module path, and a test addresses it by that name.

mod client;
mod loading;
mod round_trip;
mod serialize;
mod support;
