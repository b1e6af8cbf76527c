//! Keyed families: a breaker per host, tenant or shard, from one config, in bounded memory.
//!
//! # The protocol
//!
//! * The keys live in a `papaya::HashMap` (lock-free reads; memory reclaimed by `seize` once no
//!   reader can still see it). [`BreakerMap::call`] pins the map, finds its key's breaker and
//!   runs through it while pinned: no reference count. A permit from
//!   [`BreakerMap::try_acquire`] and [`BreakerMap::call_async`] hold a handle instead.
//! * An evicted breaker waits in `limbo`, where [`BreakerMap::evicted`] counts it as it reads,
//!   until its handle there is the last one: its slot freed (after the last pinned call) and
//!   every permit recorded. Then a sweep or `evicted` folds its counts into the totals and
//!   drops it, in the same critical section. So every call's outcome is counted once, in a
//!   live breaker or in the evicted totals (`tests/keyed.rs` checks this under racing
//!   eviction).
//! * Recency costs a call two plain loads and, once per sweep, a store: each slot keeps the
//!   sweep `tick` in which a call last found it, and each sweep turns "touched since the last
//!   sweep" into a time (`seen`, an upper bound on the last call's time).
//! * One sweep runs at a time (a flag; a thread that finds one running goes on).
//!   It evicts keys idle for `idle_for`, then, above `max_keys`, the least recently seen closed
//!   keys down to 7/8 of `max_keys`. It runs when a new key arrives and either the map holds
//!   `max_keys` (and has grown by an eighth of it since the last sweep) or an eighth of
//!   `idle_for` has passed since the last one; or when [`BreakerMap::sweep`] is called.
//! * Never evicted: a key open before its open time has run, forced open, or disabled. A key
//!   half-open, or open with its time run, is evicted only once idle. Removal re-checks the
//!   state (`remove_if`), and a breaker found open, forced open or disabled right after the
//!   removal has its state carried over to the key's new breaker. Limit: a call admitted before
//!   the removal that opens the removed breaker later (a permit held across a sweep) opens only
//!   that breaker; the key's next breaker starts closed (`tests/adversarial.rs`,
//!   `keyed_a_call_admitted_before_eviction_that_opens_carries_over`, ignored until fixed).
//! * When open keys fill the map: it grows past `max_keys` with keys it may not forget, up to
//!   twice `max_keys`; past that a new key shares one overflow breaker with the family's config
//!   until sweeps make room.

use core::borrow::Borrow;
use core::fmt;
use core::future::Future;
use core::hash::{BuildHasher, Hash};
use std::collections::hash_map::RandomState;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::breaker::{Breaker, OwnedPermit};
use crate::breaker::{Error, Rejected};
use crate::clock::nanos;
use crate::config::Config;
use crate::identity::Identity;
use crate::metrics::Metrics;
use crate::outcome::Outcome;
use crate::registry::Registry;
use crate::state::State;

/// A family of breakers, one per key, made from one config: one failing host, tenant or shard
/// opens its own breaker and no other.
///
/// Keys are created on first use. Looking one up by a borrowed form (`&str` for a `String`
/// key) does not allocate. The family is bounded by the config's
/// [`max_keys`](crate::ConfigBuilder::max_keys) and [`idle_for`](crate::ConfigBuilder::idle_for):
/// keys uncalled for `idle_for` are evicted, and above `max_keys` the least recently called
/// closed keys are. A key whose breaker is open before its open time has run, forced open or
/// disabled is never evicted, so an evicted and recreated key does not get a fresh closed
/// breaker while its host is still failing (one limit: a permit taken before the key's eviction
/// and failing after it opens only the evicted breaker; see the module doc). If such keys fill
/// the family, it grows with them up to
/// twice `max_keys`; past that, new keys share one overflow breaker (see
/// [`overflow`](BreakerMap::overflow)) until eviction makes room. The growth keeps every open
/// key's protection during a wide outage, at a bounded cost (about 250 bytes and the key per
/// key); the overflow breaker keeps new keys protected rather than unprotected, and memory
/// bounded, when even that is full.
///
/// Every breaker of a family shares its config (one allocation), except keys given their own
/// in a `[breakers.<name>.keys."<key>"]` table of `load_toml` before a registry family is
/// created, and its name: a rejection
/// names the family, and [`Metrics::name`] is the family's name.
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
pub struct BreakerMap<K, S = RandomState> {
    family: Arc<Family<K, S>>,
}

