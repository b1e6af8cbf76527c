//! Empty: depending on this crate turns on breakerbox's `tokio` feature (see `ui/Cargo.toml`).
