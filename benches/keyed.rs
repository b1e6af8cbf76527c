//! Per-key breakers: a key lookup plus a closed call at 10 000 keys, against the
//! direct call and against the maps one could keep breakers in by hand.
//!
//! Contenders, each holding 10 000 `String` keys (`host-<i>.example`) looked up by `&str` in a
//! shuffled order:
//! - `breakermap`: `BreakerMap::call` (papaya inside; the call runs while the map is pinned),
//!   with its default hasher (`KeyHasher`: foldhash seeded from the OS), and
//!   `breakermap_siphash` with std's SipHash `RandomState`;
//! - `papaya`, `scc_hashindex`, `dashmap`: the map crates with a `Breaker` per key, the call
//!   made through a borrowed value;
//! - `quick_cache`: its `get` clones the value out (a handle: a reference-count increment);
//! - `moka`: `moka::sync::Cache`, whose `get` also clones the value out, and records the read
//!   for its eviction policy;
//! - `rwlock_hashmap`: std `HashMap` behind `RwLock`, the call under the read lock;
//! - `mutex_hashmap`: behind `Mutex`, the handle cloned out so the call runs unlocked;
//! - `vec_floor`: a control, not a map: a `Vec<Breaker>` indexed by the key's number, visited
//!   in the same order. No hashing and no key compare: what is left is the breaker call and
//!   its cache and TLB misses, the floor under every map in `keyed_1t`.
//! - `hashed_floor`: a control, not a map either: a std `HashMap` with `BreakerMap`'s hasher,
//!   filled before the run and read through a shared reference with no lock, no guard and no
//!   cache. A lookup that hashes its key pays at least this: the hash, one probe, one key
//!   compare and the call.
//! - `inline_floor`: the lowest control that hashes: a hashbrown table holding each key of up
//!   to 23 bytes in place, compared inline, with the same hasher, read through a shared
//!   reference with no guard and no recency mark. A lookup that hashes a short key pays at
//!   least this. `inline_floor_pinned` is the same under papaya's guard, entered and left per
//!   call as `BreakerMap` does.
//!
//! Each contender's keys and breakers are allocated in a loop of their own, so no contender's
//! memory is interleaved with the others' (which spread each map over ten times the pages).
//!
//! The same with `u64` keys (`keyed_u64_1t`, `keyed_u64_1t_hot`, `keyed_u64_1t_same`; one thread):
//! the controls, `BreakerMap<u64>`, dashmap and `RwLock<HashMap>` (each with its default
//! hasher), over 10 000 keys spread over the `u64`s.
//!
//! Groups: `keyed_1t` (one thread, uniform over the 10 000 keys: cache misses dominate),
//! `keyed_1t_hot` (64 hot keys), `keyed_1t_same` (one key), `keyed_2t_same` (two threads, one
//! key), `keyed_2t_own` (two threads, each on one key of its own: the control for
//! `keyed_2t_same`, the same work without sharing, so that what two threads cost on this machine
//! whatever they share is not read as contention), `keyed_2t_distinct` (two threads, each
//! uniform over its own half of the keys). `direct` is the bare call; `single_breaker` one
//! `Breaker::new` breaker with no lookup. `keyed_parts` splits a one-key lookup into its pieces
//! (the hash, papaya's guard, the guard and the probe without the call).
//!
//! `scripts/bench` runs it with the other benches and writes its table, its targets and the
//! map comparison into BENCHMARKS.md. Smoke run: `cargo bench --bench keyed -- --test`.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::hint::black_box;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use breakerbox::{Breaker, BreakerMap, Config, KeyHasher};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};

mod common;
use common::*;

const KEYS: usize = 10_000;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

fn config() -> Config {
    Config::builder()
        .failures(5)
        .open_for(LONG)
        .max_keys(2 * KEYS as u32)
        .build()
        .expect("valid config")
}

fn keys() -> Arc<Vec<String>> {
    Arc::new((0..KEYS).map(|i| format!("host-{i}.example")).collect())
}