impl<K, S> Clone for BreakerMap<K, S> {
    /// Another handle to the same family.
    fn clone(&self) -> Self {
        BreakerMap {
            family: self.family.clone(),
        }
    }
}

struct Family<K, S> {
    map: papaya::HashMap<K, Slot, S>,
    name: Arc<Box<str>>,
    config: Config,
    /// The number of the current sweep period: what a call writes into the slot it finds.
    /// Starts at 2: a slot's 0 means "not called since it was created".
    tick: AtomicU64,
    /// When the current period began: the last sweep, or the family's creation.
    swept_at: AtomicU64,
    totals: Arc<Totals>,
    /// Set while a thread sweeps. A flag, not a lock: nobody waits for a sweep, and the
    /// user code a sweep runs (the clock, listeners of a state carried over) may panic.
    sweeping: AtomicBool,
    /// No recency or pressure sweep is due before this time, or before the map holds
    /// `sweep_len` keys.
    sweep_at: AtomicU64,
    sweep_len: AtomicUsize,
    overflow: OnceLock<Breaker>,
    max_keys: usize,
    hard_cap: usize,
    idle_for: u64,
    /// Configs for single keys (`[breakers.<family>.keys."<key>"]`), set once by
    /// [`Registry::family`] before the family is shared.
    key_configs: OnceLock<KeyConfigs<K>>,
}

/// The config of one key, if it has its own.
type KeyConfigs<K> = Box<dyn Fn(&K) -> Option<Config> + Send + Sync>;

/// A key's breaker and when it was last called.
struct Slot {
    breaker: Breaker,
    /// The `tick` in which a call last found the key; 0 if none has since its creation.
    touched: AtomicU64,
    /// A time no earlier than the last call, as of the last sweep.
    seen: AtomicU64,
}

/// What the breakers no longer in the family counted.
#[derive(Default)]
struct Totals(Mutex<Gone>);

#[derive(Default)]
struct Gone {
    evicted: Evicted,
    /// Evicted breakers that something else still holds (their slot, not freed yet while a
    /// pinned call may run; a permit; a user's handle), counted by `evicted` when read.
    limbo: Vec<Breaker>,
}

impl Totals {
    fn lock(&self) -> std::sync::MutexGuard<'_, Gone> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Folds in the breakers of `limbo` nothing else holds any more. Drops them after
    /// unlocking: a breaker's last drop runs its listeners' drops, which are user code.
    fn prune(&self) {
        let done: Vec<Breaker> = {
            let mut gone = self.lock();
            let done: Vec<Breaker> = gone.limbo.extract_if(.., |b| b.handles() == 1).collect();
            for b in &done {
                gone.add(b.counts());
            }
            done
        };
        drop(done);
    }
}

impl Gone {
    fn add(&mut self, [successes, failures, ignored, rejected, slow]: [u64; 5]) {
        let e = &mut self.evicted;
        e.calls += successes + failures + ignored + rejected;
        e.successes += successes;
        e.failures += failures;
        e.ignored += ignored;
        e.rejected += rejected;
        e.slow += slow;
    }
}

/// The counts of a family's evicted breakers, including calls that record into them after
/// the eviction (a permit taken before it, a handle from [`BreakerMap::get`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Evicted {
    /// Keys evicted.
    pub keys: u64,
    /// Calls asked for, run or rejected, by the breakers freed.
    pub calls: u64,
    /// Their successes.
    pub successes: u64,
    /// Their failures.
    pub failures: u64,
    /// Their calls counted neither way.
    pub ignored: u64,
    /// Their rejections.
    pub rejected: u64,
    /// Their slow calls.
    pub slow: u64,
}

