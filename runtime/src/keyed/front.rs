//! A family's front table: a read-only index of its map's keys, looked in before the map.
//!
//! A lookup in the map (papaya) follows one pointer more than a plain hash table's (a
//! table's slot holds a pointer to a boxed entry), and over many keys each pointer is a cache
//! miss. The front table is a hash table (hashbrown's) built from the map, whose entries hold
//! what a call needs at once: the key to compare (a copy; a `String` of up to 23 bytes as its
//! bytes, in place, so that the compare reads no other line), a pointer to the map's slot (for
//! recency), the tick in which the slot was last marked through the entry (so that a call marks
//! it once a sweep period without reading it each time) and a copy of the map's handle to the
//! key's breaker. A hit reaches the breaker's state in fewer steps than an unshared std
//! `HashMap<String, Breaker>` would (no read of the key's heap buffer). A miss goes on to the
//! map.
//!
//! # The protocol
//!
//! * A table's keys and pointers never change once published: a new table replaces it
//!   (`publish`), and the old one is retired through the map's collector (`seize`), so it is
//!   freed only once every thread that was pinned when it was replaced has unpinned. A lookup
//!   reads the table under a pin of the map and uses what it finds only while pinned.
//! * The table points into the map's entries without owning them (its breaker copies are
//!   not counted handles). An entry is removed only by a sweep, which first tags every table
//!   entry pointing to the slot `GONE` (`forget`: by the slot's address, whatever the key's
//!   `Clone`, `Hash` and `Eq` do), then removes that slot, and no other, from the map, whose
//!   collector retires it. A lookup checks the tag before it reads the slot or the breaker.
//!   The collector orders the two sides as it does the map's own unlinking and retiring: a
//!   thread pinned when the entry is retired keeps it alive until it unpins, and a thread
//!   that pins after the retirement sees the tag, so no thread reads a freed entry. Tagging,
//!   removing and publishing all happen while the family's `sweeping` flag is held, so a
//!   table built from the map before a removal is never published after it untagged.
//! * A key the table lacks, or holds tagged, is looked up in the map: a key added since the
//!   table was built, one a sweep meant to evict but found called, or one evicted and made
//!   again. A lookup of a key the map holds but the table does not counts as a miss, and an
//!   eighth as many misses as the table holds keys (at least [`MIN_KEYS`]) rebuild it: the
//!   rebuild's cost, the map's length, is spread over at least as many lookups that paid the
//!   map's. A new key is not counted (a family whose keys are each called once would rebuild
//!   for nothing), nor is a table rebuilt for a family under [`MIN_KEYS`] keys. A sweep that
//!   has tagged over a quarter of the table rebuilds it, so that the evicted keys' copies are
//!   freed.
//! * What the protocol keeps from the map's own: a lookup racing an eviction may reach the
//!   evicted breaker, exactly as a lookup that found the key in the map just before its
//!   removal does (see `family.rs`); one that starts after the removal is visible to it (the
//!   family's `removals` count read with Acquire, as each thread's cache does) sees the tag,
//!   stored before the removal.
//!
//! The table holds no handle: an evicted breaker is freed when the map's entry is, as without
//! it.

use core::any::TypeId;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use core::mem::{ManuallyDrop, MaybeUninit};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use hashbrown::HashTable;

use super::lookups::{key_bytes, same_bytes};
use crate::breaker::Breaker;

/// The map's size from which a family keeps a front table: below it, each thread's cache of
/// its lookups answers most calls, and the table would only cost memory.
pub(super) const MIN_KEYS: usize = 64;

/// The family's hasher, shared by its map and its front table (the map does not lend its own
/// out), so that both place a key by the hash the user chose.
pub(super) struct SharedHasher<S>(Arc<S>);

impl<S> SharedHasher<S> {
    pub(super) fn new(hasher: S) -> Self {
        SharedHasher(Arc::new(hasher))
    }
}

impl<S> Clone for SharedHasher<S> {
    fn clone(&self) -> Self {
        SharedHasher(self.0.clone())
    }
}