/// A fixed pseudo-random visiting order over `range` (xorshift), so no contender gets a
/// friendlier sequence.
fn order(range: std::ops::Range<usize>, n: usize, seed: u64) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (range.start + (x % range.len() as u64) as usize) as u32
        })
        .collect()
}

/// What each contender does per call: look the key up and call through its breaker.
trait Lookup: Send + Sync + 'static {
    fn call(&self, key: &str, index: u32, x: u64) -> u64;

    /// `n` calls on the keys in `order`, cycling; returns a digest. A default method: one
    /// virtual call per batch, and the calls themselves dispatched statically.
    #[inline(never)]
    fn batch(&self, keys: &[String], order: &[u32], n: u64) -> u64 {
        let mut sum = 0u64;
        let mut i = 0;
        for j in 0..n {
            let index = order[i];
            let key = keys[index as usize].as_str();
            sum = sum.wrapping_add(self.call(black_box(key), black_box(index), black_box(j)));
            i += 1;
            if i == order.len() {
                i = 0;
            }
        }
        sum
    }
}

struct Direct;
impl Lookup for Direct {
    #[inline(always)]
    fn call(&self, _: &str, _: u32, x: u64) -> u64 {
        protected(x).unwrap_or(1)
    }
}

struct Single(Breaker);
impl Lookup for Single {
    #[inline(always)]
    fn call(&self, _: &str, _: u32, x: u64) -> u64 {
        self.0.call(|| protected(x)).unwrap_or(1)
    }
}

impl<S: BuildHasher + Send + Sync + 'static> Lookup for BreakerMap<String, S> {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        BreakerMap::call(self, key, || protected(x)).unwrap_or(1)
    }
}

struct Papaya(papaya::HashMap<String, Breaker>);
impl Lookup for Papaya {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        let m = self.0.pin();
        m.get(key).expect("key").call(|| protected(x)).unwrap_or(1)
    }
}

struct Scc(scc::HashIndex<String, Breaker>);
impl Lookup for Scc {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        self.0
            .peek_with(key, |_, b| b.call(|| protected(x)).unwrap_or(1))
            .expect("key")
    }
}

struct Dash(dashmap::DashMap<String, Breaker>);
impl Lookup for Dash {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        self.0
            .get(key)
            .expect("key")
            .call(|| protected(x))
            .unwrap_or(1)
    }
}

struct Quick(quick_cache::sync::Cache<String, Breaker>);
impl Lookup for Quick {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        self.0
            .get(key)
            .expect("key")
            .call(|| protected(x))
            .unwrap_or(1)
    }
}

struct Moka(moka::sync::Cache<String, Breaker>);
impl Lookup for Moka {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        self.0
            .get(key)
            .expect("key")
            .call(|| protected(x))
            .unwrap_or(1)
    }
}

struct Rw(RwLock<HashMap<String, Breaker>>);
impl Lookup for Rw {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        let m = self.0.read().unwrap();
        m.get(key).expect("key").call(|| protected(x)).unwrap_or(1)
    }
}

struct Mx(Mutex<HashMap<String, Breaker>>);
impl Lookup for Mx {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        let b = self.0.lock().unwrap().get(key).expect("key").clone();
        b.call(|| protected(x)).unwrap_or(1)
    }
}

struct Floor(Vec<Breaker>);
impl Lookup for Floor {
    #[inline(always)]
    fn call(&self, _: &str, index: u32, x: u64) -> u64 {
        self.0[index as usize].call(|| protected(x)).unwrap_or(1)
    }
}

/// Read-only, so shared by the threads without a lock: see the module doc.
struct HashedFloor(HashMap<String, Breaker, KeyHasher>);
impl Lookup for HashedFloor {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        self.0
            .get(key)
            .expect("key")
            .call(|| protected(x))
            .unwrap_or(1)
    }
}

/// A key of up to 23 bytes, zero-padded, in place (`inline_floor`).
type Inline = [u8; 24];

fn inline(key: &str) -> Inline {
    let mut room = [0; 24];
    room[..key.len()].copy_from_slice(key.as_bytes());
    room[23] = key.len() as u8;
    room
}

