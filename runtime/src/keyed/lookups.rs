//! Each thread's cache of a family's last lookups: a hot key's breaker found again without the
//! map (no pin, no probe of the shared table).
//!
//! # The protocol
//!
//! * A thread with a counter seat (`counters.rs`: an index no other live thread holds, handed
//!   to the seat's next thread with Release and Acquire after this one exits) below [`SEATS`]
//!   has, in each family, a cache of `SETS × WAYS` entries: a key, its hash, a handle to its
//!   breaker, and the sweep tick in which the entry last went through the map. Only the
//!   seat's thread reads or writes it, so it is plain memory (`Cell`s).
//! * The family counts the keys it has removed from its map (`Family::removals`: bumped with
//!   Release after each removal). A cache remembers the count its entries were found under; a
//!   lookup reads the count (Acquire) first and, if it moved, drops every entry before looking
//!   at any. A miss looks the key up in the map *after* that read, and files what it found
//!   under the count it read. So once a removal's bump is visible to a thread (it happened
//!   before the lookup), no entry found before the removal is used, nor one found after the
//!   bump that missed the removal (the Acquire pairs with the Release: a map read after it
//!   sees the removal). A lookup racing a removal may still reach the removed breaker, as a
//!   call that found the key in the map just before the removal does: the evicted breaker's
//!   counts are the family's (`evicted`), and its opening is carried to the key (see
//!   `Family::evict`). A removal is the only way a key's breaker is replaced or dropped: a
//!   reset, a forced state or a reload changes the breaker in place.
//! * Recency: an entry is used only in the sweep tick it last went through the map in
//!   (`Family::tick`, read Relaxed). The first lookup of a key in a new tick goes through the
//!   map, which marks the key called (`Family::find`), so a key kept in caches is never idle
//!   to a sweep while it is called.
//! * A `str` or `String` key is also found by where its bytes are: a thread calling a key
//!   held in one place (a `&'static str`, a field of its own) passes the same address each
//!   time. Each cache remembers, by that address, the entry a hit or a filing last used, and
//!   a lookup tries that entry before hashing the key. The address is only a hint: the entry
//!   is used only if its key equals the one given, byte for byte, and went through the map
//!   in this tick, as for any hit. Dropping the entries leaves the index as it is: an entry
//!   it names is then empty, or holds whatever key was filed there since, which the compare
//!   tells apart.
//! * A key is filed on its second miss in a short time (its set remembers the hash of a key
//!   that missed): a thread looking up many keys once each does not clone each key into its
//!   cache. A miss takes the place of another key's remembered hash only on a coin's toss
//!   (half the time), so that keys taking turns in one set (a thread calling a few shards in
//!   a fixed order) do not each displace the next for ever. The overflow breaker (a key the
//!   full family has no room for) is never filed.
//! * A thread whose lookups keep missing (many keys, each seldom repeated: [`STREAK`] misses
//!   in a row that filed nothing) sends all but one in [`SAMPLE`] of its lookups straight to
//!   the map, without hashing the key for the cache or probing it: there the cache only costs.
//!   The lookups that still try it file keys as before, and the first hit or filing among
//!   them gives the thread its cache back. The entries are kept meanwhile (and dropped on a
//!   removal, as ever).
//! * A lookup made while the thread's cache is lent to another (a call's closure calling the
//!   family again, a listener or a drop run by it) goes through the map: an entry lent out is
//!   never changed or dropped under its borrower. A call holds the cache while it runs only
//!   when the cache found its breaker; a call whose breaker the map found (under the map's
//!   guard, which it holds instead) gives the cache back before it runs.
//! * An entry keeps its breaker alive (a handle): a breaker evicted meanwhile is freed once
//!   the thread's next lookup in the family finds the count moved and drops its entries, or
//!   with the family. At most `SEATS × SETS × WAYS` such handles per family.
//!
//! `lookups/loom_tests.rs` models cached lookups racing a removal, with a map of loom atomics
//! in place of the family's.

