//! A family's keys by their text: the query ([`KeyQuery`], [`KeyOrder`]), the page it gives
//! ([`KeyPage`], of [`KeyMetrics`]), the error of a key or family not found ([`KeyError`]), and
//! [`BreakerMap::key_page`] and [`BreakerMap::key_by_text`]. The registry's side, which the
//! admin router's per-key routes serve ([`Registry::family_keys`](crate::Registry::family_keys),
//! [`Registry::key_breaker`](crate::Registry::key_breaker) and the per-key controls), is in
//! `registered.rs`.

use core::cmp::Ordering;
use core::fmt;
use core::hash::{BuildHasher, Hash};

use crate::breaker::Breaker;
use crate::state::State;

use super::breaker_map::BreakerMap;
use crate::metrics::Metrics;

/// How a page of keys is sorted ([`KeyQuery::order`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum KeyOrder {
    /// By key, as it displays, in byte order.
    #[default]
    Key,
    /// The least healthy first: forced open, open, half-open, disabled, closed; then by key.
    State,
    /// The highest failure rate first (see [`KeyMetrics::failure_rate`]); then by key.
    FailureRate,
    /// The most calls first ([`Metrics::calls`](crate::Metrics::calls)); then by key.
    Volume,
}

/// Which of a family's keys to list: sorted by `order`, only those whose text contains
/// `search` (if given), `limit` of them (at most [`KeyQuery::MAX_LIMIT`]) from `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyQuery {
    /// The sort.
    pub order: KeyOrder,
    /// Keys to skip, in that order.
    pub offset: usize,
    /// Keys to return at most; above [`KeyQuery::MAX_LIMIT`], [`KeyQuery::MAX_LIMIT`].
    pub limit: usize,
    /// Only keys whose text contains this, if given (case-sensitive).
    pub search: Option<String>,
}

impl Default for KeyQuery {
    /// The first 50 keys by key.
    fn default() -> KeyQuery {
        KeyQuery {
            order: KeyOrder::Key,
            offset: 0,
            limit: 50,
            search: None,
        }
    }
}

impl KeyQuery {
    /// The most keys one page holds.
    pub const MAX_LIMIT: usize = 500;

    /// The first 50 keys sorted by `order`.
    pub fn by(order: KeyOrder) -> KeyQuery {
        KeyQuery {
            order,
            ..KeyQuery::default()
        }
    }

    /// Keys from `offset`.
    pub fn offset(mut self, offset: usize) -> KeyQuery {
        self.offset = offset;
        self
    }

    /// At most `limit` keys (at most [`KeyQuery::MAX_LIMIT`]).
    pub fn limit(mut self, limit: usize) -> KeyQuery {
        self.limit = limit;
        self
    }

    /// Only keys whose text contains `text`.
    pub fn search(mut self, text: impl Into<String>) -> KeyQuery {
        self.search = Some(text.into());
        self
    }
}

/// A page of a family's keys, from [`Registry::family_keys`](crate::Registry::family_keys) or [`BreakerMap::key_page`].
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct KeyPage {
    /// The family's name.
    pub family: String,
    /// Keys that match the search (all the keys held, without one), on every page.
    pub total: usize,
    /// The query's offset.
    pub offset: usize,
    /// The page's size asked for, after the [`KeyQuery::MAX_LIMIT`] bound.
    pub limit: usize,
    /// The sort.
    pub order: KeyOrder,
    /// The keys of this page, in order.
    pub keys: Vec<KeyMetrics>,
}

/// One key of a family in [`Registry::families`](crate::Registry::families) and [`FamilySnapshot::top_open`](crate::FamilySnapshot::top_open).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct KeyMetrics {
    /// The key, as it displays.
    pub key: String,
    /// Its breaker's metrics.
    pub metrics: Metrics,
    /// The message of the failure that last tripped its breaker (see
    /// [`Breaker::last_failure`](crate::Breaker::last_failure)). With `serde`, read as `None` when absent.
    #[cfg_attr(feature = "serde", serde(default))]
    pub last_failure: Option<String>,
}

impl KeyMetrics {
    /// `key`'s entry: its breaker's metrics and last failure.
    pub(crate) fn of(key: String, breaker: &Breaker) -> KeyMetrics {
        KeyMetrics {
            key,
            metrics: breaker.metrics(),
            last_failure: breaker.last_failure().map(|s| s.to_string()),
        }
    }