impl<S: BuildHasher> BuildHasher for SharedHasher<S> {
    type Hasher = S::Hasher;

    #[inline]
    fn build_hasher(&self) -> S::Hasher {
        self.0.build_hasher()
    }
}

/// Set in an entry's slot word once a sweep is about to remove its key from the map.
const GONE: usize = 1;
/// Set in an entry's slot word, from its making, when the entry holds its key's bytes in
/// place of a copy of the key (see [`Entry::key`]).
const SHORT: usize = 2;
/// The longest `String` key an entry holds in place: its bytes fill the room of a `String`
/// but its last byte, which holds the length.
const SHORT_MAX: usize = size_of::<String>() - 1;

/// A key's slot in the map, and its breaker.
struct Entry<K, V> {
    /// The map's slot, tagged [`GONE`] once the key is being removed: the slot (and the map
    /// entry it is part of) may then be freed, and the entry is not used. Tagged [`SHORT`]
    /// if `key` holds bytes.
    slot: AtomicPtr<V>,
    /// A copy of the map's handle to the key's breaker, not counted as a handle: valid while
    /// the map's entry is, which reading `slot` already requires. Never dropped.
    breaker: ManuallyDrop<Breaker>,
    /// The sweep tick in which a lookup through this entry last marked the map's slot called
    /// (see [`Found::marked`]); 0 if none has.
    marked: AtomicU64,
    /// A copy of the key (its `Clone`); or, for a `String` key of at most [`SHORT_MAX`] bytes
    /// (the slot word tagged [`SHORT`]), the key's bytes, zeros after them and its length in
    /// the last byte. A lookup then compares the key without reading the `String`'s heap
    /// buffer: over many keys, a cache miss less than a copy's (or a std `HashMap`'s) costs.
    key: MaybeUninit<K>,
}

impl<K: Hash + 'static, V> Entry<K, V> {
    /// An entry for `key`, its `slot` and a bitwise copy of `breaker`.
    ///
    /// # Safety
    ///
    /// The entry is used only while the map's entry holding `slot` and `breaker` is alive.
    unsafe fn new(key: &K, slot: &V, breaker: &Breaker) -> Self
    where
        K: Clone,
    {
        const {
            assert!(
                align_of::<V>() > GONE | SHORT,
                "a slot's address leaves room for the tags"
            )
        };
        let mut word = core::ptr::from_ref(slot).cast_mut();
        let key = match key_bytes(key) {
            Some(bytes) if bytes.len() <= SHORT_MAX => {
                word = word.map_addr(|a| a | SHORT);
                let mut room = MaybeUninit::<K>::uninit();
                let at = room.as_mut_ptr().cast::<u8>();
                // SAFETY: `key_bytes` gave bytes, so `K` is `String` (a sized `str` cannot
                // be): `room` has `SHORT_MAX + 1` bytes, all written here, none read as a `K`.
                unsafe {
                    at.write_bytes(0, SHORT_MAX + 1);
                    at.copy_from_nonoverlapping(bytes.as_ptr(), bytes.len());
                    at.add(SHORT_MAX).write(bytes.len() as u8);
                }
                room
            }
            _ => MaybeUninit::new(key.clone()),
        };
        Entry {
            slot: AtomicPtr::new(word),
            // SAFETY: a bitwise copy of the map's handle, never dropped (`ManuallyDrop`), used
            // only while the map's entry holding the original is alive (the contract).
            breaker: ManuallyDrop::new(unsafe { core::ptr::read(breaker) }),
            marked: AtomicU64::new(0),
            key,
        }
    }

    /// The entry's key: its bytes, or its copy.
    #[inline(always)]
    fn key(&self) -> Key<'_, K> {
        if self.slot.load(Ordering::Relaxed).addr() & SHORT == 0 {
            // SAFETY: not tagged `SHORT`: `key` holds a `K` (see `new`).
            return Key::Whole(unsafe { self.key.assume_init_ref() });
        }
        // SAFETY: tagged `SHORT` at its making: all `SHORT_MAX + 1` bytes of `key` written
        // (see `new`), and never changed.
        let room =
            unsafe { core::slice::from_raw_parts(self.key.as_ptr().cast::<u8>(), SHORT_MAX + 1) };
        Key::Short(&room[..usize::from(room[SHORT_MAX])])
    }

    /// Whether the entry's key is `key`. An entry holding bytes is compared only with a `str`
    /// or `String` key (see [`compares`]).
    #[inline(always)]
    fn holds<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized + 'static,
    {
        match self.key() {
            Key::Whole(whole) => whole.borrow() == key,
            Key::Short(bytes) => key_bytes(key).is_some_and(|k| same_bytes(bytes, k)),
        }
    }

    /// The entry's key's hash: that of the key, or of the `str` its bytes are (which is a
    /// `String`'s hash).
    fn hash<S: BuildHasher>(&self, hasher: &S) -> u64 {
        match self.key() {
            Key::Whole(whole) => hasher.hash_one(whole),
            // SAFETY: the bytes of a `String` (see `new`), so UTF-8.
            Key::Short(bytes) => hasher.hash_one(unsafe { core::str::from_utf8_unchecked(bytes) }),
        }
    }
}

