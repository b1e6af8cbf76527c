//! What the integration crates (`breakerbox-metrics`, `breakerbox-tower`, `breakerbox-admin`,
//! `breakerbox-fleet`) need from the core that users should not see: reached through the
//! runtime as `breakerbox_runtime::__edge`.
//!
//! **No semver promise.** This module is not public API: anything here may change or go in any
//! release, minor or patch. The facade pins each integration crate with `=`, so the runtime and
//! the integrations it is built with always come from one release. Code outside breakerbox's
//! own crates must not use it.
//!
//! Each item is a thin function over a core internal, named for what it gives; where a public
//! API already gives the same, the integrations use that instead.

use core::fmt;
use core::hash::{BuildHasher, Hash};

use crate::{Breaker, BreakerMap, FamilySnapshot, Registry};

/// Which family `snapshot` was taken of: two families of one name (one dropped, another made)
/// have different ids. The metrics export starts a family's counters again on a new id.
pub fn family_id(snapshot: &FamilySnapshot) -> u64 {
    snapshot.family
}

/// Calls `f` with every registry family's name, each of its keys as it displays, and the key's
/// breaker: the metrics export's per-key series.
pub fn each_family_key(registry: &Registry, f: impl FnMut(&str, String, &Breaker)) {
    registry.each_family_key(f);
}

/// Calls `f` with every key `family` holds now, as it displays, and its breaker.
pub fn each_key<K, S>(family: &BreakerMap<K, S>, f: impl FnMut(String, &Breaker))
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    family.each_displayed(f);
}
