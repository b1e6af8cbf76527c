//! A family's numbers at one moment without a series per key: what its keys counted together,
//! how many are open, and the top open keys. What the default metrics export and an admin
//! page read; the full per-key listing is [`Registry::families`](crate::Registry::families).

use core::fmt;
use core::hash::{BuildHasher, Hash};

use crate::breaker::{Breaker, displayed};
use crate::latency::{LatencySnapshot, Merged};
use crate::metrics::Metrics;
use crate::state::State;

use super::breaker_map::BreakerMap;
use super::family::Evicted;
use super::key_page::KeyMetrics;

/// What every breaker a family ever had counted together: its keys now, the overflow breaker,
/// and its evicted keys. Part of a [`FamilySnapshot`].
///
/// `calls == successes + failures + ignored + rejected`; `slow` overlaps successes and
/// failures, and `timeouts` are among the failures. A key's counts move to the evicted ones when it is evicted, each call counted
/// once; a snapshot taken while a sweep evicts may see a key in both or in neither, so two
/// snapshots during evictions may differ by that key's counts either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct FamilyTotals {
    /// Calls asked for, run or rejected.
    pub calls: u64,
    /// Successes.
    pub successes: u64,
    /// Failures.
    pub failures: u64,
    /// Calls counted neither way.
    pub ignored: u64,
    /// Rejections.
    pub rejected: u64,
    /// Slow calls.
    pub slow: u64,
    /// Timeouts (among the failures). With `serde`, read as 0 when absent.
    #[cfg_attr(feature = "serde", serde(default))]
    pub timeouts: u64,
}

impl FamilyTotals {
    fn add(&mut self, [successes, failures, ignored, rejected, slow, timeouts]: [u64; 6]) {
        self.calls += successes + failures + ignored + rejected;
        self.successes += successes;
        self.failures += failures;
        self.ignored += ignored;
        self.rejected += rejected;
        self.slow += slow;
        self.timeouts += timeouts;
    }

    fn add_evicted(&mut self, e: &Evicted) {
        self.calls += e.calls;
        self.successes += e.successes;
        self.failures += e.failures;
        self.ignored += e.ignored;
        self.rejected += e.rejected;
        self.slow += e.slow;
        self.timeouts += e.timeouts;
    }
}

/// A keyed family at one moment, from [`BreakerMap::snapshot`] or
/// [`Registry::family_snapshots`](crate::Registry::family_snapshots): aggregates, the number
/// of open keys and the `top` open keys, in size independent of the number of keys.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct FamilySnapshot {
    /// The family's name.
    pub name: String,
    /// Keys held now (not counting the overflow breaker).
    pub keys: usize,
    /// Keys held whose breaker is open, half-open or forced open.
    pub open_keys: usize,
    /// What the family's breakers counted together.
    pub totals: FamilyTotals,
    /// The open, half-open and forced-open keys with the most failures, most first (ties by
    /// key, as it displays), at most the `top` asked for.
    pub top_open: Vec<KeyMetrics>,
    /// What evicted keys counted (also in `totals`).
    pub evicted: Evicted,
    /// The overflow breaker, if it has been needed (also in `totals`).
    pub overflow: Option<Metrics>,
    /// The latency of the family's calls, its keys' histograms merged (as
    /// [`Breaker::latency`] is one breaker's): `None` unless its keys time their calls
    /// (`latency`, or a `slow` threshold). The last minute's percentiles are those of the keys
    /// held and the overflow breaker; the calls since the family was made count evicted keys
    /// too. Not serialized, nor compared by `==`: an exporter or an admin page reads it here.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub latency: Option<LatencySnapshot>,
    /// Which family this is: two families of the same name (one dropped, another made) have
    /// different ones. For the metrics export, which holds a family's counters from going
    /// down but must start again for a new family.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub(crate) family: u64,
}

/// Equal when every field shown is (which family it was taken of is not compared: it is not
/// serialized, so a snapshot read back equals the one written).
impl PartialEq for FamilySnapshot {
    fn eq(&self, other: &Self) -> bool {
        let FamilySnapshot {
            name,
            keys,
            open_keys,
            totals,
            top_open,
            evicted,
            overflow,
            latency: _,
            family: _,
        } = self;
        (name, keys, open_keys, totals, top_open, evicted, overflow)
            == (
                &other.name,
                &other.keys,
                &other.open_keys,
                &other.totals,
                &other.top_open,
                &other.evicted,
                &other.overflow,
            )
    }
}