/// Read-only, as `HashedFloor`: see the module doc.
struct InlineFloor(hashbrown::HashTable<(Inline, Breaker)>, KeyHasher);
impl Lookup for InlineFloor {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        let probe = inline(key);
        self.0
            .find(self.1.hash_one(key), |(k, _)| *k == probe)
            .expect("key")
            .1
            .call(|| protected(x))
            .unwrap_or(1)
    }
}

/// `inline_floor` under papaya's guard, entered and left per call as `BreakerMap` does.
struct PinnedInlineFloor(InlineFloor, papaya::HashMap<String, Breaker, KeyHasher>);
impl Lookup for PinnedInlineFloor {
    #[inline(always)]
    fn call(&self, key: &str, i: u32, x: u64) -> u64 {
        let guard = self.1.guard();
        let r = self.0.call(key, i, x);
        drop(black_box(guard));
        r
    }
}

/// An `InlineFloor` of `keys` (each at most 23 bytes), with a hasher of its own.
fn inline_floor(keys: &[String]) -> InlineFloor {
    let hasher = KeyHasher::new();
    let mut table = hashbrown::HashTable::with_capacity(KEYS);
    for k in keys {
        assert!(k.len() <= 23, "{k}: a short key");
        let rehash = |(k, _): &(Inline, Breaker)| {
            let len = usize::from(k[23]);
            hasher.hash_one(std::str::from_utf8(&k[..len]).expect("a key's UTF-8"))
        };
        table.insert_unique(hasher.hash_one(k.as_str()), (inline(k), breaker(k)), rehash);
    }
    InlineFloor(table, hasher)
}

/// `keyed_parts`: the hash alone.
struct HashOnly<S>(S);
impl<S: BuildHasher + Send + Sync + 'static> Lookup for HashOnly<S> {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        self.0.hash_one(key) ^ x
    }
}

/// `keyed_parts`: papaya's guard alone (enter and leave), as `BreakerMap` takes it per call.
struct GuardOnly(papaya::HashMap<String, Breaker, KeyHasher>);
impl Lookup for GuardOnly {
    #[inline(always)]
    fn call(&self, _: &str, _: u32, x: u64) -> u64 {
        let guard = self.0.guard();
        black_box(&guard);
        x
    }
}

/// `keyed_parts`: the guard, the hash and the probe, without the call.
struct GetOnly(papaya::HashMap<String, Breaker, KeyHasher>);
impl Lookup for GetOnly {
    #[inline(always)]
    fn call(&self, key: &str, _: u32, x: u64) -> u64 {
        let guard = self.0.guard();
        let b = self.0.get(key, &guard).expect("key");
        (std::ptr::from_ref(b) as u64) ^ x
    }
}

fn breaker(key: &str) -> Breaker {
    Breaker::new(key, config())
}

