//! A family's keys: lookup, insertion (with the config a new key gets, and brought to a reload's
//! config: `family_config.rs` has the protocol), and eviction (the sweep); what a reload
//! replaces beside the family's config ([`KeyConfigs`]); what the evicted breakers counted
//! ([`Totals`], [`Evicted`]).

use core::borrow::Borrow;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crate::breaker::{Breaker, displayed};
use crate::config::Config;
use crate::identity::Identity;
use crate::state::State;

pub(super) struct Family<K, S> {
    pub(super) map: papaya::HashMap<K, KeySlot, S>,
    /// Unique in the process (see `FamilySnapshot::family`).
    pub(super) id: u64,
    pub(super) name: Arc<Box<str>>,
    /// Replaced by a reload (see `family_config.rs`).
    pub(super) config: crate::reconfigure::KeptConfig,
    /// The number of the current sweep period: what a call writes into the slot it finds.
    /// Starts at 2: a slot's 0 means "not called since it was created".
    pub(super) tick: AtomicU64,
    /// When the current period began: the last sweep, or the family's creation.
    pub(super) swept_at: AtomicU64,
    pub(super) totals: Arc<Totals>,
    /// Set while a thread sweeps. A flag, not a lock: nobody waits for a sweep, and the user
    /// code a sweep runs (the clock, listeners of a state carried over, the keys' `Hash`) may
    /// panic.
    pub(super) sweeping: AtomicBool,
    /// No recency or pressure sweep is due before this time, or before the map holds
    /// `sweep_len` keys.
    pub(super) sweep_at: AtomicU64,
    pub(super) sweep_len: AtomicUsize,
    /// New keys sent to the overflow breaker since the last sweep. At the hard cap no key is
    /// inserted, so the map never reaches `sweep_len`; these count towards the next sweep
    /// instead. A trigger, not a count anything relies on: a race only moves a sweep.
    pub(super) turned_away: AtomicUsize,
    pub(super) overflow: OnceLock<Breaker>,
    pub(super) max_keys: usize,
    pub(super) hard_cap: usize,
    pub(super) idle_for: u64,
    /// Configs for single keys (`[breakers.<family>.keys."<key>"]`), and what a reload
    /// needs.
    pub(super) live: KeyConfigs,
    /// The family itself, for the listeners that carry an evicted breaker's opening to its
    /// key (weak: a listener must not keep the family alive).
    pub(super) me: Weak<Family<K, S>>,
    /// A registry family's: its keys' changes are told to the registry-wide listeners (the
    /// admin event stream's among them). Set before the family is shared.
    pub(super) in_registry: AtomicBool,
}

/// A key's breaker and when it was last called.
pub(super) struct KeySlot {
    pub(super) breaker: Breaker,
    /// The `tick` in which a call last found the key; 0 if none has since its creation.
    pub(super) touched: AtomicU64,
    /// A time no earlier than the last call, as of the last sweep.
    pub(super) seen: AtomicU64,
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

impl<K, S> Family<K, S>
where
    K: Hash + Eq + Clone + core::fmt::Display + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    /// Runs `f` with `key`'s breaker (created if the key is new), the map pinned meanwhile:
    /// the breaker is alive while `f` runs, whatever a sweep does.
    #[inline]
    pub(super) fn with<Q, R>(&self, key: &Q, f: impl FnOnce(&Breaker) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        let guard = self.map.guard();
        f(self.find(key, &guard))
    }

