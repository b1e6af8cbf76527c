//! [`BreakerMap`]: the handle to a keyed family, and its calls, lookups and counts.

use core::borrow::Borrow;
use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, OnceLock};

use super::family::Family;
use super::family::{Evicted, Gone};
use super::hasher::KeyHasher;
use crate::breaker::{Breaker, Error, OwnedPermit, Rejected};
use crate::clock::nanos;
use crate::config::Config;
use crate::outcome::Outcome;
use crate::state::State;

/// A family of breakers, one per key, made from one config: one failing host, tenant or shard
/// opens its own breaker and no other.
///
/// Keys are created on first use. A key is looked up by any borrowed form a `HashMap` lookup
/// takes (`&str` for a `String` key), which does not allocate; a new key is made from it with
/// `to_owned` (and `into`, so an `Arc<str>` key is found and made from a `&str`). The keys
/// are in one concurrent map (papaya): a lookup reads it without a lock, and a call runs
/// while the map is pinned, with no reference count taken. Keys display
/// (a rejection names its key, as [`Rejected::key`] and in its message;
/// [`Registry::families`](crate::Registry::families) lists them as text), and keys and the
/// hasher are `Send + Sync + 'static`: an evicted breaker keeps a listener that holds its key
/// and carries a late opening to it. The family is bounded by the config's
/// [`max_keys`](crate::ConfigBuilder::max_keys) and [`idle_for`](crate::ConfigBuilder::idle_for):
/// keys uncalled for `idle_for` are evicted, and above `max_keys` the least recently called
/// closed keys are. A key whose breaker is open before its open time has run, forced open or
/// disabled is never evicted, so an evicted and recreated key does not get a fresh closed
/// breaker while its host is still failing; and a call admitted before its key's eviction that
/// opens the evicted breaker opens the key's breaker in the family too. If such keys fill
/// the family, it grows with them up to
/// twice `max_keys`; past that, new keys share one overflow breaker (see
/// [`overflow`](BreakerMap::overflow)) until eviction makes room (at that size every
/// `max_keys / 8` keys turned away run a sweep, so keys that have closed since make room
/// within as many calls). The growth keeps every open
/// key's protection during a wide outage, at a bounded cost (about 260 bytes and the key per
/// key); the overflow breaker keeps new keys protected rather than unprotected, and memory
/// bounded, when even that is full.
///
/// Every breaker of a family shares its config (one allocation), except keys given their own
/// in a `[breakers.<name>.keys."<key>"]` table of `load_toml` (or `reload_toml`, which
/// also replaces a registry family's config live), and its name: a rejection
/// names the family, and [`Metrics::name`](crate::Metrics::name) is the family's name.
///
/// ```
/// use breakerbox_runtime::{BreakerMap, Config, Error, State};
///
/// let hosts: BreakerMap<String> = BreakerMap::new("api", Config::builder().failures(2).build()?);
/// for _ in 0..2 {
///     let _ = hosts.call("down.example", || Err::<(), _>("connection refused"));
/// }
/// assert_eq!(hosts.get("down.example").unwrap().state(), State::Open);
/// // Another host is not affected.
/// assert_eq!(hosts.call("up.example", || Ok::<_, &str>(1)).unwrap(), 1);
/// let r = hosts.call("down.example", || Ok::<_, &str>(1));
/// assert!(matches!(r, Err(Error::Rejected(_))));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
pub struct BreakerMap<K, S = KeyHasher> {
    pub(super) family: Arc<Family<K, S>>,
}

impl<K, S> Clone for BreakerMap<K, S> {
    /// Another handle to the same family.
    fn clone(&self) -> Self {
        BreakerMap {
            family: self.family.clone(),
        }
    }
}

impl<K, S> BreakerMap<K, S> {
    /// The family's name.
    pub fn name(&self) -> &str {
        &self.family.name
    }

    /// The config every new key's breaker is made with (unless the key has its own). A
    /// registry family's is replaced by `Registry::reload_toml`, with every key's.
    pub fn config(&self) -> &Config {
        &self.family.config
    }
}