/// How a key's breaker stands towards eviction.
#[derive(PartialEq, Eq)]
enum Class {
    /// Closed: evictable when idle or when the family is over `max_keys`.
    Closed,
    /// Half-open, or open with its open time run: evictable when idle.
    Spent,
    /// Open before its open time has run, forced open, disabled: never evicted.
    Kept,
}

fn class(b: &Breaker) -> Class {
    match b.state() {
        State::Closed => Class::Closed,
        State::HalfOpen => Class::Spent,
        State::Open => match b.export_state().open_remaining {
            Some(left) if left.is_zero() => Class::Spent,
            _ => Class::Kept,
        },
        _ => Class::Kept,
    }
}

impl<K: Hash + Eq + Clone> BreakerMap<K> {
    /// An empty family named `name`, not in the registry (see [`Registry::family`]).
    pub fn new(name: impl Into<String>, config: Config) -> Self {
        BreakerMap::with_hasher(name, config, RandomState::new())
    }
}

impl<K: Hash + Eq + Clone, S: BuildHasher> BreakerMap<K, S> {
    /// An empty family hashing its keys with `hasher`. The default, std's `RandomState`, is
    /// keyed per process, so keys taken from requests cannot be chosen to collide.
    pub fn with_hasher(name: impl Into<String>, config: Config, hasher: S) -> Self {
        let max_keys = config.max_keys as usize;
        let now = config.clock.coarse();
        let idle_for = nanos(config.idle_for).max(1);
        BreakerMap {
            family: Arc::new(Family {
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
                overflow: OnceLock::new(),
                max_keys,
                hard_cap: max_keys.saturating_mul(2),
                idle_for,
                config,
                key_configs: OnceLock::new(),
            }),
        }
    }

    /// The family's name.
    pub fn name(&self) -> &str {
        &self.family.name
    }

    /// The config every key's breaker is made with.
    pub fn config(&self) -> &Config {
        &self.family.config
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
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let guard = self.family.map.guard();
        self.family.find(key, &guard).call(f)
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
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let guard = self.family.map.guard();
        self.family.find(key, &guard).call_with(f, classify)
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
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let breaker = {
            let guard = self.family.map.guard();
            self.family.find(key, &guard).clone()
        };
        breaker.call_async(fut).await
    }