/// An entry's key, as it holds it.
enum Key<'a, K> {
    Whole(&'a K),
    Short(&'a [u8]),
}

impl<K, V> Drop for Entry<K, V> {
    fn drop(&mut self) {
        if self.slot.get_mut().addr() & SHORT == 0 {
            // SAFETY: not tagged `SHORT`: `key` holds a `K`, dropped only here.
            unsafe { self.key.assume_init_drop() };
        }
    }
}

/// Whether a table of `K` keys can compare its keys with `key`: not if its entries may hold
/// bytes (`K` is `String`) and `Q` is neither `str` nor `String` (a type a user's own `Borrow`
/// impl lets `String` borrow as). Such a lookup goes to the map, and is no miss of the table's.
#[inline(always)]
pub(super) fn compares<K: 'static, Q: ?Sized + 'static>(key: &Q) -> bool {
    TypeId::of::<K>() != TypeId::of::<String>() || key_bytes(key).is_some()
}

/// A key the front table holds.
pub(super) struct Found<'g, V> {
    /// The key's slot in the map.
    pub(super) slot: &'g V,
    /// The key's breaker.
    pub(super) breaker: &'g Breaker,
    /// The tick in which a lookup through this entry last marked `slot` called. Only a hint,
    /// kept beside the entry (a line the lookup has read already) so that a call need not
    /// load the slot's own mark (a line of the map's, a cache miss over many keys) to learn
    /// that its key is marked in this tick: a lookup that finds this equal to the tick skips
    /// the mark, and one that does not marks the slot, then this.
    pub(super) marked: &'g AtomicU64,
}

/// One published table: see the module doc.
struct Table<K, V, S> {
    entries: HashTable<Entry<K, V>>,
    hasher: SharedHasher<S>,
    /// Entries tagged [`GONE`] so far.
    gone: AtomicUsize,
}

/// The family's current front table, if it has one yet.
pub(super) struct Front<K, V, S> {
    current: AtomicPtr<Table<K, V, S>>,
    /// The map's collector's batch size (see [`batch_size`]).
    batch: usize,
}

/// The batch size of a family's collector: seize's default (32, or the number of CPUs if
/// more). The collector retires a thread's batch of retired objects only once it holds that
/// many, and at least as many as there are pinned threads; a replaced table is padded up to it
/// (see `publish`), so that it is not left in a thread's batch that fills seldom.
pub(super) fn batch_size() -> usize {
    static BATCH: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BATCH.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, usize::from)
            .max(32)
            .next_power_of_two()
    })
}

// SAFETY: a table is shared by every thread that pins the map, and may be freed on any of
// them (by the collector). Its slot pointers and breaker copies are to the map's values,
// which the map itself shares across threads; its keys and hasher are `Send + Sync`.
unsafe impl<K: Send + Sync, V: Send + Sync, S: Send + Sync> Send for Front<K, V, S> {}
// SAFETY: as for `Send`: lookups only read a published table (and its atomics).
unsafe impl<K: Send + Sync, V: Send + Sync, S: Send + Sync> Sync for Front<K, V, S> {}

