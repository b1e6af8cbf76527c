//! Not a library: the package that runs breakerbox, with every feature on, against the crates it
//! integrates with (tower, axum, reqwest, metrics, Prometheus, serde, TOML) — its tests in
//! `tests/`, its examples in `examples/`, and the guide's snippets below. It is a package of its
//! own so that these crates are never built for the facade's own tests or its quickstart.
#![forbid(unsafe_code)]

/// The integration guide's examples (`docs/integrations.md`), compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../docs/integrations.md")]
struct IntegrationDoctests;