/// Every contender, filled with the keys, each in a loop of its own (so that each one's
/// allocations are contiguous, as they would be in a process holding one of them).
fn contenders(keys: &[String]) -> Vec<(&'static str, Arc<dyn Lookup>)> {
    let bm: BreakerMap<String> = BreakerMap::new("bench.keyed", config());
    for k in keys {
        bm.call(k.as_str(), || Ok::<_, CallError>(()))
            .expect("closed");
    }
    assert_eq!(bm.len(), KEYS);
    let bs = BreakerMap::with_hasher(
        "bench.keyed.siphash",
        config(),
        std::hash::RandomState::new(),
    );
    for k in keys {
        bs.call(k.as_str(), || Ok::<_, CallError>(()))
            .expect("closed");
    }
    let pa = papaya::HashMap::new();
    for k in keys {
        pa.pin().insert(k.clone(), breaker(k));
    }
    let sc = scc::HashIndex::new();
    for k in keys {
        let _ = sc.insert_sync(k.clone(), breaker(k));
    }
    let da = dashmap::DashMap::new();
    for k in keys {
        da.insert(k.clone(), breaker(k));
    }
    let qc = quick_cache::sync::Cache::new(2 * KEYS);
    for k in keys {
        qc.insert(k.clone(), breaker(k));
    }
    let mo = moka::sync::Cache::new(2 * KEYS as u64);
    for k in keys {
        mo.insert(k.clone(), breaker(k));
    }
    let rw: HashMap<_, _> = keys.iter().map(|k| (k.clone(), breaker(k))).collect();
    let mx: HashMap<_, _> = keys.iter().map(|k| (k.clone(), breaker(k))).collect();
    let floor: Vec<Breaker> = keys.iter().map(|k| breaker(k)).collect();
    let mut hashed = HashMap::with_capacity_and_hasher(KEYS, KeyHasher::new());
    for k in keys {
        hashed.insert(k.clone(), breaker(k));
    }
    let inlined = inline_floor(keys);
    let pinned = PinnedInlineFloor(
        inline_floor(keys),
        papaya::HashMap::builder().hasher(KeyHasher::new()).build(),
    );
    vec![
        ("direct", Arc::new(Direct) as Arc<dyn Lookup>),
        (
            "single_breaker",
            Arc::new(Single(Breaker::new("bench.keyed.single", config()))),
        ),
        ("vec_floor", Arc::new(Floor(floor))),
        ("hashed_floor", Arc::new(HashedFloor(hashed))),
        ("inline_floor", Arc::new(inlined)),
        ("inline_floor_pinned", Arc::new(pinned)),
        ("breakermap", Arc::new(bm)),
        ("breakermap_siphash", Arc::new(bs)),
        ("papaya", Arc::new(Papaya(pa))),
        ("scc_hashindex", Arc::new(Scc(sc))),
        ("dashmap", Arc::new(Dash(da))),
        ("quick_cache", Arc::new(Quick(qc))),
        ("moka", Arc::new(Moka(mo))),
        ("rwlock_hashmap", Arc::new(Rw(RwLock::new(rw)))),
        ("mutex_hashmap", Arc::new(Mx(Mutex::new(mx)))),
    ]
}

/// The pieces of a one-key lookup (`keyed_parts`), beside the whole.
fn parts(keys: &[String]) -> Vec<(&'static str, Arc<dyn Lookup>)> {
    let with_hasher = || {
        let m = papaya::HashMap::builder()
            .hasher(KeyHasher::new())
            .resize_mode(papaya::ResizeMode::Blocking)
            .build();
        for k in keys {
            m.pin().insert(k.clone(), breaker(k));
        }
        m
    };
    vec![
        ("direct", Arc::new(Direct) as Arc<dyn Lookup>),
        ("hash_keyhasher", Arc::new(HashOnly(KeyHasher::new()))),
        (
            "hash_siphash",
            Arc::new(HashOnly(std::hash::RandomState::new())),
        ),
        ("papaya_guard", Arc::new(GuardOnly(with_hasher()))),
        ("papaya_guard_get", Arc::new(GetOnly(with_hasher()))),
        (
            "single_breaker",
            Arc::new(Single(Breaker::new("bench.keyed.single", config()))),
        ),
    ]
}