impl<K, V, S> Front<K, V, S> {
    /// No table yet; `batch` is the map's collector's batch size.
    pub(super) fn new(batch: usize) -> Self {
        Front {
            current: AtomicPtr::new(core::ptr::null_mut()),
            batch,
        }
    }

    /// The current table, if there is one.
    ///
    /// `guard` must pin the map whose collector retires this front's tables (the family's).
    #[inline]
    fn table<'g>(&self, guard: &'g impl papaya::Guard) -> Option<&'g Table<K, V, S>> {
        let table = guard.protect(&self.current, Ordering::Acquire);
        // SAFETY: a published table is freed only through the map's collector, after every
        // thread pinned when it was replaced has unpinned; this thread is pinned (`guard`).
        unsafe { table.as_ref() }
    }

    /// `key`'s slot and breaker in the current table, if it holds the key and the key is
    /// not being removed.
    #[inline]
    pub(super) fn find<'g, Q>(&self, key: &Q, guard: &'g impl papaya::Guard) -> Option<Found<'g, V>>
    where
        K: Borrow<Q> + Hash + Eq + 'static,
        V: 'g,
        S: BuildHasher + 'g,
        Q: Hash + Eq + ?Sized + 'static,
    {
        if !compares::<K, Q>(key) {
            return None;
        }
        let table = self.table(guard)?;
        let entry = table
            .entries
            .find(table.hasher.hash_one(key), |e| e.holds(key))?;
        // Through the guard: the tag's visibility to a thread pinned after the removal comes
        // from the collector's barriers, which order the loads it protects (see the module
        // doc).
        let slot = guard.protect(&entry.slot, Ordering::Acquire);
        if slot.addr() & GONE != 0 {
            return None;
        }
        // SAFETY: the key is not being removed as far as this pinned thread can tell, so the
        // map's entry is alive for as long as it stays pinned (see the module doc); the
        // breaker copy is that entry's handle.
        let slot = unsafe { &*slot.map_addr(|a| a & !SHORT) };
        Some(Found {
            slot,
            breaker: &entry.breaker,
            marked: &entry.marked,
        })
    }

    /// Tags the entries of the current table whose slot is one of `leaving`, before the
    /// caller removes those slots from the map. Returns whether the table has now tagged over
    /// a quarter of its entries (then worth rebuilding, to free the keys' copies). A pass
    /// over the table: the caller batches a sweep's removals. The caller holds `sweeping`.
    pub(super) fn forget<H: BuildHasher>(
        &self,
        leaving: &HashSet<*const V, H>,
        guard: &impl papaya::Guard,
    ) -> bool {
        let Some(table) = self.table(guard) else {
            return false;
        };
        let mut tagged = 0;
        for entry in &table.entries {
            let slot = entry.slot.load(Ordering::Relaxed);
            let at = slot.map_addr(|a| a & !SHORT).cast_const();
            if slot.addr() & GONE == 0 && leaving.contains(&at) {
                // Before the removal that retires the map's entry: a thread pinned after the
                // retirement sees the tag (the collector's barriers order the two).
                entry
                    .slot
                    .store(slot.map_addr(|a| a | GONE), Ordering::Release);
                tagged += 1;
            }
        }
        let gone = table.gone.fetch_add(tagged, Ordering::Relaxed) + tagged;
        gone > table.entries.len() / 4
    }

    /// How many keys the current table holds, tagged ones included (0 if there is none).
    pub(super) fn len(&self, guard: &impl papaya::Guard) -> usize {
        self.table(guard).map_or(0, |t| t.entries.len())
    }

    /// Builds a table of `entries` and publishes it in place of the current one, which is
    /// retired through `guard`'s collector.
    ///
    /// # Safety
    ///
    /// `guard` pins the family's map, whose slots and breakers `entries` yields; the caller
    /// holds the family's `sweeping` flag, and a key is removed from the map only after its
    /// entry in the current table (if any) is tagged ([`forget`](Front::forget)), with the
    /// flag held.
    pub(super) unsafe fn publish<'a>(
        &self,
        hasher: &SharedHasher<S>,
        len: usize,
        entries: impl Iterator<Item = (&'a K, &'a V, &'a Breaker)>,
        guard: &impl papaya::Guard,
    ) where
        K: Hash + Eq + Clone + 'static,
        V: 'a,
        S: BuildHasher,
    {
        let mut table = HashTable::with_capacity(len);
        // The key's `Clone` and `Hash` are user code: a panic here drops the half-built table
        // (the entries' key copies with it) and leaves the current one published.
        for (key, slot, breaker) in entries {
            // SAFETY: the entry is used only while the map's entry is alive (the contract).
            let entry = unsafe { Entry::new(key, slot, breaker) };
            // Hashed from the entry (the key's copy, or its bytes), as a lookup that finds
            // it will be: a key whose `Clone` changes its hash is then not found here, and is
            // looked up in the map, rather than found under the wrong key.
            table.insert_unique(entry.hash(hasher), entry, |e| e.hash(hasher));
        }
        let fresh = Box::into_raw(Box::new(Table {
            entries: table,
            hasher: hasher.clone(),
            gone: AtomicUsize::new(0),
        }));
        // Release: a thread that reads the new table sees it built.
        let old = self.current.swap(fresh, Ordering::AcqRel);
        if !old.is_null() {
            // SAFETY: `old` is unreachable from `current` now; a thread still reading it is
            // pinned, and the collector frees it only after every such thread has unpinned.
            // It is retired once: only the publication that replaced it retires it.
            unsafe { guard.defer_retire(old, free::<K, V, S, _>) };
            // A table is large and retired seldom, and the collector retires this thread's
            // batch (then frees it once the threads pinned now have unpinned) only once the
            // batch holds `batch` objects: a thread that otherwise retires nothing would keep
            // the table for good. Padded with objects that free nothing, the batch reaches
            // that size now.
            for _ in 1..self.batch {
                // SAFETY: `nothing` never reads the pointer; the collector only hands it back.
                unsafe {
                    guard.defer_retire(core::ptr::NonNull::<u8>::dangling().as_ptr(), nothing::<_>)
                };
            }
        }
    }
}

