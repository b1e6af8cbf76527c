//! Empty: depending on this crate turns on breakerbox's `replay` and `redis` features (see
//! `ui/Cargo.toml`).
