//! breakerbox's configuration through the public API, with every feature: config files and
//! environment overrides loaded over the attribute's configs (`loading`), and configs,
//! snapshots and events through serde (`serialize`, `round_trip`). ManualClock only; no
//! sleeps; nothing talks to the network.
//!
//! No test sets an environment variable in this process: every load reads every `BREAKERBOX__`
//! variable, and one that names no breaker fails the load. A test that needs variables runs
//! alone in a process that starts with them (`support::alone_with_env`).
//! `client` sits at the crate root because its breaker's default name,
//! `config::client::fetch_user`, is its module path, and a test addresses it by that name.

mod client;
mod loading;
mod round_trip;
mod serialize;
mod support;