/// Frees a table the collector hands back (its collector, the second argument, is not needed).
///
/// # Safety
///
/// `table` was made by `Box::into_raw` in `publish`, retired once, and is handed back once.
unsafe fn free<K, V, S, C>(table: *mut Table<K, V, S>, _: &C) {
    // SAFETY: see the function's contract.
    drop(unsafe { Box::from_raw(table) });
}

/// What a padding object's reclamation does: nothing (see `publish`).
///
/// # Safety
///
/// None needed: the pointer is not read.
unsafe fn nothing<C>(_: *mut u8, _: &C) {}

impl<K, V, S> Drop for Front<K, V, S> {
    fn drop(&mut self) {
        let table = *self.current.get_mut();
        if !table.is_null() {
            // SAFETY: made by `Box::into_raw` in `publish`, never retired while current, and
            // no thread can pin the family's map any more (it is being dropped). Dropping it
            // reads none of its slot pointers and drops none of its breaker copies.
            drop(unsafe { Box::from_raw(table) });
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{Front, SharedHasher};
    use crate::breaker::Breaker;
    use crate::config::Config;
    use crate::keyed::hasher::KeyHasher;

    /// A key that counts its live copies (the table's among them) in its test's counter.
    struct Key(u64, Option<&'static AtomicUsize>);

    impl Key {
        fn new(k: u64, live: &'static AtomicUsize) -> Self {
            live.fetch_add(1, Ordering::Relaxed);
            Key(k, Some(live))
        }

        /// A key to look up with, counted nowhere.
        fn probe(k: u64) -> Self {
            Key(k, None)
        }
    }

    impl core::hash::Hash for Key {
        fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
            self.0.hash(state);
        }
    }

    impl PartialEq for Key {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    impl Eq for Key {}

    impl Clone for Key {
        fn clone(&self) -> Self {
            match self.1 {
                Some(live) => Key::new(self.0, live),
                None => Key::probe(self.0),
            }
        }
    }

    impl Drop for Key {
        fn drop(&mut self) {
            if let Some(live) = self.1 {
                live.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    type Map = papaya::HashMap<Key, Breaker, SharedHasher<KeyHasher>>;

    fn map(hasher: &SharedHasher<KeyHasher>, keys: u64, live: &'static AtomicUsize) -> Map {
        // The family's collector, as `BreakerMap` builds it.
        let map = papaya::HashMap::builder()
            .hasher(hasher.clone())
            .collector(seize::Collector::new().batch_size(super::batch_size()))
            .build();
        for k in 0..keys {
            map.pin()
                .insert(Key::new(k, live), Breaker::new("front", Config::default()));
        }
        map
    }

    fn publish(
        front: &Front<Key, Breaker, KeyHasher>,
        hasher: &SharedHasher<KeyHasher>,
        map: &Map,
    ) {
        let guard = map.guard();
        let entries = map.iter(&guard).map(|(k, b)| (k, b, b));
        // SAFETY: `guard` pins `map`, and nothing removes from it in these tests.
        unsafe { front.publish(hasher, map.len(), entries, &guard) };
    }

    #[test]
    fn a_published_table_finds_each_key_of_the_map_and_no_other() {
        let hasher = SharedHasher::new(KeyHasher::new());
        static LIVE: AtomicUsize = AtomicUsize::new(0);
        let map = map(&hasher, 100, &LIVE);
        let front = Front::new(super::batch_size());
        let guard = map.guard();
        assert!(front.find(&Key::probe(3), &guard).is_none(), "no table yet");
        publish(&front, &hasher, &map);
        assert_eq!(front.len(&guard), 100);
        for k in 0..100 {
            let in_map = map.get(&Key::probe(k), &guard).unwrap();
            let found = front.find(&Key::probe(k), &guard).expect("published");
            let (slot, breaker) = (found.slot, found.breaker);
            assert!(core::ptr::eq(slot, in_map), "key {k}: the map's own slot");
            assert!(breaker.ptr_eq(in_map), "key {k}: the map's breaker");
        }
        assert!(front.find(&Key::probe(100), &guard).is_none());
    }

    /// `String` keys of every length around the longest held in place (23 bytes), multi-byte
    /// ones among them: each found by `&str` and by `&String` at its own slot, and no key
    /// differing from one held by a byte, a trailing NUL or a missing last byte.
    #[test]
    fn string_keys_short_and_long_are_each_found_and_no_other() {
        let hasher = SharedHasher::new(KeyHasher::new());
        let map: papaya::HashMap<String, Breaker, _> = papaya::HashMap::builder()
            .hasher(hasher.clone())
            .collector(seize::Collector::new().batch_size(super::batch_size()))
            .build();
        let mut keys: Vec<String> = (0..=40).map(|n| "k".repeat(n)).collect();
        keys.extend(["é".repeat(11), "é".repeat(12), "€".repeat(8), "ü-\0".into()]);
        keys.extend((0..100).map(|i| format!("host-{i}.example")));
        for k in &keys {
            map.pin()
                .insert(k.clone(), Breaker::new("front", Config::default()));
        }
        let front: Front<String, Breaker, KeyHasher> = Front::new(super::batch_size());
        let guard = map.guard();
        let entries = map.iter(&guard).map(|(k, b)| (k, b, b));
        // SAFETY: `guard` pins `map`, and nothing removes from it in this test.
        unsafe { front.publish(&hasher, map.len(), entries, &guard) };
        assert_eq!(front.len(&guard), keys.len());
        for k in &keys {
            let in_map = map.get(k.as_str(), &guard).unwrap();
            let by_str = front.find(k.as_str(), &guard).expect(k);
            assert!(core::ptr::eq(by_str.slot, in_map), "{k:?}: its own slot");
            assert!(by_str.breaker.ptr_eq(in_map), "{k:?}: its own breaker");
            let by_string = front.find(k, &guard).expect(k);
            assert!(core::ptr::eq(by_string.slot, in_map), "{k:?} as a String");
            for other in [format!("{k}\0"), format!("{k}x"), format!("x{k}")] {
                if !keys.contains(&other) {
                    assert!(front.find(other.as_str(), &guard).is_none(), "{other:?}");
                }
            }
            if let Some((last, _)) = k.char_indices().last() {
                let cut = &k[..last];
                if !keys.iter().any(|k| k == cut) {
                    assert!(front.find(cut, &guard).is_none(), "{cut:?}");
                }
                let changed = format!("{cut}#");
                if !keys.contains(&changed) {
                    assert!(
                        front.find(changed.as_str(), &guard).is_none(),
                        "{changed:?}"
                    );
                }
            }
        }
    }

    /// A key type that `String` borrows as through a user's own `Borrow` impl: a table whose
    /// keys may be held as bytes cannot compare it, so it finds nothing and says so
    /// (`compares`), and the family looks such keys up in its map without counting them as
    /// the table's misses.
    #[test]
    fn a_string_table_compares_no_key_type_but_str_and_string() {
        #[derive(Hash, PartialEq, Eq)]
        #[repr(transparent)]
        struct Host(String);
        impl core::borrow::Borrow<Host> for String {
            fn borrow(&self) -> &Host {
                // SAFETY: `Host` is a `repr(transparent)` newtype of `String`.
                unsafe { &*core::ptr::from_ref(self).cast::<Host>() }
            }
        }
        assert!(super::compares::<String, str>("a"));
        assert!(super::compares::<String, String>(&"a".to_owned()));
        assert!(super::compares::<u64, u64>(&1));
        assert!(!super::compares::<String, Host>(&Host("a".into())));
        let hasher = SharedHasher::new(KeyHasher::new());
        let map: papaya::HashMap<String, Breaker, _> =
            papaya::HashMap::builder().hasher(hasher.clone()).build();
        map.pin()
            .insert("a".into(), Breaker::new("front", Config::default()));
        let front: Front<String, Breaker, KeyHasher> = Front::new(super::batch_size());
        let guard = map.guard();
        let entries = map.iter(&guard).map(|(k, b)| (k, b, b));
        // SAFETY: `guard` pins `map`, and nothing removes from it in this test.
        unsafe { front.publish(&hasher, map.len(), entries, &guard) };
        assert!(front.find("a", &guard).is_some());
        assert!(front.find(&Host("a".into()), &guard).is_none());
    }

    #[test]
    fn a_forgotten_slot_is_not_found_and_a_quarter_forgotten_asks_for_a_rebuild() {
        let hasher = SharedHasher::new(KeyHasher::new());
        static LIVE: AtomicUsize = AtomicUsize::new(0);
        let map = map(&hasher, 100, &LIVE);
        let front = Front::new(super::batch_size());
        publish(&front, &hasher, &map);
        let guard = map.guard();
        let slots = |keys: core::ops::Range<u64>| -> HashSet<*const Breaker, KeyHasher> {
            keys.map(|k| core::ptr::from_ref(map.get(&Key::probe(k), &guard).unwrap()))
                .collect()
        };
        assert!(
            !front.forget(&slots(0..25), &guard),
            "a quarter is not over it"
        );
        assert!(front.find(&Key::probe(0), &guard).is_none());
        assert!(front.find(&Key::probe(25), &guard).is_some());
        // Tagging a slot twice counts once; the 26th counts.
        assert!(!front.forget(&slots(0..25), &guard));
        assert!(front.forget(&slots(24..26), &guard), "26 of 100 tagged");
        assert!(front.find(&Key::probe(25), &guard).is_none());
        drop(guard);
        publish(&front, &hasher, &map);
        assert!(
            front.find(&Key::probe(0), &map.guard()).is_some(),
            "rebuilt from the map"
        );
    }

    /// A key type whose `Clone` changes the key: the table files the map's slot of key 1024
    /// under key 0. A slot is tagged by its address, so removing key 1024's slot tags the
    /// entry filed under 0 as well.
    #[test]
    fn a_slot_is_forgotten_under_whatever_key_the_table_filed_it() {
        #[derive(Hash, PartialEq, Eq)]
        struct Odd(u64);
        impl Clone for Odd {
            fn clone(&self) -> Self {
                Odd(self.0 ^ 1024)
            }
        }
        let hasher = SharedHasher::new(KeyHasher::new());
        let map: papaya::HashMap<Odd, Breaker, _> =
            papaya::HashMap::builder().hasher(hasher.clone()).build();
        map.pin()
            .insert(Odd(1024), Breaker::new("odd", Config::default()));
        let front = Front::new(super::batch_size());
        {
            let guard = map.guard();
            let entries = map.iter(&guard).map(|(k, b)| (k, b, b));
            // SAFETY: `guard` pins `map`, and nothing removes from it before the tag below.
            unsafe { front.publish(&hasher, 1, entries, &guard) };
        }
        let guard = map.guard();
        let slot = map.get(&Odd(1024), &guard).unwrap();
        assert!(
            front.find(&Odd(0), &guard).is_some(),
            "filed under the clone's key"
        );
        let leaving: HashSet<*const Breaker, KeyHasher> =
            [core::ptr::from_ref(slot)].into_iter().collect();
        front.forget(&leaving, &guard);
        assert!(front.find(&Odd(0), &guard).is_none());
    }

    /// The thread that replaces a table retires nothing else, and another thread is pinned
    /// meanwhile: the collector would keep the table in the first thread's batch until that
    /// batch filled. Padded, it is freed once both have unpinned.
    #[test]
    fn a_replaced_table_is_freed_though_its_thread_retires_nothing_else() {
        let hasher = SharedHasher::new(KeyHasher::new());
        static LIVE: AtomicUsize = AtomicUsize::new(0);
        let map = map(&hasher, 100, &LIVE);
        let front = Front::new(super::batch_size());
        publish(&front, &hasher, &map);
        let copies = LIVE.load(Ordering::Relaxed);
        let (pinned, release) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                let guard = map.guard();
                pinned.wait();
                release.wait();
                drop(guard);
            });
            pinned.wait();
            publish(&front, &hasher, &map);
            assert_eq!(
                LIVE.load(Ordering::Relaxed),
                copies + 100,
                "the old table is kept"
            );
            release.wait();
        });
        // One more pin and unpin on this thread: the collector frees what it may on unpinning.
        drop(map.guard());
        assert_eq!(
            LIVE.load(Ordering::Relaxed),
            copies,
            "the old table is freed"
        );
    }

    #[test]
    fn a_replaced_table_and_its_key_copies_are_freed_once_unpinned() {
        let hasher = SharedHasher::new(KeyHasher::new());
        static LIVE: AtomicUsize = AtomicUsize::new(0);
        let map = map(&hasher, 100, &LIVE);
        let before = LIVE.load(Ordering::Relaxed);
        let front = Front::new(super::batch_size());
        publish(&front, &hasher, &map);
        assert_eq!(LIVE.load(Ordering::Relaxed), before + 100);
        let pinned = map.guard();
        let held = front
            .find(&Key::probe(5), &pinned)
            .expect("published")
            .breaker;
        publish(&front, &hasher, &map);
        // The old table is still readable by the thread pinned before it was replaced.
        assert!(held.ptr_eq(map.get(&Key::probe(5), &pinned).unwrap()));
        assert_eq!(LIVE.load(Ordering::Relaxed), before + 200);
        drop(pinned);
        assert_eq!(LIVE.load(Ordering::Relaxed), before + 100);
        drop(front);
        assert_eq!(LIVE.load(Ordering::Relaxed), before);
    }
}