    /// Asks `key`'s breaker for leave to make one call, as [`Breaker::try_acquire_owned`]
    /// does: the permit holds a handle to the breaker (a reference-count increment), so it
    /// can be sent and kept across an eviction, and what it records is still counted.
    #[inline]
    pub fn try_acquire<Q>(&self, key: &Q) -> Result<OwnedPermit, Rejected>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let guard = self.family.map.guard();
        self.family.find(key, &guard).try_acquire_owned()
    }

    /// A handle to `key`'s breaker, if the key is held now. The handle keeps the breaker alive
    /// after an eviction; calls through it still count in [`evicted`](BreakerMap::evicted),
    /// and the breaker is freed once the handle is dropped.
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
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let guard = self.family.map.guard();
        self.family.find(key, &guard).clone()
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
            limbo: Vec::new(),
        };
        for b in &gone.limbo {
            sum.add(b.counts());
        }
        sum.evicted
    }

    /// Evicts now what a sweep would (keys idle for `idle_for`, then the least recently
    /// called closed keys above `max_keys`) and returns how many keys it evicted. Sweeps also
    /// run on their own when new keys arrive; call this to free idle keys of a family that
    /// sees no new ones. Returns 0 without waiting if another thread is sweeping.
    pub fn sweep(&self) -> usize {
        let guard = self.family.map.guard();
        let now = self.family.config.clock.coarse();
        self.family.sweep(now, &guard)
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

impl<K, S> Family<K, S>
where
    K: Hash + Eq + Clone,
    S: BuildHasher,
{
    /// `key`'s breaker, created if it is new.
    #[inline]
    fn find<'g, Q>(&'g self, key: &Q, guard: &'g impl papaya::Guard) -> &'g Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        match self.map.get(key, guard) {
            Some(slot) => {
                // Recency: a store only in the first call of a sweep period, so that threads
                // calling one key do not pass its line back and forth.
                let tick = self.tick.load(Ordering::Relaxed);
                if slot.touched.load(Ordering::Relaxed) != tick {
                    slot.touched.store(tick, Ordering::Relaxed);
                }
                &slot.breaker
            }
            None => self.insert(key, guard),
        }
    }

    #[cold]
    #[inline(never)]
    fn insert<'g, Q>(&'g self, key: &Q, guard: &'g impl papaya::Guard) -> &'g Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let now = self.config.clock.coarse();
        let len = self.map.len();
        if now >= self.sweep_at.load(Ordering::Relaxed)
            || len >= self.sweep_len.load(Ordering::Relaxed)
        {
            self.sweep(now, guard);
        }
        if self.map.len() >= self.hard_cap {
            return self.overflow.get_or_init(|| {
                Breaker::named(Identity::shared(self.name.clone()), self.config.clone())
            });
        }
        let key = key.to_owned();
        let slot = self.slot(now, &key);
        self.put(key, slot, guard)
    }

    fn slot(&self, now: u64, key: &K) -> Slot {
        let config = match self.key_configs.get().and_then(|own| own(key)) {
            Some(mut own) => {
                own.clock = self.config.clock.clone();
                own
            }
            None => self.config.clone(),
        };
        Slot {
            breaker: Breaker::named(Identity::shared(self.name.clone()), config),
            touched: AtomicU64::new(0),
            seen: AtomicU64::new(now),
        }
    }

    /// Inserts `slot` under `key` unless another thread was first; returns the breaker there.
    fn put<'g>(&'g self, key: K, slot: Slot, guard: &'g impl papaya::Guard) -> &'g Breaker {
        match self.map.try_insert(key, slot, guard) {
            Ok(slot) => &slot.breaker,
            // The loser's breaker saw no call.
            Err(e) => &e.current.breaker,
        }
    }

    fn sweep(&self, now: u64, guard: &impl papaya::Guard) -> usize {
        if self.sweeping.swap(true, Ordering::Acquire) {
            return 0;
        }
        let _sweeping = Sweeping(&self.sweeping);
        let tick = self.tick.load(Ordering::Relaxed);
        let began = self.swept_at.load(Ordering::Relaxed);
        let mut idle = Vec::new();
        let mut closed = Vec::new();
        for (key, slot) in self.map.iter(guard) {
            // A call in this period was before now. One that read the tick of the last period
            // but stored it after the last sweep looked was before that sweep.
            let touched = slot.touched.load(Ordering::Relaxed);
            let mut seen = slot.seen.load(Ordering::Relaxed);
            if touched == tick {
                seen = now;
            } else if touched + 1 == tick && seen < began {
                seen = began;
            }
            slot.seen.store(seen, Ordering::Relaxed);
            let is_idle = now.saturating_sub(seen) >= self.idle_for;
            match class(&slot.breaker) {
                Class::Closed | Class::Spent if is_idle => idle.push(key),
                Class::Closed => closed.push((seen, key)),
                _ => {}
            }
        }
        self.swept_at.store(now, Ordering::Relaxed);
        self.tick.store(tick + 1, Ordering::Relaxed);
        let mut evicted = 0;
        for key in idle {
            // Still idle: no call found it since this sweep began.
            evicted += usize::from(self.evict(key, now, guard, |slot| {
                slot.touched.load(Ordering::Relaxed) < tick && class(&slot.breaker) != Class::Kept
            }));
        }
        let len = self.map.len();
        if len >= self.max_keys {
            let low = self.max_keys - self.max_keys / 8;
            let excess = len - low;
            if excess < closed.len() {
                closed.select_nth_unstable_by_key(excess, |&(seen, _)| seen);
                closed.truncate(excess);
            }
            for (_, key) in closed {
                evicted += usize::from(self.evict(key, now, guard, |slot| {
                    class(&slot.breaker) == Class::Closed
                }));
            }
        }
        // Start reclaiming what was removed now rather than when this thread's batch fills.
        guard.flush();
        self.totals.prune();
        let len = self.map.len();
        self.sweep_at.store(
            now.saturating_add((self.idle_for / 8).max(1)),
            Ordering::Relaxed,
        );
        self.sweep_len.store(
            self.max_keys
                .max(len.saturating_add((self.max_keys / 8).max(1))),
            Ordering::Relaxed,
        );
        evicted
    }

    /// Removes `key` if `still` holds for its slot. A breaker that a call admitted before the
    /// removal opened since is not forgotten: its state goes to the key's new breaker.
    fn evict(
        &self,
        key: &K,
        now: u64,
        guard: &impl papaya::Guard,
        still: impl Fn(&Slot) -> bool,
    ) -> bool {
        let Ok(Some((key, slot))) = self.map.remove_if(key, |_, slot| still(slot), guard) else {
            return false;
        };
        {
            let mut gone = self.totals.lock();
            gone.evicted.keys += 1;
            gone.limbo.push(slot.breaker.clone());
        }
        // Checked before the removal; a call admitted before it (or a user's handle) may
        // have opened, forced or disabled the breaker since.
        if class(&slot.breaker) == Class::Kept {
            let shared = slot.breaker.export_state();
            let fresh = self.slot(now, key);
            let there = self.put(key.clone(), fresh, guard);
            if there.state() == State::Closed {
                there.import_state(&shared);
            }
        }
        true
    }
}

