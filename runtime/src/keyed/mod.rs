//! Keyed families: a breaker per host, tenant or shard, from one config, in bounded memory.
//!
//! # The protocol
//!
//! * The keys live in a `papaya::HashMap` (lock-free reads; memory reclaimed by `seize` once no
//!   reader can still see it). [`BreakerMap::call`] pins the map, finds its key's breaker and
//!   runs through it while pinned: no reference count. A permit from
//!   [`BreakerMap::try_acquire`] and [`BreakerMap::call_async`] hold a handle instead.
//! * An evicted breaker waits in `limbo`, where [`BreakerMap::evicted`] counts it as it reads,
//!   until its handle there is the last one and no tower lease holds its state: its slot freed
//!   (after the last pinned call), every permit and lease recorded. Then a sweep or `evicted`
//!   folds its counts into the totals and drops it, in the same critical section. So every
//!   call's outcome is counted once, in a live breaker or in the evicted totals
//!   (`tests/keyed/races.rs` checks this under racing eviction).
//! * Recency costs a call two plain loads and, once per sweep, a store: each slot keeps the
//!   sweep `tick` in which a call last found it, and each sweep turns "touched since the last
//!   sweep" into a time (`seen`, an upper bound on the last call's time).
//! * One sweep runs at a time (a flag; a thread that finds one running goes on).
//!   It evicts keys idle for `idle_for`, then, above `max_keys`, the least recently seen closed
//!   keys down to 7/8 of `max_keys`. It runs when a new key arrives and either the map holds
//!   `max_keys` (and has grown by an eighth of it since the last sweep) or an eighth of
//!   `idle_for` has passed since the last one; at twice `max_keys`, where no key is inserted,
//!   every `max_keys / 8` new keys sent to the overflow breaker (at least one) run one, since
//!   held keys may have closed; or when [`BreakerMap::sweep`] is called.
//! * Never evicted: a key open before its open time has run, forced open, or disabled. A key
//!   half-open, or open with its time run, is evicted only once idle. Removal re-checks the
//!   state (`remove_if`).
//! * An eviction never forgets a failing key. A removed breaker may still change: a call
//!   admitted before the removal (pinned, or through a permit) or a user's handle may open,
//!   force or disable it later. So the removal adds a listener to it, holding the key and a
//!   weak reference to the family, then looks at its state: whichever of the two sees the
//!   breaker open (before its time has run), forced open or disabled carries that state to
//!   the key's breaker in the family, creating it if the key has none, if that one is closed.
//!   Each carries it on its own thread: a failure that opens the breaker just before the
//!   listener is added returns before the evicting thread has looked, so for that moment the
//!   key reads closed and a call may pass, as for any call racing an opening. Counts are not
//!   carried: the late call is counted once, in the evicted totals. A closed key's failure
//!   streak is not carried either (an eviction of a closed key forgets it); only an opening
//!   is. `tests/keyed/races.rs` checks this with racing evictions
//!   (`failures_across_racing_evictions_always_reach_the_key`); the listener costs an
//!   eviction a few small allocations, freed with the breaker.
//! * When open keys fill the map: it grows past `max_keys` with keys it may not forget, up to
//!   twice `max_keys`; past that a new key shares one overflow breaker with the family's config
//!   until sweeps make room.
//!
//! # Where each part is
//!
//! This file only declares the parts and re-exports what they define:
//!
//! - `hasher`: [`KeyHasher`];
//! - `born`: hooks run when a registry family makes a key (how fleet mode gives a new key the
//!   state the fleet holds for it);
//! - `family`: a family's keys: lookup, insertion with the config a key gets, eviction; the
//!   single keys' configs and the reload generation; what evicted breakers counted;
//! - `breaker_map`: [`BreakerMap`], the handle, its calls and counts;
//! - `family_config`: a family's config replaced live;
//! - `key_page`: a family's keys by their text ([`KeyQuery`], [`KeyPage`], [`KeyError`]);
//! - `snapshot`: [`FamilySnapshot`];
//! - `registered`: families in the registry.
//!
//! Their uses of each other form no circle (`integration/tests/layers.rs` checks it).

pub(crate) mod born;
mod breaker_map;
mod family;
pub(crate) mod family_config;
mod hasher;
mod key_page;
pub(crate) mod registered;
mod snapshot;

pub use breaker_map::BreakerMap;
pub use family::Evicted;
pub use hasher::KeyHasher;
pub use key_page::{KeyError, KeyMetrics, KeyOrder, KeyPage, KeyQuery};
#[cfg(feature = "serde")]
pub(crate) use registered::family_exists;
pub(crate) use registered::family_names;
pub(crate) use registered::views as family_views;
pub use registered::{FamilyMetrics, KeyTypeMismatch};
pub use snapshot::{FamilySnapshot, FamilyTotals};