use core::borrow::Borrow;
use core::cell::{Cell, UnsafeCell};
use core::hash::{BuildHasher, Hash};
use core::mem::ManuallyDrop;
use core::ops::Deref;

use super::hasher::KeyHasher;
use crate::breaker::Breaker;
use crate::sync::{AtomicU64, LazyBox, Ordering};

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;

/// Where a lookup the cache cannot answer goes: the family's map.
pub(super) trait Map<K> {
    /// What keeps the breakers [`find`](Map::find) gives alive: papaya's guard for the
    /// family's map.
    type Guard<'m>
    where
        Self: 'm;

    /// Pins the map for one lookup and its call.
    fn guard(&self) -> Self::Guard<'_>;

    /// `key`'s breaker in the map (created if the key is new), alive while `guard` is, and
    /// whether it is the key's own (not a breaker shared by keys the family has no room for).
    fn find<'g, 'm: 'g, Q>(&'m self, key: &Q, guard: &'g Self::Guard<'m>) -> (&'g Breaker, bool)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'static;
}

/// A key's breaker, found for one call, and what keeps it alive until this drops: the
/// thread's cache, lent to the call (an entry changes only through the lent cache), or the
/// map's guard.
///
/// PERF(`keyed_1t_same/breakermap`, `keyed_1t_hot/breakermap`): handed back rather than
/// passed to a closure, so that the caller's call through the breaker is written once, in the
/// caller, and inlined there as a lone breaker's is. Through a closure that the lookup called,
/// the compiler kept the call out of line: a call, its prologue and its result through memory
/// on every hit (paired runs: one key 9.5 -> 8.3 ns, 64 hot keys 16.2 -> 14.7 ns).
pub(super) struct Found<'a, K, G> {
    /// A bitwise copy of the handle the cache's entry or the map holds, never dropped.
    breaker: ManuallyDrop<Breaker>,
    _hold: Hold<'a, K, G>,
}

/// What a [`Found`] keeps until it drops; never read, only dropped.
#[allow(dead_code)]
enum Hold<'a, K, G> {
    Cache(Lent<'a, K>),
    Map(G),
}

/// A bitwise copy of `breaker`, never dropped (the handle's count is not given back twice).
///
/// # Safety
/// The copy is used only while what holds `breaker` keeps it alive.
#[inline(always)]
unsafe fn copy(breaker: &Breaker) -> ManuallyDrop<Breaker> {
    // SAFETY: a read of a valid handle; the caller's contract covers the copy's use.
    ManuallyDrop::new(unsafe { core::ptr::read(breaker) })
}

impl<K, G> Deref for Found<'_, K, G> {
    type Target = Breaker;
    #[inline(always)]
    fn deref(&self) -> &Breaker {
        &self.breaker
    }
}

/// The family's words a lookup reads: see the module doc.
pub(super) struct Stamps<'a> {
    /// Keys removed from the map so far.
    pub(super) removals: &'a AtomicU64,
    /// The sweep period.
    pub(super) tick: &'a AtomicU64,
}

/// Seats with a cache: live threads keep the low seat numbers, so a process with more threads
/// than this on one family has its extra threads look keys up in the map.
#[cfg(not(loom))]
const SEATS: usize = 64;
#[cfg(loom)]
const SEATS: usize = 8;
/// Sets and ways of a thread's cache. Eight ways, so that hot keys do not evict each other:
/// 64 keys placed at random in 32 sets put more than 8 in one set in about one placement in
/// 180, and more than 4 in most (about 2.4 of the 64 keys would then miss every time). A set's
/// eight tags are one cache line.
const SETS: usize = 32;
const WAYS: usize = 8;
const ENTRIES: usize = SETS * WAYS;
/// Slots of a cache's index by key address (2,304 bytes a cache): four for each of 64 hot
/// keys, so that few of them share a slot with another key (a shared slot answers only the
/// key whose lookup came last).
const PLACES: usize = 256;
/// Misses in a row (none filing a key, none a hit) after which a thread's lookups are taken
/// to miss, and only one in [`SAMPLE`] tries the cache. Far above what a cache answering even
/// one lookup in four gives by chance (0.75⁶⁴, about one in 10⁸).
const STREAK: u32 = 64;
/// One lookup in this many tries the cache while a thread's lookups keep missing. A lookup that
/// tries it then costs about as much as a hundred that skip it (its lines are out of the CPU's
/// caches by then): at one in 16, uniform lookups over 10 000 keys cost about 6 ns more than
/// with no cache; at one in 256 they read as with none (46.7 against 47.1 ns, BENCHMARKS.md).
/// A thread back on a few hot keys gets its cache back at the first of its sampled lookups
/// that files a key or hits one (the unit tests: within 20 000 lookups of 64 hot keys).
const SAMPLE: u32 = 256;
const _: () = assert!(
    ENTRIES <= 1 << 8,
    "an entry's index fits the byte `Cache::placed` keeps"
);

