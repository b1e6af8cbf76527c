//! loom models of the atomic protocols: the breaker's (`breaker`), the open timer's (`timers`) and the rate windows' and counter
//! stripes' (`windows`).
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!   cargo test -p breakerbox-runtime --test loom --release
//! ```
//!
//! Without `--cfg loom` this binary is empty.
#![cfg(loom)]

mod breaker;
mod timers;
mod windows;
