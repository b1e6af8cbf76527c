//! Breaker configs from a TOML file, overridden by environment variables:
//! `Registry::load_toml` (in `load_toml`) and `reload_toml` (in `reload`), the file read
//! (`file`) and parsed (`parse`) into tables (`table`), the environment's variables (`env`),
//! the layers merged key by key (`merge`) and built into configs (`prepare`), their
//! [`LoadError`] (`load_error`); `watch` (feature `watch`) — `Registry::watch_toml` and its
//! `TomlWatcher`; `accounts`: `Registry::config_sources`, where each key came from.
//!
//! What a load leaves for later (the layers of names not made yet, where each key came from,
//! the tables, what each file reached) is kept by the registry, in `config::layers`: the
//! loader writes it, and the registry makes breakers from it without the loader.

mod accounts;
mod env;
mod file;
mod load_error;
mod load_toml;
mod merge;
mod parse;
mod prepare;
mod reload;
mod table;
#[cfg(test)]
mod tests;
#[cfg(feature = "watch")]
mod watch;

pub use load_error::LoadError;
#[cfg(feature = "watch")]
pub use watch::TomlWatcher;