/// A family's caches, one per seat, each allocated on its thread's first lookup.
pub(super) struct Lookups<K> {
    seats: Box<[LazyBox<Cache<K>>]>,
    /// Places keys in the caches' sets. Not the map's hasher (which the map does not lend
    /// out): a key an attacker makes collide here only sends its lookups to the map.
    hasher: KeyHasher,
}

impl<K> Lookups<K> {
    pub(super) fn new() -> Self {
        Lookups {
            seats: (0..SEATS).map(|_| LazyBox::default()).collect(),
            hasher: KeyHasher::new(),
        }
    }

    /// `key`'s breaker: from this thread's cache if it holds the key, else from `map` (then
    /// filed in the cache).
    #[inline]
    pub(super) fn lookup<'a, M, Q>(
        &'a self,
        map: &'a M,
        stamps: Stamps<'_>,
        key: &Q,
    ) -> Found<'a, K, M::Guard<'a>>
    where
        M: Map<K>,
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'static,
    {
        let Some(mut lent) = self.lend() else {
            return through_map(map, key);
        };
        // Before any entry is used, and before the map is read on a miss.
        lent.sync(stamps.removals.load(Ordering::Acquire));
        let tick = stamps.tick.load(Ordering::Relaxed);
        let last = if lent.0.repeat.get() {
            lent.last(key, tick)
        } else {
            None
        };
        let found = match last {
            Some(b) => Ok(b),
            None => {
                lent.0.repeat.set(false);
                lent.find(key, &self.hasher, tick)
            }
        };
        match found {
            Ok(b) => Found {
                // SAFETY: the entry holding `b` changes only through the lent cache, which
                // the `Found` keeps until it drops.
                breaker: unsafe { copy(b) },
                _hold: Hold::Cache(lent),
            },
            Err(Miss::Skipped) => {
                drop(lent);
                through_map(map, key)
            }
            Err(miss) => file_from_map(lent, map, miss, tick, key),
        }
    }

    /// Drops this thread's entries if a key has been removed since they were made, so that
    /// the evicted breakers they hold can be freed now.
    pub(super) fn forget_removed(&self, removals: &AtomicU64) {
        if let Some(mut lent) = self.lend() {
            lent.sync(removals.load(Ordering::Acquire));
        }
    }

    /// This thread's cache, lent to the caller until the returned value drops; `None` if the
    /// thread has no seat below [`SEATS`] or has lent its cache already.
    #[inline]
    fn lend(&self) -> Option<Lent<'_, K>> {
        let cache = self
            .seats
            .get(crate::counters::current_seat()?)?
            .get_or_default();
        if cache.lent.replace(true) {
            return None;
        }
        Some(Lent(cache))
    }
}

/// A lookup without the thread's cache: `key`'s breaker from the map.
#[inline(never)]
fn through_map<'a, K, M, Q>(map: &'a M, key: &Q) -> Found<'a, K, M::Guard<'a>>
where
    M: Map<K>,
    K: Borrow<Q>,
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'static,
{
    let guard = map.guard();
    // SAFETY: the map keeps the breaker alive while `guard`, which the `Found` keeps, pins
    // it.
    let breaker = unsafe { copy(map.find(key, &guard).0) };
    Found {
        breaker,
        _hold: Hold::Map(guard),
    }
}