    /// `key`'s breaker, created if it is new (or the overflow breaker, when the family is
    /// full of keys it may not evict).
    #[inline]
    pub(super) fn find<'g, Q>(&'g self, key: &Q, guard: &'g impl papaya::Guard) -> &'g Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        match self.map.get(key, guard) {
            Some(slot) => {
                mark(slot, self.tick.load(Ordering::Relaxed));
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
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        let now = self.config.clock.coarse();
        let len = self.map.len();
        if now >= self.sweep_at.load(Ordering::Relaxed)
            || len >= self.sweep_len.load(Ordering::Relaxed)
        {
            self.sweep(guard);
        }
        if self.map.len() >= self.hard_cap && !self.room_at_cap(guard) {
            return self.overflow_breaker();
        }
        self.fresh(key, now, guard)
    }

    /// Whether a sweep made room for a new key at the hard cap. Keys held there may have
    /// closed since the last sweep (their hosts back), and closed keys above `max_keys` are
    /// evicted under pressure; so every `max_keys / 8` new keys turned away (at least one)
    /// run a sweep. A sweep costs the map's length, which this spreads over as many calls.
    #[cold]
    fn room_at_cap(&self, guard: &impl papaya::Guard) -> bool {
        let every = (self.max_keys / 8).max(1);
        if self.turned_away.fetch_add(1, Ordering::Relaxed) + 1 < every {
            return false;
        }
        self.turned_away.store(0, Ordering::Relaxed);
        self.sweep(guard);
        self.map.len() < self.hard_cap
    }

    /// A new breaker for `key`, which knows its key's text for its events, rejections and
    /// explanations (the key's `Display` is user code: it runs under no lock of ours, and a
    /// panic in it gives `<Display panicked>`).
    pub(super) fn slot(&self, now: u64, key: &K) -> KeySlot {
        let config = self.config_of(key);
        let identity = Identity::shared(self.name.clone());
        let in_registry = self.in_registry.load(Ordering::Relaxed);
        KeySlot {
            breaker: Breaker::keyed(identity, config, in_registry, &displayed(key)),
            touched: AtomicU64::new(0),
            seen: AtomicU64::new(now),
        }
    }

    /// Inserts `slot` under `key` unless another thread was first; returns the breaker there.
    pub(super) fn put<'g>(
        &'g self,
        key: K,
        slot: KeySlot,
        guard: &'g impl papaya::Guard,
    ) -> &'g Breaker {
        match self.map.try_insert(key, slot, guard) {
            Ok(slot) => &slot.breaker,
            // The loser's breaker saw no call.
            Err(e) => &e.current.breaker,
        }
    }

    /// Makes `key`'s breaker and puts it in the map (unless it is there by the key `key`
    /// makes, or another thread was first): the breaker there, brought to the config of a
    /// reload that ran meanwhile.
    pub(super) fn fresh<'g, Q>(
        &'g self,
        key: &Q,
        now: u64,
        guard: &'g impl papaya::Guard,
    ) -> &'g Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned + ?Sized,
        Q::Owned: Into<K>,
    {
        let seen = self.live.generation();
        let owned: K = key.to_owned().into();
        // A `From` that normalizes (a host lowercased) makes a key that `key` does not find:
        // that key's breaker, marked called, not a new one each call.
        if let Some(slot) = self.map.get(&owned, guard) {
            mark(slot, self.tick.load(Ordering::Relaxed));
            return &slot.breaker;
        }
        let slot = self.slot(now, &owned);
        if self.in_registry.load(Ordering::Relaxed) {
            // Before the breaker is put in the map: no call reaches it before the hooks ran.
            super::born::born(&self.name, &slot.breaker);
        }
        let breaker = self.put(owned, slot, guard);
        // Our insertion, then our look at `generation`; a reload's bump, then its walk: with
        // a fence on each side, one of the two sees the other.
        fence(Ordering::SeqCst);
        if self.live.generation() != seen
            && let Some((k, _)) = self.map.get_key_value(key, guard)
        {
            self.settle(k, breaker);
        }
        breaker
    }

    /// The breaker new keys share when the family is full (see `BreakerMap::overflow`),
    /// made if it is not yet, with the family's config.
    pub(super) fn overflow_breaker(&self) -> &Breaker {
        let seen = self.live.generation();
        let breaker = self.overflow.get_or_init(|| {
            Breaker::named(Identity::shared(self.name.clone()), (*self.config).clone())
        });
        fence(Ordering::SeqCst);
        if self.live.generation() != seen {
            self.settle_with(breaker, |_| None);
        }
        breaker
    }

    /// The config `key`'s breaker is made with now: its own (with the family's clock, and its
    /// probe unless it names one), or the family's.
    pub(super) fn config_of(&self, key: &K) -> Config {
        // The key's `Display` is user code: a panic in it reads as a key of no table.
        let own = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.live.own(key)));
        match own.unwrap_or_else(|panic| {
            crate::event::discard(panic);
            None
        }) {
            Some(mut own) => {
                own.clock = self.config.clock.clone();
                if own.probe.is_none() {
                    own.probe = self.config.probe.clone();
                }
                own
            }
            None => (*self.config).clone(),
        }
    }

    /// Brings `breaker`, `key`'s, to the config the family gives the key now.
    pub(super) fn settle(&self, key: &K, breaker: &Breaker) {
        self.settle_with(breaker, |live| live.own(key));
    }

    /// Brings `breaker` to `own(live)`, or else the family's config, until no reload has
    /// swapped the configs meanwhile.
    pub(super) fn settle_with(
        &self,
        breaker: &Breaker,
        own: impl Fn(&KeyConfigs) -> Option<Config>,
    ) {
        loop {
            let seen = self.live.generation();
            let config = own(&self.live).unwrap_or_else(|| (*self.config).clone());
            if let Err(e) = breaker.reconfigure(config) {
                // Checked before the reload; only a racing `Breaker::reconfigure` through a
                // user's handle can change the breaker's shape since.
                tracing::warn!(target: "breakerbox", family = %self.name, "a key's breaker kept its config: {e}");
            }
            if self.live.generation() == seen {
                return;
            }
        }
    }

    pub(super) fn sweep(&self, guard: &impl papaya::Guard) -> usize {
        if self.sweeping.swap(true, Ordering::Acquire) {
            return 0;
        }
        let _sweeping = Sweeping(&self.sweeping);
        let tick = self.tick.load(Ordering::Relaxed);
        let began = self.swept_at.load(Ordering::Relaxed);
        // Read once the flag is ours: a time read before it (by a caller preempted on the way
        // here, while another sweep ran) could be older than that sweep's, and would date the
        // calls of this period too early, evicting their keys before `idle_for`. Never before
        // the last sweep either, whatever the clock (user code) says.
        let now = self.config.clock.coarse().max(began);
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
                Class::Closed | Class::Spent if is_idle => idle.push((key, slot)),
                Class::Closed => closed.push((seen, key, slot)),
                _ => {}
            }
        }
        self.swept_at.store(now, Ordering::Relaxed);
        self.tick.store(tick + 1, Ordering::Relaxed);
        let mut evicted = 0;
        for (key, slot) in idle {
            // Still idle: no call found it since this sweep began.
            evicted += usize::from(self.evict(key, slot, guard, |slot| {
                slot.touched.load(Ordering::Relaxed) < tick && class(&slot.breaker) != Class::Kept
            }));
        }
        let len = self.map.len();
        if len >= self.max_keys {
            // At least one below the bound, or a family of fewer than 8 keys would make no
            // room and let the next key in above it.
            let low = self.max_keys - (self.max_keys / 8).max(1);
            let excess = len - low;
            if excess < closed.len() {
                closed.select_nth_unstable_by_key(excess, |&(seen, _, _)| seen);
                closed.truncate(excess);
            }
            for (_, key, slot) in closed {
                evicted += usize::from(self.evict(key, slot, guard, |slot| {
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

    /// Removes `key` if `still` holds for its slot. The removed breaker is not forgotten while
    /// anything can still record into it (a call admitted before the removal, a permit, a
    /// user's handle): its opening is carried to the key's breaker in the family (see
    /// [`carry`](Family::carry)).
    ///
    /// `slot` is the key's slot as the sweep found it: only that slot is removed (a key
    /// called since may have been evicted and made again by now).
    fn evict(
        &self,
        key: &K,
        slot: &KeySlot,
        guard: &impl papaya::Guard,
        still: impl Fn(&KeySlot) -> bool,
    ) -> bool {
        // The key's copy for the listener below, before the removal: its `Clone` is user code,
        // and a panic in it between the removal and the listener would lose a late opening.
        // A key that cannot be copied is kept.
        let Ok(carried) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| key.clone()))
        else {
            tracing::warn!(
                target: "breakerbox",
                family = %self.name,
                "a key's Clone panicked; the key is not evicted"
            );
            return false;
        };
        let found = slot;
        let Ok(Some((key, slot))) = self.map.remove_if(
            key,
            |_, slot| core::ptr::eq(slot, found) && still(slot),
            guard,
        ) else {
            return false;
        };
        {
            let mut gone = self.totals.lock();
            gone.evicted.keys += 1;
            gone.limbo.push(slot.breaker.clone());
        }
        // First the listener, then a look at the state. A transition of the removed breaker
        // publishes its state before it reads the listeners (under their lock), and this
        // thread adds the listener (under that lock) before it reads the state: the one of
        // the two that takes the lock second sees the other's write, so every opening is
        // carried by the listener, by the look below, or by both (then the second finds the
        // key's breaker no longer closed and does nothing).
        let family = self.me.clone();
        let owner = slot.breaker.downgrade();
        slot.breaker.on_state_change(move |event| {
            if !matches!(event.to, State::Open | State::ForcedOpen | State::Disabled) {
                return;
            }
            // Nothing to do once the family is gone; the breaker is alive while it changes.
            if let (Some(family), Some(evicted)) = (family.upgrade(), owner.upgrade()) {
                family.carry(&carried, &evicted);
            }
        });
        // Checked before the removal; a call admitted before it (or a user's handle) may
        // have opened, forced or disabled the breaker since.
        self.carry(key, &slot.breaker);
        true
    }

    /// Carries the state of `evicted`, a breaker evicted from `key`, to the key's breaker in
    /// the family (created if the key has none), if `evicted` is open before its open time has
    /// run, forced open or disabled, and the key's breaker is closed. The key is then held
    /// again even above the family's bounds: at most one such key per evicted breaker still
    /// in use. Counts are not carried: what `evicted` counted stays in
    /// [`evicted`](super::BreakerMap::evicted).
    fn carry(&self, key: &K, evicted: &Breaker) {
        if class(evicted) != Class::Kept {
            return;
        }
        let shared = evicted.export_state();
        let guard = self.map.guard();
        let there = match self.map.get(key, &guard) {
            Some(slot) => &slot.breaker,
            None => self.fresh(key, self.config.clock.coarse(), &guard),
        };
        if there.state() == State::Closed {
            there.import_state(&shared);
        }
    }
}

/// Marks `slot` called in `tick`: a write only in the first call of a sweep period, so that
/// threads calling one key do not pass its line back and forth. The mark never moves back: a
/// thread that read the tick before a sweep moved it, and marks after a later call marked the
/// slot, must not leave the slot a period behind, idle to the next sweep however often the key
/// is called meanwhile.
#[inline]
fn mark(slot: &KeySlot, tick: u64) {
    if slot.touched.load(Ordering::Relaxed) < tick {
        slot.touched.fetch_max(tick, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use crate::{BreakerMap, Config, ManualClock};

    /// A key called after a sweep, then marked by a thread that had read the tick before that
    /// sweep (its late mark made here), and called every second since: the next sweep,
    /// `idle_for` later, keeps it.
    #[test]
    fn a_late_mark_from_before_a_sweep_does_not_make_a_called_key_idle() {
        let clock = ManualClock::new();
        let config = Config::builder()
            .max_keys(4_000)
            .idle_for(Duration::from_secs(10))
            .clock(clock.clone())
            .build()
            .unwrap();
        let map: BreakerMap<String> = BreakerMap::new("late-mark", config);
        let keys: Vec<String> = (0..200).map(|i| format!("host-{i}.example")).collect();
        for _ in 0..4 {
            for k in &keys {
                map.call(k.as_str(), || Ok::<_, &str>(())).unwrap();
            }
        }
        let hot = "host-5.example";
        map.sweep();
        map.call(hot, || Ok::<_, &str>(())).unwrap();
        {
            let guard = map.family.map.guard();
            let tick = map.family.tick.load(std::sync::atomic::Ordering::Relaxed);
            let slot = map.family.map.get(hot, &guard).unwrap();
            super::mark(slot, tick - 1);
            assert_eq!(
                slot.touched.load(std::sync::atomic::Ordering::Relaxed),
                tick
            );
        }
        for _ in 0..11 {
            clock.advance(Duration::from_secs(1));
            for _ in 0..100 {
                map.call(hot, || Ok::<_, &str>(())).unwrap();
            }
        }
        map.sweep();
        assert!(
            map.get(hot).is_some(),
            "a key called every second was evicted"
        );
    }
}

/// Clears the sweeping flag, also if the sweep panics.
struct Sweeping<'a>(&'a AtomicBool);

impl Drop for Sweeping<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

// The cost of a key's slot beside its breaker (the breaker is 192 bytes: its layout is in
// `breaker/inner.rs`, and `breaker/tests.rs` holds the size).
#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<KeySlot>() == 24);

/// The configs of single keys, by the key as it displays.
pub(crate) type KeyTable = HashMap<String, Config>;

/// What a family's config can be replaced with, beside the config itself (`Family::config`).
#[derive(Default)]
pub(super) struct KeyConfigs {
    /// Bumped by each reload after it swaps the configs, before it walks the keys.
    pub(super) generation: AtomicU64,
    /// `[breakers.<family>.keys."<key>"]` tables; `has_keys` says whether any, so that a new
    /// key of a family without them reads no lock.
    pub(super) keys: Mutex<Arc<KeyTable>>,
    pub(super) has_keys: AtomicBool,
    /// Held by a reload while it swaps the configs: one reload at a time.
    pub(super) reloading: Mutex<()>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl KeyConfigs {
    /// Sets the single keys' configs.
    pub(super) fn set_keys(&self, keys: KeyTable) {
        let has = !keys.is_empty();
        let old = core::mem::replace(&mut *lock(&self.keys), Arc::new(keys));
        self.has_keys.store(has, Ordering::Release);
        // Dropped after the lock: a config may hold the last reference to a user's clock.
        drop(old);
    }

    /// The config of `key` if it has its own (without the family's clock).
    pub(super) fn own(&self, key: &impl fmt::Display) -> Option<Config> {
        if !self.has_keys.load(Ordering::Acquire) {
            return None;
        }
        let table = lock(&self.keys).clone();
        // The key's `Display` is user code: no lock held.
        table.get(&key.to_string()).cloned()
    }

    pub(super) fn keys(&self) -> Arc<KeyTable> {
        lock(&self.keys).clone()
    }

    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

/// What the breakers no longer in the family counted.
#[derive(Default)]
pub(super) struct Totals(Mutex<Gone>);

#[derive(Default)]
pub(super) struct Gone {
    pub(super) evicted: Evicted,
    /// Evicted breakers that something else still holds (their slot, not freed yet while a
    /// pinned call may run; a permit; a user's handle), counted by `evicted` when read.
    pub(super) limbo: Vec<Breaker>,
    /// The latency histograms of the evicted breakers freed: their counts since they were
    /// made (empty until one had any), and the sum of their durations.
    pub(super) latency: Vec<u64>,
    pub(super) latency_sum: u64,
}

impl Totals {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Gone> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Folds in the breakers of `limbo` nothing else holds any more. Drops them after
    /// unlocking: a breaker's last drop runs its listeners' drops, which are user code.
    pub(super) fn prune(&self) {
        let done: Vec<Breaker> = {
            let mut gone = self.lock();
            let done: Vec<Breaker> = gone.limbo.extract_if(.., |b| b.alone()).collect();
            for b in &done {
                gone.add(b.counts());
                gone.add_latency(b);
            }
            done
        };
        drop(done);
    }
}

impl Gone {
    /// Keeps the latency counts of `b`, a breaker freed.
    fn add_latency(&mut self, b: &Breaker) {
        let Some((total, sum)) = b.latency_total() else {
            return;
        };
        if self.latency.is_empty() {
            self.latency = vec![0; total.len()];
        }
        for (to, n) in self.latency.iter_mut().zip(total.iter()) {
            *to += n;
        }
        self.latency_sum = self.latency_sum.saturating_add(sum);
    }

    pub(super) fn add(
        &mut self,
        [successes, failures, ignored, rejected, slow, timeouts]: [u64; 6],
    ) {
        let e = &mut self.evicted;
        e.calls += successes + failures + ignored + rejected;
        e.successes += successes;
        e.failures += failures;
        e.ignored += ignored;
        e.rejected += rejected;
        e.slow += slow;
        e.timeouts += timeouts;
    }
}

/// The counts of a family's evicted breakers, including calls that record into them after
/// the eviction (a permit taken before it, a handle from [`BreakerMap::get`](crate::BreakerMap::get)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
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
    /// Their timeouts (among their failures). With `serde`, read as 0 when absent.
    #[cfg_attr(feature = "serde", serde(default))]
    pub timeouts: u64,
}
