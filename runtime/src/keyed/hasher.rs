//! The default key hasher: foldhash, seeded from the operating system per process and per
//! family.

use core::fmt;
use core::hash::BuildHasher;
use std::hash::RandomState;
use std::sync::OnceLock;

use foldhash::SharedSeed;
use foldhash::fast::{FoldHasher, SeedableRandomState};

/// The hasher a [`BreakerMap`](crate::BreakerMap) uses unless given another with
/// [`with_hasher`](crate::BreakerMap::with_hasher): foldhash (the hash hashbrown uses by
/// default), with secret seeds drawn from the operating system's randomness, through std's
/// `RandomState`: one shared seed per process and one more per family.
///
/// It costs a lookup a few nanoseconds where std's SipHash costs about fifteen (BENCHMARKS.md,
/// "Per-key breakers"). The seeds are never shown, so keys cannot be chosen ahead of time to
/// collide. foldhash is not a cryptographic hash, though: its authors do not claim it resists
/// an attacker who can measure lookups closely enough to recover the seeds. Where keys come
/// from such an attacker (a key any client can pick, and time measured close to the
/// map), give the family std's `RandomState` (keyed SipHash) with `with_hasher`.
#[derive(Clone)]
pub struct KeyHasher(SeedableRandomState);

impl KeyHasher {
    /// A hasher with a fresh per-family seed.
    pub fn new() -> Self {
        static SHARED: OnceLock<SharedSeed> = OnceLock::new();
        let shared = SHARED.get_or_init(|| SharedSeed::from_u64(os_random()));
        KeyHasher(SeedableRandomState::with_seed(os_random(), shared))
    }
}

/// 64 bits the process cannot predict: std's `RandomState` takes its keys from the operating
/// system (once per thread, then a new key per instance).
fn os_random() -> u64 {
    RandomState::new().hash_one(0u8)
}

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher::new()
    }
}

impl BuildHasher for KeyHasher {
    type Hasher = FoldHasher<'static>;

    #[inline]
    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

impl fmt::Debug for KeyHasher {
    /// Does not show the seeds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyHasher")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(s: &KeyHasher, key: &str) -> u64 {
        s.hash_one(key)
    }

    #[test]
    fn each_hasher_is_seeded_apart_and_each_is_deterministic() {
        let (a, b) = (KeyHasher::new(), KeyHasher::new());
        assert_eq!(hash(&a, "host-1.example"), hash(&a, "host-1.example"));
        assert_eq!(
            hash(&a, "host-1.example"),
            hash(&a.clone(), "host-1.example")
        );
        // Two families hash the same keys differently (all 16 agreeing by chance: 2^-1024).
        let keys: Vec<String> = (0..16).map(|i| format!("host-{i}.example")).collect();
        assert!(keys.iter().any(|k| hash(&a, k) != hash(&b, k)));
        assert_eq!(format!("{a:?}"), "KeyHasher");
    }
}