/// A lookup the cache missed: `key`'s breaker from the map, filed in the cache as `miss` says
/// (unless it is the overflow breaker). The cache is given back before the caller's call: the
/// breaker is the map's, kept by the guard, and a lookup the call makes may use the cache.
#[inline(never)]
fn file_from_map<'a, K, M, Q>(
    mut lent: Lent<'a, K>,
    map: &'a M,
    miss: Miss,
    tick: u64,
    key: &Q,
) -> Found<'a, K, M::Guard<'a>>
where
    M: Map<K>,
    K: Borrow<Q>,
    Q: Hash + Eq + ToOwned<Owned = K> + ?Sized + 'static,
{
    let guard = map.guard();
    let (b, own) = map.find(key, &guard);
    let filed = own && lent.put(miss, key, b, tick);
    lent.missed(filed);
    drop(lent);
    // SAFETY: as in `through_map`.
    let breaker = unsafe { copy(b) };
    Found {
        breaker,
        _hold: Hold::Map(guard),
    }
}

/// `a == b`, with `str` and `String` keys compared inline up to 32 bytes.
///
/// PERF(`keyed_1t_same/breakermap`): `==` on strings is a call of the C library's `bcmp`,
/// about a third of a cached one-key lookup's time; two to four word loads a side do it
/// inline. Any other type, and longer strings, use the type's own `==`.
#[inline(always)]
fn same_key<Q: Eq + ?Sized + 'static>(a: &Q, b: &Q) -> bool {
    match (key_bytes(a), key_bytes(b)) {
        (Some(a), Some(b)) => same_bytes(a, b),
        _ => a == b,
    }
}

/// The bytes of a `str` or `String` key (whose `==` is that of its bytes); `None` for any
/// other type. Decided at compile time.
#[inline(always)]
pub(super) fn key_bytes<Q: ?Sized + 'static>(key: &Q) -> Option<&[u8]> {
    use core::any::TypeId;
    if TypeId::of::<Q>() == TypeId::of::<str>() {
        // SAFETY: `Q` is `str`, whose value is its UTF-8 bytes, `size_of_val` of them.
        return Some(unsafe {
            core::slice::from_raw_parts(core::ptr::from_ref(key).cast::<u8>(), size_of_val(key))
        });
    }
    if TypeId::of::<Q>() == TypeId::of::<String>() {
        // SAFETY: `Q` is `String`.
        return Some(unsafe { &*core::ptr::from_ref(key).cast::<String>() }.as_bytes());
    }
    None
}

/// Where a `str` or `String` key's address goes in a cache's index by address, and the
/// address; `None` for any other key type.
#[inline(always)]
fn place<Q: ?Sized + 'static>(key: &Q) -> Option<(usize, usize)> {
    let at = key_bytes(key)?.as_ptr() as usize;
    // The two halves of the address's full product with an odd constant, folded: keys laid
    // out at a fixed stride (a `Vec` of `String`s, one allocation after another) spread over
    // the slots about as evenly as random addresses would, where a plain multiply's top bits
    // put strides of 16 or 48 bytes in a sixth fewer slots.
    let p = u128::from(at as u64) * 0x9E37_79B9_7F4A_7C15;
    let slot = (p as u64 ^ (p >> 64) as u64) as usize % PLACES;
    Some((slot, at))
}

/// `a == b` for byte strings, without a call for lengths up to 32: overlapping words from
/// each end.
#[inline(always)]
pub(super) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().unwrap_or([0; 8]));
    let half = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().unwrap_or([0; 4]));
    match n {
        0..4 => a.iter().zip(b).all(|(x, y)| x == y),
        4..8 => (half(a, 0) ^ half(b, 0)) | (half(a, n - 4) ^ half(b, n - 4)) == 0,
        8..=16 => (word(a, 0) ^ word(b, 0)) | (word(a, n - 8) ^ word(b, n - 8)) == 0,
        17..=32 => {
            (word(a, 0) ^ word(b, 0))
                | (word(a, 8) ^ word(b, 8))
                | (word(a, n - 16) ^ word(b, n - 16))
                | (word(a, n - 8) ^ word(b, n - 8))
                == 0
        }
        _ => a == b,
    }
}