impl<K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static> BreakerMap<K> {
    /// An empty family named `name`, not in the registry (see [`Registry::family`](crate::Registry::family)).
    pub fn new(name: impl Into<String>, config: Config) -> Self {
        BreakerMap::with_hasher(name, config, KeyHasher::new())
    }
}

impl<K, S> BreakerMap<K, S>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    /// An empty family hashing its keys with `hasher`. The default, [`KeyHasher`], is foldhash
    /// seeded from the operating system per family; std's `RandomState` (keyed SipHash) costs
    /// a lookup more and resists an attacker who can time lookups closely (see [`KeyHasher`]).
    pub fn with_hasher(name: impl Into<String>, config: Config, hasher: S) -> Self {
        let max_keys = config.max_keys as usize;
        let now = config.clock.coarse();
        let idle_for = nanos(config.idle_for).max(1);
        BreakerMap {
            family: Arc::new_cyclic(|me| Family {
                id: {
                    static NEXT: AtomicU64 = AtomicU64::new(1);
                    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                },
                map: papaya::HashMap::builder()
                    .hasher(hasher)
                    .resize_mode(papaya::ResizeMode::Blocking)
                    .build(),
                name: Arc::new(name.into().into_boxed_str()),
                tick: AtomicU64::new(2),
                swept_at: AtomicU64::new(now),
                totals: Arc::default(),
                sweeping: AtomicBool::new(false),
                sweep_at: AtomicU64::new(now.saturating_add(idle_for / 8)),
                sweep_len: AtomicUsize::new(max_keys),
                turned_away: AtomicUsize::new(0),
                overflow: OnceLock::new(),
                max_keys,
                hard_cap: max_keys.saturating_mul(2),
                idle_for,
                config: crate::reconfigure::KeptConfig::new(Arc::new(config)),
                live: Default::default(),
                me: me.clone(),
                in_registry: AtomicBool::new(false),
            }),
        }
    }

    /// Keys held now (not counting the overflow breaker).
    pub fn len(&self) -> usize {
        self.family.map.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs `f` through `key`'s breaker, as [`Breaker::call`] does, creating the breaker if
    /// the key is new.
    #[inline]
    pub fn call<Q, T, E: fmt::Display>(
        &self,
        key: &Q,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Error<E>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.family.with(key, |b| b.call(f))
    }

    /// Runs `f` through `key`'s breaker and lets `classify` judge it, as
    /// [`Breaker::call_with`] does.
    #[inline]
    pub fn call_with<Q, R>(
        &self,
        key: &Q,
        f: impl FnOnce() -> R,
        classify: impl FnOnce(&R) -> Outcome,
    ) -> Result<R, Rejected>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.family.with(key, |b| b.call_with(f, classify))
    }

    /// Awaits `fut` through `key`'s breaker, as [`Breaker::call_async`] does. The future holds
    /// a handle to the breaker (a reference-count increment), not a pin of the map.
    pub async fn call_async<Q, T, E: fmt::Display>(
        &self,
        key: &Q,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Error<E>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        let breaker = self.family.with(key, Breaker::clone);
        breaker.call_async(fut).await
    }

    /// Asks `key`'s breaker for leave to make one call, as [`Breaker::try_acquire_owned`]
    /// does: the permit holds a handle to the breaker (a reference-count increment), so it
    /// can be sent and kept across an eviction, and what it records is still counted.
    #[inline]
    pub fn try_acquire<Q>(&self, key: &Q) -> Result<OwnedPermit, Rejected>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.family.with(key, Breaker::try_acquire_owned)
    }

    /// As [`try_acquire`](BreakerMap::try_acquire), with a [`Lease`](crate::breaker::Lease): what
    /// the tower layer's response future holds.
    #[inline]
    pub(crate) fn lease<Q>(&self, key: &Q) -> Result<crate::breaker::Lease, Rejected>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.family.with(key, Breaker::try_lease)
    }

    /// `rejected`, a rejection by the breaker of `key` got from
    /// [`breaker`](BreakerMap::breaker). A family's breaker knows its key, so a rejection
    /// names it already; kept for the code `#[circuit_breaker(key = …)]` generates.
    #[doc(hidden)]
    pub fn name_rejection<Q>(&self, _key: &Q, rejected: Rejected) -> Rejected
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        rejected
    }

    /// A handle to `key`'s breaker, if the key is held now. The handle keeps the breaker alive
    /// after an eviction; calls through it still count in [`evicted`](BreakerMap::evicted).
    /// Once the handle is dropped, the evicted breaker is freed by the family's next sweep or
    /// [`evicted`](BreakerMap::evicted) read (which fold its counts in): until then the family
    /// keeps it in its list of evicted breakers, a few hundred bytes each.
    pub fn get<Q>(&self, key: &Q) -> Option<Breaker>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let guard = self.family.map.guard();
        self.family.map.get(key, &guard).map(|s| s.breaker.clone())
    }

    /// A handle to `key`'s breaker, created if the key is new (or the overflow breaker, when
    /// the family is full of keys it may not evict). See [`get`](BreakerMap::get).
    pub fn breaker<Q>(&self, key: &Q) -> Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        self.family.with(key, Breaker::clone)
    }

    /// The breaker new keys share while the family is full of keys it may not evict, if it
    /// has been needed. Its name is the family's.
    pub fn overflow(&self) -> Option<Breaker> {
        self.family.overflow.get().cloned()
    }

    /// What the breakers no longer in the family counted, including calls still recording
    /// into a breaker evicted while they ran, and calls through handles from
    /// [`get`](BreakerMap::get) or [`breaker`](BreakerMap::breaker) kept after the eviction.
    pub fn evicted(&self) -> Evicted {
        self.family.totals.prune();
        // The totals and the breakers not folded in yet, in one critical section.
        let gone = self.family.totals.lock();
        let mut sum = Gone {
            evicted: gone.evicted,
            ..Gone::default()
        };
        for b in &gone.limbo {
            sum.add(b.counts());
        }
        sum.evicted
    }

    /// Adds the latency of the breakers no longer in the family to `merged`: the calls since
    /// they were made of those freed, and the histograms of those still held.
    pub(crate) fn merge_evicted_latency(&self, merged: &mut crate::latency::Merged, now: u64) {
        self.family.totals.prune();
        let limbo: Vec<Breaker> = {
            let gone = self.family.totals.lock();
            if !gone.latency.is_empty() {
                merged.add_total(&gone.latency, gone.latency_sum);
            }
            gone.limbo.clone()
        };
        // Outside the lock: the last of these handles may be the breaker's last, whose drop
        // runs its listeners' drops (user code).
        for b in &limbo {
            b.merge_latency(merged, now);
        }
    }

    /// Evicts now what a sweep would (keys idle for `idle_for`, then the least recently
    /// called closed keys above `max_keys`) and returns how many keys it evicted. Sweeps also
    /// run on their own when new keys arrive; call this to free idle keys of a family that
    /// sees no new ones. Returns 0 without waiting if another thread is sweeping.
    pub fn sweep(&self) -> usize {
        let evicted = {
            let guard = self.family.map.guard();
            self.family.sweep(&guard)
        };
        // Unpinned now, so the slots this sweep removed are reclaimed (unless another thread
        // is still pinned): the breakers nothing else holds are freed here, not at the next
        // sweep.
        self.family.totals.prune();
        evicted
    }

    /// Calls `f` with every key held now and its breaker, in no particular order. Keys added
    /// or evicted meanwhile may or may not be seen.
    pub fn for_each(&self, mut f: impl FnMut(&K, &Breaker)) {
        let guard = self.family.map.guard();
        for (k, slot) in self.family.map.iter(&guard) {
            f(k, &slot.breaker);
        }
    }

    /// The number of keys whose breaker is open, half-open or forced open now.
    pub fn open_keys(&self) -> usize {
        let mut n = 0;
        self.for_each(|_, b| {
            n += usize::from(matches!(
                b.state(),
                State::Open | State::HalfOpen | State::ForcedOpen
            ))
        });
        n
    }
}

impl<K: Hash + Eq, S: BuildHasher> fmt::Debug for BreakerMap<K, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerMap")
            .field("name", &self.family.name)
            .field("keys", &self.family.map.len())
            .finish()
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn both<T: Send + Sync>() {}
    both::<BreakerMap<String>>();
}
