//! Configuration as text and as it changes: config files, environment overrides and serde
//! (`text`, `env`), hot reload that keeps state (`reload`, `reload_heap`) and a watched file
//! (`watch`).
//!
//! No test here sets a `BREAKERBOX__` variable in this process: every load reads them all,
//! and one that names no breaker fails the load. Each of `env`'s tests runs alone in a
//! process of its own that starts with its variables, as `reload_heap` counts the heap alone.

#[allow(dead_code)]
#[path = "../common/alone.rs"]
mod alone;
mod env;
mod reload;
mod reload_heap;
mod reload_removed;
mod text;
mod watch;