/// One thread's cache in one family.
struct Cache<K> {
    lent: Cell<bool>,
    /// Lookups in a row that missed and filed nothing (see [`STREAK`]).
    misses: Cell<u32>,
    /// Lookups left to send straight to the map before the next one tries the cache.
    skip: Cell<u32>,
    /// The family's removal count the entries were found under.
    removals: Cell<u64>,
    /// The entry of the last hit.
    last: Cell<usize>,
    /// Whether the last hit was on the same entry as the hit before it: then the next lookup
    /// tries that entry first, with no hash (a thread calling one key). Cleared when that try
    /// fails, so that a thread cycling over several hot keys pays no key compare against the
    /// wrong entry before each hash.
    repeat: Cell<bool>,
    /// Per set: the hash of a key that missed (the next miss of the same key files it), or 0.
    missed: [Cell<u64>; SETS],
    /// A xorshift generator's state, for the coin a miss tosses (see the module doc).
    coin: Cell<u64>,
    /// Per set: the way the next filing replaces.
    next: [Cell<u8>; SETS],
    /// By key address (see [`place`]): the address of the key last found or filed with this
    /// slot, and its entry's index. A hint, checked as the module doc says.
    addresses: [Cell<usize>; PLACES],
    placed: [Cell<u8>; PLACES],
    /// How many lookups hashed their key.
    #[cfg(test)]
    hashed: Cell<u64>,
    hashes: Tags,
    /// In the cache itself, not behind a pointer of their own: a hit loads one pointer less.
    entries: [UnsafeCell<Option<Entry<K>>>; ENTRIES],
}

/// Per entry: its key's hash with the low bit set, or 0 when empty; a set's on one cache line.
#[repr(align(64))]
struct Tags([Cell<u64>; ENTRIES]);

const _: () = assert!(WAYS * 8 == 64, "a set's tags fill one cache line");

struct Entry<K> {
    key: K,
    breaker: Breaker,
    /// The sweep tick in which this entry last went through the map.
    tick: Cell<u64>,
}

impl<K> Default for Cache<K> {
    fn default() -> Self {
        Cache {
            lent: Cell::new(false),
            misses: Cell::new(0),
            skip: Cell::new(0),
            removals: Cell::new(0),
            last: Cell::new(0),
            repeat: Cell::new(false),
            missed: core::array::from_fn(|_| Cell::new(0)),
            coin: Cell::new(0x9E37_79B9_7F4A_7C15),
            next: core::array::from_fn(|_| Cell::new(0)),
            addresses: core::array::from_fn(|_| Cell::new(0)),
            placed: core::array::from_fn(|_| Cell::new(0)),
            #[cfg(test)]
            hashed: Cell::new(0),
            hashes: Tags(core::array::from_fn(|_| Cell::new(0))),
            entries: core::array::from_fn(|_| UnsafeCell::new(None)),
        }
    }
}

// SAFETY: a `Cache` is reached only through `Lookups::lend` on the thread holding its seat,
// which no other live thread holds; a seat passes to another thread only after its thread has
// exited, ordered by the seat's Release and Acquire (`counters.rs`). So the cache's cells are
// never accessed by two threads at once, and what it holds (`K: Send`, breakers) may move
// between threads with it.
unsafe impl<K: Send> Sync for Cache<K> {}

/// This thread's cache, lent out: the only access to it until dropped.
struct Lent<'a, K>(&'a Cache<K>);

impl<K> Drop for Lent<'_, K> {
    #[inline]
    fn drop(&mut self) {
        self.0.lent.set(false);
    }
}