    /// The failure rate [`KeyOrder::FailureRate`] sorts by, in percent: the rate window's,
    /// for a rate policy; else failures over successes and failures since the breaker was
    /// made; `None` with no call of either.
    pub fn failure_rate(&self) -> Option<f64> {
        let m = &self.metrics;
        m.failure_rate.or_else(|| {
            let judged = m.successes + m.failures;
            (judged > 0).then(|| m.failures as f64 * 100.0 / judged as f64)
        })
    }
}

/// A key or family that [`Registry::key_breaker`](crate::Registry::key_breaker) and the per-key controls do not find.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// No registry family has this name.
    #[error("no keyed family named '{family}'")]
    NoFamily {
        /// The name asked for.
        family: String,
    },
    /// The family holds no key that displays as this (never called, or evicted).
    #[error("no key '{key}' in the keyed family '{family}' (never called, or evicted)")]
    NoKey {
        /// The family.
        family: String,
        /// The key asked for.
        key: String,
    },
}

/// The rank of a state in [`KeyOrder::State`]: the least healthy first.
fn severity(state: State) -> u8 {
    match state {
        State::ForcedOpen => 0,
        State::Open => 1,
        State::HalfOpen => 2,
        State::Disabled => 3,
        _ => 4,
    }
}

/// Sorts and pages `keys` as `query` asks.
fn page(family: &str, mut keys: Vec<KeyMetrics>, query: &KeyQuery) -> KeyPage {
    let by_key = |a: &KeyMetrics, b: &KeyMetrics| a.key.cmp(&b.key);
    let rate = |k: &KeyMetrics| k.failure_rate().unwrap_or(-1.0);
    match query.order {
        KeyOrder::Key => keys.sort_by(by_key),
        KeyOrder::State => keys.sort_by(|a, b| {
            severity(a.metrics.state)
                .cmp(&severity(b.metrics.state))
                .then_with(|| by_key(a, b))
        }),
        KeyOrder::FailureRate => keys.sort_by(|a, b| {
            rate(b)
                .partial_cmp(&rate(a))
                .unwrap_or(Ordering::Equal)
                .then_with(|| by_key(a, b))
        }),
        KeyOrder::Volume => keys.sort_by(|a, b| {
            b.metrics
                .calls
                .cmp(&a.metrics.calls)
                .then_with(|| by_key(a, b))
        }),
    }
    let total = keys.len();
    let limit = query.limit.min(KeyQuery::MAX_LIMIT);
    let keys = keys.into_iter().skip(query.offset).take(limit).collect();
    KeyPage {
        family: family.to_owned(),
        total,
        offset: query.offset,
        limit,
        order: query.order,
        keys,
    }
}

/// The key's text a family's breaker holds (every key's breaker has one).
fn text(b: &Breaker) -> &str {
    b.key().unwrap_or_default()
}

impl<K, S> BreakerMap<K, S>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    /// A page of the keys held now, sorted and searched as `query` asks, with their metrics
    /// and last failures. Reads every key's text (kept by its breaker: no key's `Display`
    /// runs) and the metrics of those that match the search.
    ///
    /// ```
    /// use breakerbox_runtime::{BreakerMap, Config, KeyOrder, KeyQuery, State};
    ///
    /// let hosts: BreakerMap<String> = BreakerMap::new("api", Config::builder().failures(1).build()?);
    /// hosts.call("a.example", || Ok::<_, std::io::Error>(()))?;
    /// let _ = hosts.call("b.example", || Err::<(), _>("refused"));
    /// let page = hosts.key_page(&KeyQuery::by(KeyOrder::State).limit(1));
    /// assert_eq!((page.total, page.keys.len()), (2, 1));
    /// assert_eq!(page.keys[0].key, "b.example");
    /// assert_eq!(page.keys[0].metrics.state, State::Open);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key_page(&self, query: &KeyQuery) -> KeyPage {
        let mut keys = Vec::new();
        self.for_each(|_, b| {
            let key = text(b);
            if query.search.as_deref().is_none_or(|s| key.contains(s)) {
                keys.push(KeyMetrics::of(key.to_owned(), b));
            }
        });
        page(self.name(), keys, query)
    }

    /// The breaker of the key held now that displays as `text`, if any (the first found, if
    /// two keys display alike).
    pub fn key_by_text(&self, text: &str) -> Option<Breaker> {
        let mut found = None;
        self.for_each(|_, b| {
            if found.is_none() && self::text(b) == text {
                found = Some(b.clone());
            }
        });
        found
    }
}
