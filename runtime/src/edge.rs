//! The integrations, each behind a cargo feature: the core (`breaker`, `registry`, …) never
//! imports from here. Their public paths stay at the crate root (`breakerbox_runtime::tower`,
//! `::http`, `::export`, `LoadError`), re-exported by `lib.rs`.

#[cfg(feature = "serde")]
pub(crate) mod load;
#[cfg(feature = "serde")]
pub(crate) mod serde_impl;