/// Where a lookup that missed the cache may file what the map gives it.
enum Miss {
    /// The key's entry is there, from an earlier tick: refresh it.
    Stale(usize),
    /// Not there: file it if the set saw it miss just before.
    Absent { hash: u64 },
    /// Not tried: the thread's lookups keep missing (see [`STREAK`]).
    Skipped,
}

impl<K> Lent<'_, K> {
    /// Counts a lookup that missed: one that `filed` its key ends a streak of misses, and
    /// past [`STREAK`] of them the next `SAMPLE - 1` lookups skip the cache.
    #[inline]
    fn missed(&self, filed: bool) {
        let misses = if filed {
            0
        } else {
            self.0.misses.get().saturating_add(1)
        };
        self.0.misses.set(misses);
        if misses >= STREAK {
            self.0.skip.set(SAMPLE - 1);
        }
    }

    /// Drops every entry if the family's removal count moved from the one they were found
    /// under.
    #[inline]
    fn sync(&mut self, removals: u64) {
        if self.0.removals.get() != removals {
            self.clear(removals);
        }
    }

    #[cold]
    #[inline(never)]
    fn clear(&mut self, removals: u64) {
        self.0.removals.set(removals);
        for (h, e) in self.0.hashes.0.iter().zip(self.0.entries.iter()) {
            h.set(0);
            // SAFETY: this thread has the cache lent (see `Cache`'s `Sync`), and no reference
            // into its entries is alive: `last` and `find` hand them out borrowed from the
            // `Lent`, which this borrows mutably.
            drop(unsafe { (*e.get()).take() });
        }
    }

    #[inline]
    fn entry(&self, i: usize) -> Option<&Entry<K>> {
        // SAFETY: only this thread touches the entries (see `Cache`'s `Sync`), and an entry is
        // replaced or dropped only through `&mut self` (`set`, `clear`): not while the
        // reference returned here, borrowed from `self`, is alive.
        unsafe { (*self.0.entries[i].get()).as_ref() }
    }

    /// The entry of the last hit, if it holds `key` and went through the map in `tick`.
    #[inline(always)]
    fn last<Q>(&self, key: &Q, tick: u64) -> Option<&Breaker>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized + 'static,
    {
        self.held(self.0.last.get(), key, tick).map(|e| &e.breaker)
    }

    /// Entry `i`, if it holds `key` and went through the map in `tick`: a hit.
    #[inline(always)]
    fn held<Q>(&self, i: usize, key: &Q, tick: u64) -> Option<&Entry<K>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized + 'static,
    {
        let e = self.entry(i)?;
        (e.tick.get() == tick && same_key(e.key.borrow(), key)).then_some(e)
    }

    /// The entry last found or filed at `key`'s address, if it holds `key` and went through
    /// the map in `tick`; `None` also for a key type other than `str` and `String`.
    #[inline(always)]
    fn placed<Q>(&self, key: &Q, tick: u64) -> Option<&Breaker>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized + 'static,
    {
        let (slot, at) = place(key)?;
        if self.0.addresses[slot].get() != at {
            return None;
        }
        let i = usize::from(self.0.placed[slot].get());
        let e = self.held(i, key, tick)?;
        self.hit(i);
        Some(&e.breaker)
    }

    /// Remembers that `key`, at its address, was last found or filed in entry `i`.
    #[inline(always)]
    fn remember<Q: ?Sized + 'static>(&self, key: &Q, i: usize) {
        if let Some((slot, at)) = place(key) {
            self.0.addresses[slot].set(at);
            // `i < ENTRIES <= 256`: see the assertion by `PLACES`.
            self.0.placed[slot].set(i as u8);
        }
    }

    /// Notes a hit on entry `i` found at its address or by its hash: the next lookup tries it
    /// first if it was the last hit's too, and a streak of misses ends. (A hit of the last
    /// hit's entry, tried first, needs neither: the last hit was such a hit, after any miss.)
    #[inline(always)]
    fn hit(&self, i: usize) {
        self.0.repeat.set(self.0.last.replace(i) == i);
        self.0.misses.set(0);
    }

    /// `key`'s breaker if its entry went through the map in `tick` (tried at its address
    /// first, then in its set by its hash); else how to file it, or that the cache was not
    /// tried (one lookup in [`SAMPLE`] is, while the thread's lookups keep missing).
    ///
    /// PERF(`keyed_1t_same/breakermap`): the address is tried here, not in `Lookups::lookup`,
    /// which then grew enough for the compiler to stop inlining the call into it (1.2× slower
    /// on one key).
    #[inline]
    fn find<Q>(&self, key: &Q, hasher: &KeyHasher, tick: u64) -> Result<&Breaker, Miss>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized + 'static,
    {
        let skip = self.0.skip.get();
        if skip != 0 {
            self.0.skip.set(skip - 1);
            return Err(Miss::Skipped);
        }
        if let Some(b) = self.placed(key, tick) {
            return Ok(b);
        }
        let hash = hasher.hash_one(key);
        #[cfg(test)]
        self.0.hashed.set(self.0.hashed.get() + 1);
        let tag = hash | 1;
        let set = (hash >> 32) as usize % SETS;
        for i in set * WAYS..set * WAYS + WAYS {
            if self.0.hashes.0[i].get() == tag
                && let Some(e) = self.entry(i)
                && same_key(e.key.borrow(), key)
            {
                if e.tick.get() != tick {
                    return Err(Miss::Stale(i));
                }
                self.hit(i);
                self.remember(key, i);
                return Ok(&e.breaker);
            }
        }
        Err(Miss::Absent { hash })
    }

    /// Files what the map gave for a miss: `key`'s breaker `breaker`, found in `tick`; for an
    /// absent key only on its second miss in a row in its set. Whether it filed or refreshed
    /// an entry.
    fn put<Q>(&mut self, miss: Miss, key: &Q, breaker: &Breaker, tick: u64) -> bool
    where
        Q: ToOwned<Owned = K> + ?Sized + 'static,
    {
        match miss {
            Miss::Stale(i) => {
                if let Some(e) = self.entry(i)
                    && e.breaker.ptr_eq(breaker)
                {
                    e.tick.set(tick);
                    self.0.last.set(i);
                    self.remember(key, i);
                    return true;
                }
                // Replaced in the map under the same removal count cannot happen (a removal
                // bumps it); drop the entry rather than trust that.
                self.set(i, 0, None);
                false
            }
            // Never reaches the map's filing: `Lookups::lookup` sends it through the map alone.
            Miss::Skipped => false,
            Miss::Absent { hash } => {
                let set = (hash >> 32) as usize % SETS;
                let missed = self.0.missed[set].get();
                if missed != hash {
                    if missed == 0 || self.toss() {
                        self.0.missed[set].set(hash);
                    }
                    return false;
                }
                self.0.missed[set].set(0);
                let way = self.0.next[set].get();
                self.0.next[set].set((way + 1) % WAYS as u8);
                let i = set * WAYS + way as usize;
                self.set(
                    i,
                    hash | 1,
                    Some(Entry {
                        key: key.to_owned(),
                        breaker: breaker.clone(),
                        tick: Cell::new(tick),
                    }),
                );
                self.0.last.set(i);
                self.remember(key, i);
                true
            }
        }
    }

    /// A coin's toss: whether a miss takes another key's place in its set's `missed`.
    fn toss(&self) -> bool {
        let mut x = self.0.coin.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0.coin.set(x);
        x >> 63 == 1
    }

    fn set(&mut self, i: usize, tag: u64, entry: Option<Entry<K>>) {
        self.0.hashes.0[i].set(tag);
        // SAFETY: as in `clear`.
        let old = unsafe { core::mem::replace(&mut *self.0.entries[i].get(), entry) };
        // Dropped last: a breaker's drop may run user code (its listeners' drops), which may
        // look keys up again; the cache is still lent, so such lookups go through the map.
        drop(old);
    }
}
