//! Empty: depending on this crate turns on breakerbox's `replay` feature (see `ui/Cargo.toml`).