fn keyed(c: &mut Criterion) {
    let keys = keys();
    let all = contenders(&keys);
    let pieces = parts(&keys);

    // Uniform over all 10 000 keys: every lookup a likely cache miss (the worst case).
    let uniform = order(0..KEYS, 1 << 16, 0x2545_F491_4F6C_DD1D);
    // 64 hot keys spread over the 10 000, as real traffic is skewed: the lookup's own cost.
    let hot: Vec<u32> = order(0..64, 1 << 12, 0x9E37_79B9_7F4A_7C15)
        .into_iter()
        .map(|i| i * (KEYS as u32 / 64))
        .collect();
    // One key, the one-thread baseline of `keyed_2t_same`.
    let same = Arc::new(vec![7u32; 64]);
    for (group, seq, set) in [
        ("keyed_1t", &uniform, &all),
        ("keyed_1t_hot", &hot, &all),
        ("keyed_1t_same", &*same, &all),
        ("keyed_parts", &*same, &pieces),
    ] {
        let mut g = c.benchmark_group(group);
        for (id, m) in set {
            one(&mut g, id, |n| m.batch(&keys, seq, n));
        }
        g.finish();
    }

    let mut g = c.benchmark_group("keyed_2t_same");
    for (id, m) in &all {
        let (m, keys, same) = (m.clone(), keys.clone(), same.clone());
        two(&mut g, id, move |_| {
            let (m, keys, same) = (m.clone(), keys.clone(), same.clone());
            move |n| {
                black_box(m.batch(&keys, &same, n));
            }
        });
    }
    g.finish();

    // The control for `keyed_2t_same`: each thread on one key of its own.
    let own = Arc::new([vec![7u32; 64], vec![5_007u32; 64]]);
    let mut g = c.benchmark_group("keyed_2t_own");
    for (id, m) in &all {
        let (m, keys, own) = (m.clone(), keys.clone(), own.clone());
        two(&mut g, id, move |t| {
            let (m, keys, own) = (m.clone(), keys.clone(), own.clone());
            move |n| {
                black_box(m.batch(&keys, &own[t], n));
            }
        });
    }
    g.finish();

    let mut g = c.benchmark_group("keyed_2t_distinct");
    let halves = Arc::new([
        order(0..KEYS / 2, 1 << 16, 0x9E37_79B9_7F4A_7C15),
        order(KEYS / 2..KEYS, 1 << 16, 0xD1B5_4A32_D192_ED03),
    ]);
    for (id, m) in &all {
        let (m, keys, halves) = (m.clone(), keys.clone(), halves.clone());
        two(&mut g, id, move |t| {
            let (m, keys, halves) = (m.clone(), keys.clone(), halves.clone());
            move |n| {
                black_box(m.batch(&keys, &halves[t], n));
            }
        });
    }
    g.finish();
}

/// `keyed_u64_*`: the same cases with `u64` keys (a tenant's or a shard's number), which hash
/// in a few instructions and compare in one: what is left of each contender is its own work.
mod numbers {
    use super::*;

    /// What each contender does per call, with a `u64` key.
    pub trait Lookup: Send + Sync + 'static {
        fn call(&self, key: u64, index: u32, x: u64) -> u64;

        /// As [`super::Lookup::batch`].
        #[inline(never)]
        fn batch(&self, keys: &[u64], order: &[u32], n: u64) -> u64 {
            let mut sum = 0u64;
            let mut i = 0;
            for j in 0..n {
                let index = order[i];
                let key = keys[index as usize];
                sum = sum.wrapping_add(self.call(black_box(key), black_box(index), black_box(j)));
                i += 1;
                if i == order.len() {
                    i = 0;
                }
            }
            sum
        }
    }

    /// 10 000 distinct keys spread over the `u64`s (splitmix64 of their numbers), so that no
    /// hasher meets a friendlier pattern than a real id would give it.
    pub fn keys() -> Vec<u64> {
        (0..KEYS as u64)
            .map(|i| {
                let mut z = i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
            })
            .collect()
    }

    impl Lookup for Direct {
        #[inline(always)]
        fn call(&self, _: u64, _: u32, x: u64) -> u64 {
            protected(x).unwrap_or(1)
        }
    }

    impl Lookup for Single {
        #[inline(always)]
        fn call(&self, _: u64, _: u32, x: u64) -> u64 {
            self.0.call(|| protected(x)).unwrap_or(1)
        }
    }

    impl Lookup for Floor {
        #[inline(always)]
        fn call(&self, _: u64, index: u32, x: u64) -> u64 {
            self.0[index as usize].call(|| protected(x)).unwrap_or(1)
        }
    }

    impl<S: BuildHasher + Send + Sync + 'static> Lookup for BreakerMap<u64, S> {
        #[inline(always)]
        fn call(&self, key: u64, _: u32, x: u64) -> u64 {
            BreakerMap::call(self, &key, || protected(x)).unwrap_or(1)
        }
    }

    /// Read-only, shared without a lock: the floor of a hashed lookup.
    pub struct HashedFloor(HashMap<u64, Breaker, KeyHasher>);
    impl Lookup for HashedFloor {
        #[inline(always)]
        fn call(&self, key: u64, _: u32, x: u64) -> u64 {
            self.0[&key].call(|| protected(x)).unwrap_or(1)
        }
    }

    pub struct Dash(dashmap::DashMap<u64, Breaker>);
    impl Lookup for Dash {
        #[inline(always)]
        fn call(&self, key: u64, _: u32, x: u64) -> u64 {
            self.0
                .get(&key)
                .expect("key")
                .call(|| protected(x))
                .unwrap_or(1)
        }
    }

    pub struct Rw(RwLock<HashMap<u64, Breaker>>);
    impl Lookup for Rw {
        #[inline(always)]
        fn call(&self, key: u64, _: u32, x: u64) -> u64 {
            let m = self.0.read().unwrap();
            m[&key].call(|| protected(x)).unwrap_or(1)
        }
    }

    /// The contenders of `keyed_u64_*`: the controls, `BreakerMap`, dashmap and
    /// `RwLock<HashMap>`, each filled in a loop of its own.
    pub fn contenders(keys: &[u64]) -> Vec<(&'static str, Arc<dyn Lookup>)> {
        let named = |k: u64| Breaker::new(k.to_string(), config());
        let bm: BreakerMap<u64> = BreakerMap::new("bench.keyed.u64", config());
        for k in keys {
            bm.call(k, || Ok::<_, CallError>(())).expect("closed");
        }
        assert_eq!(bm.len(), KEYS);
        let floor: Vec<Breaker> = keys.iter().map(|&k| named(k)).collect();
        let mut hashed = HashMap::with_capacity_and_hasher(KEYS, KeyHasher::new());
        for &k in keys {
            hashed.insert(k, named(k));
        }
        let da = dashmap::DashMap::new();
        for &k in keys {
            da.insert(k, named(k));
        }
        let rw: HashMap<_, _> = keys.iter().map(|&k| (k, named(k))).collect();
        vec![
            ("direct", Arc::new(Direct) as Arc<dyn Lookup>),
            (
                "single_breaker",
                Arc::new(Single(Breaker::new("bench.keyed.u64.single", config()))),
            ),
            ("vec_floor", Arc::new(Floor(floor))),
            ("hashed_floor", Arc::new(HashedFloor(hashed))),
            ("breakermap", Arc::new(bm)),
            ("dashmap", Arc::new(Dash(da))),
            ("rwlock_hashmap", Arc::new(Rw(RwLock::new(rw)))),
        ]
    }
}

