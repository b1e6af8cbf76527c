//! Compile-time behaviour of `#[circuit_breaker]`: what compiles, and the error for each
//! rule, one rule per file named after it.
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test -p breakerbox-ui` (and again
//! with `--features tokio` for `fail-tokio/`), then read each one as a user would: does it
//! point at the offending token and say what to do?
//!
//! `timeout` depends on the facade's `tokio` feature, so its cases are split by feature:
//! `pass-tokio/` and `fail-tokio/` with it, `fail-without-tokio/` without.
//!
//! `replay` depends on the facade's `replay` feature (which implies `tokio`): `pass-replay/` and
//! `fail-replay/` with it, `fail-without-replay/` without. `replay = "fleet"` also needs `redis`:
//! `pass-replay-fleet/` and `fail-replay-fleet/` with both, `fail-replay-without-redis/` with
//! `replay` alone.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
    #[cfg(any(feature = "tokio", feature = "replay"))]
    t.pass("tests/ui/pass-tokio/*.rs");
    #[cfg(any(feature = "tokio", feature = "replay"))]
    t.compile_fail("tests/ui/fail-tokio/*.rs");
    #[cfg(not(any(feature = "tokio", feature = "replay")))]
    t.compile_fail("tests/ui/fail-without-tokio/*.rs");
    #[cfg(feature = "replay")]
    t.pass("tests/ui/pass-replay/*.rs");
    #[cfg(feature = "replay")]
    t.compile_fail("tests/ui/fail-replay/*.rs");
    #[cfg(not(feature = "replay"))]
    t.compile_fail("tests/ui/fail-without-replay/*.rs");
    #[cfg(feature = "redis")]
    t.pass("tests/ui/pass-replay-fleet/*.rs");
    #[cfg(feature = "redis")]
    t.compile_fail("tests/ui/fail-replay-fleet/*.rs");
    #[cfg(all(feature = "replay", not(feature = "redis")))]
    t.compile_fail("tests/ui/fail-replay-without-redis/*.rs");
}
