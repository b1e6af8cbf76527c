//! What the integration crates (`breakerbox-metrics`, `breakerbox-tower`, `breakerbox-admin`,
//! `breakerbox-fleet`) need from the core that users should not see: reached through the
//! runtime as `breakerbox_runtime::__integrations`.
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
/// have different ids. On a new id, the metrics export adds the new family's counts to the
/// old one's totals.
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

/// The names of the registry's keyed families: the admin's "did you mean …?" for a family.
pub fn family_names() -> Vec<String> {
    crate::keyed::family_names()
}

/// What a fleet's `share` patterns can name, checked when the fleet starts: every single
/// breaker of `registry` created, annotated or configured, and, apart, every keyed family
/// annotated or created (a name in both lists is a family's).
pub fn shareable_names(registry: &Registry) -> (Vec<String>, Vec<String>) {
    registry.shareable_names(crate::keyed::family_names())
}

/// A failure's message as a breaker keeps it: the error's `Display`, stopped and cut at
/// 1 024 bytes (ending `… (cut)`), `<Display panicked>` if it panics. For a replay's failure,
/// kept with its journal entry.
pub fn failure_message(cause: &dyn core::fmt::Display) -> String {
    crate::breaker::message(cause).to_string()
}

/// `text` cut short for a message (the first 32 characters, then its length in bytes): how
/// the core quotes a name, a key or a path it refuses.
pub fn excerpt(text: &str) -> String {
    crate::duration::excerpt(text)
}

/// The candidate `unknown` most likely stands for (an alias, else the nearest by edit
/// distance, if near enough): the core's "did you mean …?".
pub fn closest<'a>(
    unknown: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    crate::suggest::closest(unknown, candidates)
}

/// Parses a config duration (`"250ms"`, `"2s"`): longer than zero, at most `u64::MAX`
/// nanoseconds, as the attribute and config files read it. The error is a sentence that
/// quotes the text.
pub fn parse_duration(text: &str) -> Result<core::time::Duration, String> {
    crate::duration::parse(text)
        .map(core::time::Duration::from_nanos)
        .map_err(|e| e.to_string())
}

/// Parses any duration [`display_duration`] writes, zero included: serde's form.
pub fn parse_any_duration(text: &str) -> Result<core::time::Duration, String> {
    crate::duration::parse_duration(text).map_err(|e| e.to_string())
}

/// `d` as duration text, in the largest unit that divides it (`"90s"`, `"250ms"`).
pub fn display_duration(d: core::time::Duration) -> String {
    crate::duration::display_duration(d)
}

/// Runs `hook` with the family's name and the new breaker whenever a registry family makes a
/// breaker for a key (its key's text is [`breaker_key`]'s), on the thread that makes it, after
/// the breaker is made and before it is put in the family: before any call reaches it. The
/// hook runs under no lock of the core's; a panic in it is caught. It is dropped once it
/// returns `false`. Fleet mode gives a new key the state the fleet holds for it this way.
pub fn on_new_key(hook: impl Fn(&str, &Breaker) -> bool + Send + Sync + 'static) {
    crate::keyed::born::add(std::sync::Arc::new(hook));
}

/// A keyed family's breaker's key, as it displayed when the family made the breaker; `None`
/// for a breaker of no family.
pub fn breaker_key(breaker: &Breaker) -> Option<&str> {
    breaker.key()
}

pub use crate::breaker::Lease;

/// Asks `breaker` to make one call, as [`Breaker::try_acquire_owned`] does, with a [`Lease`]:
/// no handle clone (the tower layer's response future).
#[inline]
pub fn lease(breaker: &Breaker) -> Result<Lease, crate::Rejected> {
    breaker.try_lease()
}

/// Asks `key`'s breaker in `family` to make one call, as [`BreakerMap::try_acquire`] does,
/// with a [`Lease`].
#[inline]
pub fn lease_key<K, S, Q>(family: &BreakerMap<K, S>, key: &Q) -> Result<Lease, crate::Rejected>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static + core::borrow::Borrow<Q>,
    S: BuildHasher + Send + Sync + 'static,
    Q: Hash + Eq + ToOwned + ?Sized,
    Q::Owned: Into<K>,
{
    family.lease(key)
}

/// A caught panic's message, when it has one to read (`panic!` with a literal or a format).
pub fn panic_message(payload: &(dyn core::any::Any + Send)) -> &str {
    crate::event::panic_message(payload)
}

/// Drops a caught panic's payload, whose own `Drop` may panic: that second panic is caught
/// too, and its payload leaked rather than risk a third.
pub fn discard_panic(payload: Box<dyn core::any::Any + Send>) {
    crate::event::discard(payload);
}

/// What fleet mode reads of a breaker beyond its public API, as methods.
pub trait BreakerExt {
    /// As `export_state`, with the open time the breaker is held to, not the one it reports
    /// (see [`import_reporting`](BreakerExt::import_reporting)).
    fn held_state(&self) -> crate::SharedState;
    /// As `import_state`; an open state is reported (`export_state`, `metrics`, `explain`,
    /// `Rejected::retry_after`) as open for `shown`, when that is shorter than `state`'s open
    /// time, which the breaker is held to: the store's schedule, and a hold of its own.
    ///
    /// `told` is why, as the store tells it (`explain`'s cause); `failure` the failure behind
    /// an open state (`last_failure`, and the event's message).
    fn import_reporting(
        &self,
        state: &crate::SharedState,
        shown: Option<core::time::Duration>,
        told: Option<&str>,
        failure: Option<&str>,
    );
    /// How many times `force_open`, `disable`, `reset` or `trip_for` were called on it,
    /// whether or not they changed its state: a hand on a breaker the fleet holds.
    fn manual_changes(&self) -> u32;
    /// The generation of its state, which moves with every transition: whether the breaker
    /// changed while a store operation about it was in flight.
    fn generation(&self) -> u32;
    /// The current half-open round's probes: how many were admitted, and how many of those
    /// succeeded; `None` unless half-open.
    fn probe_round(&self) -> Option<(u32, u32)>;
}

impl BreakerExt for Breaker {
    fn held_state(&self) -> crate::SharedState {
        Breaker::held_state(self)
    }
    fn import_reporting(
        &self,
        state: &crate::SharedState,
        shown: Option<core::time::Duration>,
        told: Option<&str>,
        failure: Option<&str>,
    ) {
        Breaker::import_reporting(self, state, shown, told, failure);
    }
    #[inline]
    fn manual_changes(&self) -> u32 {
        Breaker::manual_changes(self)
    }
    #[inline]
    fn generation(&self) -> u32 {
        Breaker::generation(self)
    }
    #[inline]
    fn probe_round(&self) -> Option<(u32, u32)> {
        Breaker::probe_round(self)
    }
}

/// What fleet mode reads of the registry beyond its public API, as methods.
pub trait RegistryExt {
    /// The registry breaker `name` if it exists, without making it (unlike `get_or_create`)
    /// and without resolving a config for it.
    fn existing(&self, name: &str) -> Option<Breaker>;
}

impl RegistryExt for Registry {
    fn existing(&self, name: &str) -> Option<Breaker> {
        Registry::existing(self, name)
    }
}
