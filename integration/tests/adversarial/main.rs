//! An independent reviewer's repros of DEFECTS.md's D04 (tower), D05/D06 (load_toml), D14
//! (serde) and the configuration items, through the public API only: the attribute, the tower
//! layer, `load_toml_str`, serde. ManualClock only; no sleeps; nothing talks to the network.
//!
//! One test binary, one module per surface; `support` holds what they share. `client` sits at
//! the crate root because its breaker's default name, `adversarial::client::fetch_user`, is
//! its module path, and a test addresses it by that name.

mod attribute;
mod client;
mod config;
mod layer;
mod round_trip;
mod support;
