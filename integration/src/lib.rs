//! Not a library: the package that runs breakerbox, with every feature on, against the crates it
//! integrates with (tower, axum, reqwest, metrics, Prometheus, serde, TOML) — its tests in
//! `tests/`, its examples in `examples/`, and the guide's snippets below. It is a package of its
//! own so that these crates are never built for the facade's own tests or its quickstart.
#![forbid(unsafe_code)]

// The guides' Rust code blocks, compiled and run as this package's doctests
// (`cargo test -p breakerbox-integration --doc`): this package has every feature of breakerbox
// and the crates the guides use (tokio, tower, axum, reqwest, metrics, Prometheus, serde), so
// a block compiles here as a reader would write it. A block that cannot run without a server
// is `no_run` (compiled only); `ignore` only with the reason beside it in the guide.

/// `docs/integrations.md`: tower, axum, reqwest, metrics and Prometheus, serde and TOML.
#[cfg(doctest)]
#[doc = include_str!("../../docs/integrations.md")]
struct IntegrationDoctests;

/// `docs/configuration.md`: the layers of a breaker's config, and a worked example.
#[cfg(doctest)]
#[doc = include_str!("../../docs/configuration.md")]
struct ConfigurationDoctests;

/// `docs/live.md`: reloading a config file into live breakers.
#[cfg(doctest)]
#[doc = include_str!("../../docs/live.md")]
struct LiveDoctests;

/// `docs/probes.md`: health probes while a breaker is open.
#[cfg(doctest)]
#[doc = include_str!("../../docs/probes.md")]
struct ProbesDoctests;

/// `docs/fleet.md`: breakers shared through Redis or PostgreSQL, and a store of one's own.
#[cfg(doctest)]
#[doc = include_str!("../../docs/fleet.md")]
struct FleetDoctests;

/// `docs/replay.md`: calls rejected while open, journaled and replayed.
#[cfg(doctest)]
#[doc = include_str!("../../docs/replay.md")]
struct ReplayDoctests;

/// `docs/admin.md`: the admin router, its dashboard, Prometheus and the fleet view.
#[cfg(doctest)]
#[doc = include_str!("../../docs/admin.md")]
struct AdminDoctests;