/// `keyed_u64_1t`, `keyed_u64_1t_hot`, `keyed_u64_1t_same`: one thread, `u64` keys, in the
/// same three orders as the `String` keys' groups.
fn keyed_u64(c: &mut Criterion) {
    let keys = numbers::keys();
    let all = numbers::contenders(&keys);
    let uniform = order(0..KEYS, 1 << 16, 0x2545_F491_4F6C_DD1D);
    let hot: Vec<u32> = order(0..64, 1 << 12, 0x9E37_79B9_7F4A_7C15)
        .into_iter()
        .map(|i| i * (KEYS as u32 / 64))
        .collect();
    let same = vec![7u32; 64];
    for (group, seq) in [
        ("keyed_u64_1t", &uniform),
        ("keyed_u64_1t_hot", &hot),
        ("keyed_u64_1t_same", &same),
    ] {
        let mut g = c.benchmark_group(group);
        for (id, m) in &all {
            one(&mut g, id, |n| m.batch(&keys, seq, n));
        }
        g.finish();
    }
}

fn one(g: &mut Group<'_>, id: &str, mut f: impl FnMut(u64) -> u64) {
    g.bench_function(id, |b| {
        b.iter_custom(|n| {
            let start = Instant::now();
            black_box(f(n));
            start.elapsed()
        })
    });
}

fn two<M, R>(g: &mut Group<'_>, id: &str, make: M)
where
    M: Fn(usize) -> R + Send + Sync + 'static,
    R: FnMut(u64),
{
    let pair = Pair::new(make);
    g.bench_function(id, |b| b.iter_custom(|n| pair.run(n)));
}

/// As benches/compare.rs: 30 samples, 2 s of measurement, 0.5 s of warm-up per case.
fn criterion() -> Criterion {
    Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(30)
        .without_plots()
}

criterion_group! {
    name = benches;
    config = criterion();
    targets = keyed, keyed_u64
}
criterion_main!(benches);