/// Clears the sweeping flag, also if the sweep panics.
struct Sweeping<'a>(&'a AtomicBool);

impl Drop for Sweeping<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
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

/// One key of a family in [`Registry::families`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct KeyMetrics {
    /// The key, as it displays.
    pub key: String,
    /// Its breaker's metrics.
    pub metrics: Metrics,
}

/// A keyed family as [`Registry::families`] lists it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FamilyMetrics {
    /// The family's name.
    pub name: String,
    /// Every key held, sorted by key.
    pub keys: Vec<KeyMetrics>,
    /// Keys whose breaker is open, half-open or forced open.
    pub open_keys: usize,
    /// What evicted keys counted.
    pub evicted: Evicted,
    /// The overflow breaker, if it has been needed.
    pub overflow: Option<Metrics>,
}

/// A registered family as the registry sees it, whatever its key type.
trait View: Send + Sync {
    fn metrics(&self) -> FamilyMetrics;
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<K> View for BreakerMap<K>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
{
    fn metrics(&self) -> FamilyMetrics {
        let mut keys = Vec::new();
        self.for_each(|k, b| {
            keys.push(KeyMetrics {
                key: k.to_string(),
                metrics: b.metrics(),
            })
        });
        keys.sort_by(|a, b| a.key.cmp(&b.key));
        let open_keys = keys
            .iter()
            .filter(|k| {
                matches!(
                    k.metrics.state,
                    State::Open | State::HalfOpen | State::ForcedOpen
                )
            })
            .count();
        FamilyMetrics {
            name: self.name().to_owned(),
            keys,
            open_keys,
            evicted: self.evicted(),
            overflow: self.overflow().map(|b| b.metrics()),
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The registry's families, by name. Apart from the named breakers: a family and a breaker may
/// share a name.
static FAMILIES: Mutex<Vec<Named>> = Mutex::new(Vec::new());

type Named = (Box<str>, Arc<dyn View>);

/// [`Registry::family`] found a family of that name with another key type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the keyed family '{name}' already exists with keys of another type than {wanted}")]
pub struct KeyTypeMismatch {
    name: String,
    wanted: &'static str,
}

/// Whether a keyed family named `name` exists (`load_toml` configures only those that do
/// not).
#[cfg_attr(not(feature = "serde"), allow(dead_code))]
pub(crate) fn family_exists(name: &str) -> bool {
    FAMILIES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|(n, _)| **n == *name)
}

impl Registry {
    /// The keyed family named `name`, created with `config()` if it does not exist yet. Its
    /// keys must display (for [`families`](Registry::families)); it lives as long as the
    /// process. A config given to `name` by [`configure`](Registry::configure) or
    /// `load_toml` (a `[breakers.<name>]` table) before the family is
    /// created is used instead of `config()` (which then does not run); a clock given by
    /// [`set_clock`](Registry::set_clock) before then replaces the config's, and a
    /// `[breakers.<name>.keys."<key>"]` table gives the key that displays as `<key>` its own
    /// config (with the family's clock). These apply only to a family created after them. Fails if a family of that name holds keys of another type.
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config};
    ///
    /// let tenants = registry().family::<u64>("billing", Config::default)?;
    /// tenants.call(&42, || Ok::<_, std::io::Error>(()))?;
    /// let listed = registry().families();
    /// let billing = listed.iter().find(|f| f.name == "billing").unwrap();
    /// assert_eq!(billing.keys[0].key, "42");
    /// assert!(registry().family::<String>("billing", Config::default).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn family<K>(
        &self,
        name: &str,
        config: impl FnOnce() -> Config,
    ) -> Result<BreakerMap<K>, KeyTypeMismatch>
    where
        K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    {
        let mismatch = || KeyTypeMismatch {
            name: name.to_owned(),
            wanted: std::any::type_name::<K>(),
        };
        let found = |families: &[Named]| {
            families
                .iter()
                .find(|(n, _)| **n == *name)
                .map(|(_, view)| {
                    view.as_any()
                        .downcast_ref::<BreakerMap<K>>()
                        .cloned()
                        .ok_or_else(mismatch)
                })
        };
        let families = || FAMILIES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = found(&families()) {
            return known;
        }
        // The config closure is user code: it runs outside the lock (and may create families).
        let crate::registry::Preset {
            config: preset,
            clock,
            keys,
        } = self.family_preset(name);
        let mut config = preset.unwrap_or_else(config);
        if let Some(clock) = clock {
            config.clock = crate::clock::ClockRef::Custom(clock);
        }
        // Made outside the lock too: a new family reads its clock, which is user code.
        let map = BreakerMap::<K>::new(name, config);
        if !keys.is_empty() {
            // A key's own config is looked up as the key displays, when its breaker is made.
            let own: KeyConfigs<K> = Box::new(move |k: &K| keys.get(&k.to_string()).cloned());
            let _ = map.family.key_configs.set(own);
        }
        let mut all = families();
        if let Some(known) = found(&all) {
            drop(all);
            // Another thread's family stands; ours (and the user's clock in it) is dropped
            // outside the lock.
            drop(map);
            return known;
        }
        all.push((name.into(), Arc::new(map.clone())));
        Ok(map)
    }

    /// Every registered keyed family with its keys, their states and metrics, sorted by name.
    pub fn families(&self) -> Vec<FamilyMetrics> {
        let views: Vec<Arc<dyn View>> = FAMILIES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(_, v)| v.clone())
            .collect();
        let mut all: Vec<FamilyMetrics> = views.iter().map(|v| v.metrics()).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}

// The cost of a key's slot beside its breaker (the breaker is 192 bytes; see breaker.rs).
#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Slot>() == 24);

#[allow(dead_code)]
fn _assert_send_sync() {
    fn both<T: Send + Sync>() {}
    both::<BreakerMap<String>>();
}
