//! `#[circuit_breaker]` end to end: on synchronous and async functions and methods
//! (`sync`, `async_fns`), keyed (`keyed`), falling back on failures (`fallback_on`), with
//! health probes (`probe`), the shapes it must compile (`shapes`), its expansion under strict
//! lints (`lints`), and user code that panics or misbehaves inside it (`async_panics`,
//! `creation_panics`, `display_panics`, `user_code`).
//!
//! The registry is one per process: every test uses breaker names of its own, and a
//! `ManualClock` registered for that name before the first call (or tokio's paused clock);
//! nothing sleeps. `registration` and the `config_*` binaries are binaries of their own: one
//! lists every annotated breaker of its program, the others configure them all.

mod async_fns;
mod async_panics;
mod creation_panics;
mod display_panics;
mod fallback_on;
mod keyed;
pub mod lints;
mod probe;
mod shapes;
mod support;
mod sync;
mod user_code;