/// Whether a key counts as open in [`FamilySnapshot::open_keys`].
pub(super) fn is_open(state: State) -> bool {
    matches!(state, State::Open | State::HalfOpen | State::ForcedOpen)
}

impl<K, S> BreakerMap<K, S>
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    /// The family's aggregates, its number of open keys and its `top` open keys with the most
    /// failures (see [`FamilySnapshot`]). Reads every key's counts and the full metrics of the
    /// open ones only; formats only the open keys. For a family whose keys time their calls it
    /// also reads the clock once and each key's latency histogram, which costs more than the
    /// rest (BENCHMARKS.md: about 3.5 to 6 µs a key on a loaded 2-core machine, where the
    /// counts alone take 0.07 to 0.17 µs).
    ///
    /// ```
    /// use breakerbox_runtime::{BreakerMap, Config};
    ///
    /// let hosts: BreakerMap<String> = BreakerMap::new("api", Config::builder().failures(1).build()?);
    /// let _ = hosts.call("a.example", || Err::<(), _>("refused"));
    /// hosts.call("b.example", || Ok::<_, std::io::Error>(()))?;
    /// let s = hosts.snapshot(10);
    /// assert_eq!((s.keys, s.open_keys, s.totals.calls, s.totals.failures), (2, 1, 2, 1));
    /// assert_eq!(s.top_open[0].key, "a.example");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self, top: usize) -> FamilySnapshot {
        let mut totals = FamilyTotals::default();
        let (mut keys, mut open) = (0, Vec::new());
        // The keys' histograms, merged as they are read: one pass over each timed key's
        // buckets, nothing on the call path. The time is read once, on the family's clock,
        // if the family times its calls or a key does (its own table may say so).
        let clock = &self.config().clock;
        let mut latency = self
            .config()
            .timed()
            .then(|| (Merged::default(), clock.precise()));
        let merge = |latency: &mut Option<(Merged, u64)>, b: &Breaker| {
            if latency.is_none() && b.times_calls() {
                *latency = Some((Merged::default(), clock.precise()));
            }
            if let Some((merged, now)) = latency {
                b.merge_latency(merged, *now);
            }
        };
        self.for_each(|k, b| {
            keys += 1;
            totals.add(b.counts());
            merge(&mut latency, b);
            if is_open(b.state()) {
                open.push((k.clone(), b.clone()));
            }
        });
        let open_keys = open.len();
        let top_open = top_open(open, top);
        let overflow = self.overflow().map(|b| {
            totals.add(b.counts());
            merge(&mut latency, &b);
            b.metrics()
        });
        let evicted = self.evicted();
        totals.add_evicted(&evicted);
        let latency = latency.map(|(mut merged, now)| {
            self.merge_evicted_latency(&mut merged, now);
            merged.snapshot()
        });
        FamilySnapshot {
            name: self.name().to_owned(),
            keys,
            open_keys,
            totals,
            top_open,
            evicted,
            overflow,
            latency,
            family: self.family.id,
        }
    }

    /// The `n` open, half-open or forced-open keys with the most failures, most first (ties
    /// by key, as it displays), with their breakers: [`FamilySnapshot::top_open`] as handles.
    pub fn open_keys_top(&self, n: usize) -> Vec<(K, Breaker)> {
        let mut open = Vec::new();
        self.for_each(|k, b| {
            if is_open(b.state()) {
                open.push((k.clone(), b.clone()));
            }
        });
        rank(open, n).into_iter().map(|(_, k, b)| (k, b)).collect()
    }

    /// Calls `f` with every key held now, as it displays, and its breaker: the per-key listing
    /// that metric export does only when asked (see `export::set_per_key`).
    pub(crate) fn each_displayed(&self, mut f: impl FnMut(String, &Breaker)) {
        self.for_each(|k, b| f(displayed(k), b));
    }
}

/// The `top` of `open` by failures (most first), then by key as it displays, with that text.
fn rank<K: fmt::Display>(open: Vec<(K, Breaker)>, top: usize) -> Vec<(String, K, Breaker)> {
    let mut ranked: Vec<(u64, String, K, Breaker)> = open
        .into_iter()
        .map(|(k, b)| (b.counts()[1], displayed(&k), k, b))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    ranked.truncate(top);
    ranked
        .into_iter()
        .map(|(_, text, k, b)| (text, k, b))
        .collect()
}

fn top_open<K: fmt::Display>(open: Vec<(K, Breaker)>, top: usize) -> Vec<KeyMetrics> {
    rank(open, top)
        .into_iter()
        .map(|(key, _, b)| KeyMetrics::of(key, &b))
        .collect()
}
