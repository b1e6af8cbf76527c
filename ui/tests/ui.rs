//! Compile-time behaviour of `#[circuit_breaker]`: what compiles, and the error for each
//! rule, one rule per file named after it.
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test -p breakerbox-ui` (and again
//! with `--features tokio` for `fail-tokio/`), then read each one as a user would: does it
//! point at the offending token and say what to do?
//!
//! `timeout` depends on the facade's `tokio` feature, so its cases are split by feature:
//! `pass-tokio/` and `fail-tokio/` with it, `fail-without-tokio/` without.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
    #[cfg(feature = "tokio")]
    t.pass("tests/ui/pass-tokio/*.rs");
    #[cfg(feature = "tokio")]
    t.compile_fail("tests/ui/fail-tokio/*.rs");
    #[cfg(not(feature = "tokio"))]
    t.compile_fail("tests/ui/fail-without-tokio/*.rs");
}
