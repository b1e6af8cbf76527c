//! Breaker metrics through the [`metrics`](https://docs.rs/metrics) crate, for Prometheus
//! (`metrics-exporter-prometheus`), StatsD, OpenTelemetry, or any other `metrics` recorder.
//!
//! Use it through the `breakerbox` crate, as `breakerbox::export` (feature `metrics`).
//!
//! Nothing is recorded on the call path: calls only bump the breaker's own counters, as they
//! always do. [`record_all`] reads every breaker's
//! [snapshot](breakerbox_runtime::Registry::snapshot) and sets the exported values; call it
//! where metrics are scraped (before rendering `/metrics`) or from a periodic task. [`install`] adds a registry listener that keeps the state gauge
//! current between two exports (it runs on transitions only).
//!
//! ```
//! // At startup, after installing your recorder (e.g. `PrometheusBuilder::install_recorder`):
//! breakerbox_metrics::install();
//!
//! // In the `/metrics` handler, before rendering:
//! breakerbox_metrics::record_all();
//! ```
//!
//! # Names and labels
//!
//! Every metric has the label `name`, the breaker's name.
//!
//! | metric | kind | labels | value |
//! | --- | --- | --- | --- |
//! | `breakerbox_calls_total` | counter | `name`, `outcome` | calls by outcome: `success`, `failure`, `ignored`, `rejected`, and `slow` and `timeout` |
//! | `breakerbox_state` | gauge | `name` | 0 closed, 1 open, 2 half-open, 3 forced-open, 4 disabled |
//! | `breakerbox_failure_rate` | gauge | `name` | the rate window's failure rate, in percent (0–100) |
//! | `breakerbox_slow_rate` | gauge | `name` | the rate window's slow-call rate, in percent (0–100) |
//! | `breakerbox_opened_total` | counter | `name` | times the breaker opened |
//! | `breakerbox_transitions_total` | counter | `name`, `to`, `reason` | with [`install`]: state changes of registry breakers and of registry families' keys (under the family's name), by the state entered (`closed`, `open`, `half_open`, `forced_open`, `disabled`) and the reason (`failures`, `failure_rate`, `slow_rate`, `trip_for`, `open_elapsed`, `probe_failed`, `probe_timeout`, `probes_succeeded`, `health_probe`, `forced_open`, `disabled`, `reset`, `imported`); in fleet mode `imported` is a change taken on from another instance, any other reason this instance's own |
//! | `breakerbox_call_duration_seconds` | histogram | `name` | for a breaker that times its calls (a `slow` threshold, or `latency = true`): each call's duration, as [`Breaker::latency`] buckets them |
//! | `breakerbox_call_duration_last_minute_seconds` | gauge | `name`, `quantile` | the same breakers: the p50, p90 and p99 (`quantile` `0.5`, `0.9`, `0.99`) of the last minute's calls; absent before the first call timed, NaN for a minute without calls |
//!
//! The histogram is fed at each export with the calls timed since the last: each at its
//! bucket's midpoint (within 6.25% of its duration), through `Histogram::record_many`, so
//! the recorder's own buckets or summary apply. For Prometheus buckets, set them with
//! `PrometheusBuilder::set_buckets_for_metric(Matcher::Full("breakerbox_call_duration_seconds".into()), &[…])`;
//! `docs/grafana/breakerbox.json` reads `breakerbox_call_duration_seconds_bucket`.
//!
//! `success`, `failure`, `ignored` and `rejected` partition the calls; `slow` counts calls that
//! took at least the `slow` threshold *whatever their outcome*, and `timeout` the failures
//! that were calls run past their `timeout` ([`Metrics::timeouts`](breakerbox_runtime::Metrics::timeouts)),
//! so leave both out of sums:
//! `sum by (name) (breakerbox_calls_total{outcome!~"slow|timeout"})`. Failures other than
//! timeouts are `failure` less `timeout`. The rate gauges exist for
//! breakers with a rate policy (`failure_rate`, resp. `slow_rate`), and read 0 while the window
//! is empty. Counters are set to the breaker's totals (`Counter::absolute`), so exporting twice
//! never counts twice; a breaker made again under the name of a dropped one ([`record`] of a
//! rebuilt [`Breaker::new`]) counts on from the old one's totals.
//!
//! # Keyed families
//!
//! A [`BreakerMap`] may hold thousands of keys, and a series per key would
//! flood the metrics backend, so by default a family exports aggregates, its number of open
//! keys, and its top open keys only (label `name`: the family's name):
//!
//! | metric | kind | labels | value |
//! | --- | --- | --- | --- |
//! | `breakerbox_family_calls_total` | counter | `name`, `outcome` | calls by outcome over every breaker the family had: its keys, evicted keys, the overflow breaker ([`FamilyTotals`](breakerbox_runtime::FamilyTotals)) |
//! | `breakerbox_family_keys` | gauge | `name` | keys held |
//! | `breakerbox_family_open_keys` | gauge | `name` | keys open, half-open or forced open |
//! | `breakerbox_family_evicted_total` | counter | `name` | keys evicted |
//! | `breakerbox_call_duration_seconds`, `breakerbox_call_duration_last_minute_seconds` | histogram, gauge | `name` (and `quantile`) | for a family whose keys time their calls: as for a breaker, over all its keys ([`FamilySnapshot::latency`](breakerbox_runtime::FamilySnapshot::latency): the keys' histograms merged at the export; the last minute is the keys held) |
//! | `breakerbox_key_state` | gauge | `name`, `key` | for the top N open keys (most failures first; N is 10 unless [`set_top_open`] says otherwise): their state, as `breakerbox_state`; 0 for a key that was among them at the previous export and no longer is (closed, evicted or outranked) |
//!
//! The family counters never go down: a snapshot taken while a sweep evicts may see a key's
//! counts twice or not at all for that moment (see [`FamilyTotals`](breakerbox_runtime::FamilyTotals)), and
//! the export keeps the highest value seen. A family made again under the name of a dropped
//! one counts on from the old one's totals. A series for a key stays in the recorder once
//! made (the `metrics` crate has no removal; exporters drop idle series after their idle
//! timeout), hence the 0.
//!
//! [`set_per_key`] turns on a series per key for every key of every family: the top N's
//! `breakerbox_key_state` for all keys, plus `breakerbox_key_calls_total` (labels `name`,
//! `key`, `outcome`) and `breakerbox_key_opened_total` (labels `name`, `key`). A key's
//! counters count every breaker it had: an evicted key that comes back goes on from its
//! totals, as the family's counters do. A key the last export sent and this one does not
//! (evicted, or per-key export turned off) has its `breakerbox_key_state` set to 0, as a key
//! that leaves the top is. Mind the cardinality: a family holds up to twice `max_keys` keys,
//! and the export keeps a few numbers per key it ever sent, as the recorder keeps its series.
//!
//! [`record_all`] exports the registry's families; [`record_family`] one outside it.
//!
//! # Alerting
//!
//! `breakerbox_state >= 1 and breakerbox_state <= 3` is "not letting calls through";
//! `increase(breakerbox_opened_total[5m]) > 0` fires on every trip, even one that closed again
//! between two scrapes. To be told at once instead, see
//! [`Registry::on_state_change`](breakerbox_runtime::Registry::on_state_change).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

use core::fmt;
use core::hash::{BuildHasher, Hash};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use metrics::{
    Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram,
};

use breakerbox_runtime::__integrations;
use breakerbox_runtime::{
    Breaker, BreakerMap, FamilySnapshot, Reason, State, WeakBreaker, registry,
};

/// The value of `breakerbox_state` for `state`.
///
/// ```
/// use breakerbox_metrics::state_code;
/// use breakerbox_runtime::State;
/// assert_eq!(state_code(State::Closed), 0.0);
/// assert_eq!(state_code(State::HalfOpen), 2.0);
/// ```
pub fn state_code(state: State) -> f64 {
    match state {
        State::Closed => 0.0,
        State::Open => 1.0,
        State::HalfOpen => 2.0,
        State::ForcedOpen => 3.0,
        State::Disabled => 4.0,
        // `State` is non-exhaustive: a state added later reads as none of the documented
        // codes until this table and its docs name it.
        _ => -1.0,
    }
}

/// A state as `breakerbox_transitions_total`'s `to` label names it.
fn state_label(state: State) -> &'static str {
    match state {
        State::Closed => "closed",
        State::Open => "open",
        State::HalfOpen => "half_open",
        State::ForcedOpen => "forced_open",
        State::Disabled => "disabled",
        _ => "other",
    }
}

/// A reason as `breakerbox_transitions_total`'s `reason` label names it (its `serde` name).
fn reason_label(reason: Reason) -> &'static str {
    match reason {
        Reason::Failures(_) => "failures",
        Reason::FailureRate(_) => "failure_rate",
        Reason::SlowRate(_) => "slow_rate",
        Reason::TripFor(_) => "trip_for",
        Reason::OpenElapsed => "open_elapsed",
        Reason::ProbeFailed => "probe_failed",
        Reason::ProbeTimeout => "probe_timeout",
        Reason::ProbesSucceeded => "probes_succeeded",
        Reason::HealthProbe => "health_probe",
        Reason::ForcedOpen => "forced_open",
        Reason::Disabled => "disabled",
        Reason::Reset => "reset",
        Reason::Imported => "imported",
        _ => "other",
    }
}

fn describe() {
    describe_histogram!(
        "breakerbox_call_duration_seconds",
        Unit::Seconds,
        "Durations of the calls through a circuit breaker that times them (slow threshold or latency = true)."
    );
    describe_gauge!(
        "breakerbox_call_duration_last_minute_seconds",
        Unit::Seconds,
        "The p50, p90 and p99 of the last minute's call durations, by quantile."
    );
    describe_counter!(
        "breakerbox_calls_total",
        Unit::Count,
        "Calls through each circuit breaker by outcome (success, failure, ignored, rejected; slow overlaps them, timeout is among the failures)."
    );
    describe_gauge!(
        "breakerbox_state",
        "Circuit breaker state: 0 closed, 1 open, 2 half-open, 3 forced-open, 4 disabled."
    );
    describe_gauge!(
        "breakerbox_failure_rate",
        Unit::Percent,
        "Failure rate in the breaker's rate window, in percent."
    );
    describe_gauge!(
        "breakerbox_slow_rate",
        Unit::Percent,
        "Slow-call rate in the breaker's rate window, in percent."
    );
    describe_counter!(
        "breakerbox_opened_total",
        Unit::Count,
        "Times the circuit breaker opened."
    );
    describe_counter!(
        "breakerbox_family_calls_total",
        Unit::Count,
        "Calls through a keyed family's breakers by outcome, evicted keys included."
    );
    describe_gauge!("breakerbox_family_keys", "Keys a keyed family holds.");
    describe_gauge!(
        "breakerbox_family_open_keys",
        "Keys of a keyed family that are open, half-open or forced open."
    );
    describe_counter!(
        "breakerbox_family_evicted_total",
        Unit::Count,
        "Keys a keyed family evicted."
    );
    describe_counter!(
        "breakerbox_transitions_total",
        Unit::Count,
        "State changes of each circuit breaker (a keyed family's keys under the family's name), by the state entered and the reason (imported: taken on from another instance)."
    );
    describe_gauge!(
        "breakerbox_key_state",
        "State of a keyed family's key among its top open keys (0: no longer among them)."
    );
}

/// Keeps `breakerbox_state` current for every [`registry`] breaker: adds a registry listener
/// that sets the gauge on each state change, and describes the metrics to the recorder.
///
/// Call it once at startup, after installing the recorder; later calls do nothing. The
/// listener runs only on transitions, in their order.
pub fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        describe();
        registry().on_state_change(|event| {
            counter!(
                "breakerbox_transitions_total",
                "name" => event.name.clone(),
                "to" => state_label(event.to),
                "reason" => reason_label(event.reason)
            )
            .increment(1);
            // A registry family's key: exported by `record_all`, per family and its top open
            // keys, not as a breaker of the family's name.
            if event.key.is_some() {
                return;
            }
            // Read the state now rather than trust `event.to`: listeners of two quick
            // transitions may run in either order, and the gauge must end on the last state.
            let state = registry().get(&event.name).map_or(event.to, |b| b.state());
            gauge!("breakerbox_state", "name" => event.name.clone()).set(state_code(state));
        });
    });
}

/// Keeps `breakerbox_state` current for a breaker outside the registry (from
/// [`Breaker::new`]), as [`install`] does for registry breakers. Call it once per breaker.
pub fn watch(breaker: &Breaker) {
    // `event.to`, not a handle's `state()`: a breaker's own listeners hear its changes in
    // order, and a handle held by the breaker's own listener would keep it alive for ever.
    breaker.on_state_change(move |event| {
        gauge!("breakerbox_state", "name" => event.name.clone()).set(state_code(event.to));
    });
}

/// Exports every [`registry`] breaker's metrics to the installed recorder, with the metrics'
/// descriptions. Cheap enough to call on each scrape: one snapshot per breaker, a few label
/// strings.
pub fn record_all() {
    describe();
    for breaker in registry().breakers() {
        record(&breaker);
    }
    let families = registry().family_snapshots(TOP_OPEN.load(Ordering::Relaxed));
    for family in &families {
        record_snapshot(family);
    }
    let mut rows: HashMap<String, Vec<KeyRow>> = HashMap::new();
    if PER_KEY.load(Ordering::Relaxed) {
        __integrations::each_family_key(registry(), |name, key, breaker| {
            rows.entry(name.to_owned())
                .or_default()
                .push(KeyRow::of(key, breaker));
        });
    }
    for family in &families {
        let rows = rows.remove(&family.name).unwrap_or_default();
        record_keys(&family.name, rows);
    }
}

/// How many open keys per family [`record_all`] and [`record_family`] export one by one
/// (`breakerbox_key_state`): 10 unless set.
static TOP_OPEN: AtomicUsize = AtomicUsize::new(10);

/// Whether every key of every family is exported.
static PER_KEY: AtomicBool = AtomicBool::new(false);

/// Sets how many open keys of each keyed family are exported one by one, those with the most
/// failures (default 10; 0 for none). Applies from the next export.
pub fn set_top_open(n: usize) {
    TOP_OPEN.store(n, Ordering::Relaxed);
}

/// Turns on (or off) a series per key for every key of every keyed family, from the next
/// export (see the [module docs](self#keyed-families) for the metrics and the cardinality).
pub fn set_per_key(on: bool) {
    PER_KEY.store(on, Ordering::Relaxed);
}

/// Exports a keyed family outside the registry (from [`BreakerMap::new`]) as [`record_all`]
/// exports the registry's.
pub fn record_family<K, S>(family: &BreakerMap<K, S>)
where
    K: Hash + Eq + Clone + fmt::Display + Send + Sync + 'static,
    S: BuildHasher + Send + Sync + 'static,
{
    record_snapshot(&family.snapshot(TOP_OPEN.load(Ordering::Relaxed)));
    let mut rows = Vec::new();
    if PER_KEY.load(Ordering::Relaxed) {
        __integrations::each_key(family, |key, b| rows.push(KeyRow::of(key, b)));
    }
    record_keys(family.name(), rows);
}

/// One key as the per-key export reads it: its breaker, its counts (`OUTCOMES`' order, then
/// times opened) and its state.
struct KeyRow {
    key: String,
    breaker: Breaker,
    counts: [u64; 7],
    state: State,
}

impl KeyRow {
    fn of(key: String, breaker: &Breaker) -> KeyRow {
        let m = breaker.metrics();
        KeyRow {
            key,
            breaker: breaker.clone(),
            counts: counts(&m),
            state: m.state,
        }
    }
}

/// A breaker's counts as the export keeps them: `OUTCOMES`' order, then times opened.
fn counts(m: &breakerbox_runtime::Metrics) -> [u64; 7] {
    [
        m.successes,
        m.failures,
        m.ignored,
        m.rejected,
        m.slow,
        m.timeouts,
        m.times_opened,
    ]
}

/// The counts exported under a breaker's name, or a family's key: those of every breaker
/// exported under it, live or gone. A counter only goes up (`Counter::absolute` never lowers
/// it, as the Prometheus exporter keeps it), so a breaker made again under the name (a
/// `Breaker::new` rebuilt, an evicted key called again), whose own counts start from 0, would
/// show none of its calls until it outnumbered the old one: its counts are added to the old
/// ones' instead. Breakers are told apart by identity; two live ones of a name add up.
#[derive(Default)]
struct Totals {
    /// The live breakers exported under it, each with its counts.
    live: Vec<Live>,
    /// The counts of those that are gone.
    gone: [u64; 7],
}

/// A live breaker exported under a name or key.
struct Live {
    breaker: WeakBreaker,
    /// Its counts, the highest seen: a snapshot older than one exported (two exports at once)
    /// lowers nothing.
    counts: [u64; 7],
    /// Its histogram's buckets as exported (see [`latency_deltas`]).
    seen: BTreeMap<u128, u64>,
}

impl Totals {
    /// Takes `now`, `breaker`'s counts, and `latency`, its histogram, and answers the counts
    /// to export, the calls timed since its last export, and the handles it upgraded: to
    /// drop outside the caller's lock, as the last handle of a breaker drops its clock (user
    /// code).
    fn add(
        &mut self,
        breaker: &Breaker,
        now: [u64; 7],
        latency: Option<&breakerbox_runtime::LatencySnapshot>,
    ) -> ([u64; 7], Vec<(f64, u64)>, Vec<Breaker>) {
        let mut handles = Vec::new();
        let gone = &mut self.gone;
        self.live.retain(|live| match live.breaker.upgrade() {
            Some(handle) => {
                handles.push(handle);
                true
            }
            None => {
                for (gone, count) in gone.iter_mut().zip(&live.counts) {
                    *gone = gone.saturating_add(*count);
                }
                false
            }
        });
        let at = match handles.iter().position(|live| live.ptr_eq(breaker)) {
            Some(at) => at,
            None => {
                self.live.push(Live {
                    breaker: breaker.downgrade(),
                    counts: [0; 7],
                    seen: BTreeMap::new(),
                });
                self.live.len() - 1
            }
        };
        let live = &mut self.live[at];
        for (kept, now) in live.counts.iter_mut().zip(now) {
            *kept = (*kept).max(now);
        }
        let new = latency.map_or_else(Vec::new, |l| latency_deltas(l, &mut live.seen));
        let mut totals = self.gone;
        for live in &self.live {
            for (total, count) in totals.iter_mut().zip(&live.counts) {
                *total = total.saturating_add(*count);
            }
        }
        (totals, new, handles)
    }
}

/// What the per-key export knows of one key of a family.
#[derive(Default)]
struct KeyTotals {
    totals: Totals,
    /// Whether the last export sent its state.
    exported: bool,
}

/// Exports `rows`, every key of family `name` now (none when per-key export is off), and sets
/// `breakerbox_key_state` to 0 for the keys the last export sent and this one does not:
/// evicted, or per-key export turned off since (a key among the top open keys keeps the state
/// [`record_snapshot`] set). A gauge stays at its last value, and the `metrics` crate has no
/// removal: an open key evicted once idle would read open for ever.
///
/// A key's counters count every breaker the key had ([`Totals`]): an evicted key called again
/// gets a new breaker. What is kept is one entry per key ever exported, as the recorder keeps
/// one series per key.
fn record_keys(name: &str, rows: Vec<KeyRow>) {
    let (exported, zeroed, dropped) = {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        let last = last
            .get_or_insert_with(HashMap::new)
            .entry(name.to_owned())
            .or_default();
        let mut now: HashSet<&str> = HashSet::with_capacity(rows.len());
        let mut exported = Vec::with_capacity(rows.len());
        let mut dropped = Vec::new();
        for row in &rows {
            now.insert(&row.key);
            let kept = last.keys.entry(row.key.clone()).or_default();
            let (total, _, handles) = kept.totals.add(&row.breaker, row.counts, None);
            dropped.extend(handles);
            kept.exported = true;
            exported.push(total);
        }
        let mut zeroed = Vec::new();
        for (key, kept) in &mut last.keys {
            if !now.contains(key.as_str()) && kept.exported {
                kept.exported = false;
                if !last.top.contains(key) {
                    zeroed.push(key.clone());
                }
            }
        }
        (exported, zeroed, dropped)
    };
    // Outside the lock: the recorder is the application's code, and so is a breaker's drop.
    drop(dropped);
    for (row, total) in rows.into_iter().zip(exported) {
        for (outcome, value) in OUTCOMES.into_iter().zip(total) {
            counter!("breakerbox_key_calls_total", "name" => name.to_owned(), "key" => row.key.clone(), "outcome" => outcome)
                .absolute(value);
        }
        counter!("breakerbox_key_opened_total", "name" => name.to_owned(), "key" => row.key.clone())
            .absolute(total[6]);
        gauge!("breakerbox_key_state", "name" => name.to_owned(), "key" => row.key)
            .set(state_code(row.state));
    }
    for key in zeroed {
        gauge!("breakerbox_key_state", "name" => name.to_owned(), "key" => key).set(0.0);
    }
}

/// What the last export of each family name sent: its counters (sent as the highest value
/// seen, so that a snapshot taken during an eviction never shows one going down) and its top
/// open keys (set to 0 once they leave the top). One entry per name, with a few numbers per
/// family made under it.
static LAST: Mutex<Option<HashMap<String, Last>>> = Mutex::new(None);

#[derive(Default)]
struct Last {
    /// Each family exported under the name. The counters export the sum of their counts: a
    /// counter only goes up (`Counter::absolute` never lowers it), so a family made again
    /// under the name of a dropped one, exporting its own counts, would show none of its
    /// calls until they outnumbered the old one's.
    families: Vec<FamilyCounts>,
    top: Vec<String>,
    /// The keys the per-key export ([`set_per_key`]) has sent.
    keys: HashMap<String, KeyTotals>,
}

/// One family exported under a name.
struct FamilyCounts {
    /// Which family ([`__integrations::family_id`]).
    id: u64,
    /// Its counts, the highest seen.
    counts: [u64; 7],
    /// Its histogram's buckets as exported (see [`latency_deltas`]).
    seen: BTreeMap<u128, u64>,
}

/// The `outcome` label's values, in the order of a family's counts.
const OUTCOMES: [&str; 6] = [
    "success", "failure", "ignored", "rejected", "slow", "timeout",
];

/// Exports one family's snapshot: aggregates, open keys, the top open keys.
fn record_snapshot(s: &FamilySnapshot) {
    let t = &s.totals;
    let now = [
        t.successes,
        t.failures,
        t.ignored,
        t.rejected,
        t.slow,
        t.timeouts,
        s.evicted.keys,
    ];
    let top: Vec<String> = s.top_open.iter().map(|k| k.key.clone()).collect();
    // Under the lock only our own bookkeeping; the recorder (user code) is called after.
    let (counts, left, new) = {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        let last = last
            .get_or_insert_with(HashMap::new)
            .entry(s.name.clone())
            .or_default();
        // Another family of this name than those exported has counts and a histogram of its
        // own; its keys' gauges left from an old one are still set to 0 below.
        let id = __integrations::family_id(s);
        let at = match last.families.iter().position(|f| f.id == id) {
            Some(at) => at,
            None => {
                last.families.push(FamilyCounts {
                    id,
                    counts: [0; 7],
                    seen: BTreeMap::new(),
                });
                last.families.len() - 1
            }
        };
        let family = &mut last.families[at];
        for (kept, now) in family.counts.iter_mut().zip(now) {
            *kept = (*kept).max(now);
        }
        let new = s
            .latency
            .as_ref()
            .map_or_else(Vec::new, |l| latency_deltas(l, &mut family.seen));
        let mut counts = [0u64; 7];
        for family in &last.families {
            for (count, kept) in counts.iter_mut().zip(&family.counts) {
                *count = count.saturating_add(*kept);
            }
        }
        let left: Vec<String> = last
            .top
            .iter()
            .filter(|k| !top.contains(k))
            .cloned()
            .collect();
        last.top = top;
        (counts, left, new)
    };
    let name = &s.name;
    for (outcome, value) in OUTCOMES.into_iter().zip(counts) {
        counter!("breakerbox_family_calls_total", "name" => name.clone(), "outcome" => outcome)
            .absolute(value);
    }
    counter!("breakerbox_family_evicted_total", "name" => name.clone()).absolute(counts[6]);
    gauge!("breakerbox_family_keys", "name" => name.clone()).set(s.keys as f64);
    gauge!("breakerbox_family_open_keys", "name" => name.clone()).set(s.open_keys as f64);
    for key in left {
        gauge!("breakerbox_key_state", "name" => name.clone(), "key" => key).set(0.0);
    }
    for k in &s.top_open {
        gauge!("breakerbox_key_state", "name" => name.clone(), "key" => k.key.clone())
            .set(state_code(k.metrics.state));
    }
    if let Some(latency) = &s.latency {
        record_latency(name, latency, new);
    }
}

/// Exports one breaker's metrics (any breaker, in the registry or not).
pub fn record(breaker: &Breaker) {
    let m = breaker.metrics();
    // Read before the lock: it reads the breaker's clock, user code.
    let latency = breaker.latency();
    let (totals, new) = breaker_totals(breaker, &m.name, counts(&m), latency.as_ref());
    let name = m.name;
    for (outcome, value) in OUTCOMES.into_iter().zip(totals) {
        counter!("breakerbox_calls_total", "name" => name.clone(), "outcome" => outcome)
            .absolute(value);
    }
    gauge!("breakerbox_state", "name" => name.clone()).set(state_code(m.state));
    let config = breaker.config();
    if config.failure_rate().is_some() {
        gauge!("breakerbox_failure_rate", "name" => name.clone())
            .set(m.failure_rate.unwrap_or(0.0));
    }
    if config.slow_rate().is_some() {
        gauge!("breakerbox_slow_rate", "name" => name.clone()).set(m.slow_rate.unwrap_or(0.0));
    }
    if let Some(latency) = &latency {
        record_latency(&name, latency, new);
    }
    counter!("breakerbox_opened_total", "name" => name).absolute(totals[6]);
}

/// The counts to export for `breaker`, named `name`, whose own counts are `now`, and the calls
/// its histogram `latency` timed since its last export (see [`Totals`]).
fn breaker_totals(
    breaker: &Breaker,
    name: &str,
    now: [u64; 7],
    latency: Option<&breakerbox_runtime::LatencySnapshot>,
) -> ([u64; 7], Vec<(f64, u64)>) {
    static BREAKERS: Mutex<Option<HashMap<String, Totals>>> = Mutex::new(None);
    let (totals, new, handles) = BREAKERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .entry(name.to_owned())
        .or_default()
        .add(breaker, now, latency);
    // Outside the lock: the last handle of a breaker drops its clock, user code.
    drop(handles);
    (totals, new)
}

/// The calls `latency` timed since the last export of the same breaker or family, each at its
/// bucket's value, with `seen` the buckets as that export read them (updated).
///
/// A bucket holding fewer calls than at the last export is a snapshot older than that export's
/// (two exports at once), or, for a keyed family, a key caught between its eviction and its
/// counts' keeping (see [`FamilyTotals`](breakerbox_runtime::FamilyTotals)): nothing is new,
/// and the highest count seen is kept.
fn latency_deltas(
    latency: &breakerbox_runtime::LatencySnapshot,
    seen: &mut BTreeMap<u128, u64>,
) -> Vec<(f64, u64)> {
    let mut new = Vec::new();
    for ((upper, count), (at, _)) in latency.buckets().zip(latency.bucket_values()) {
        let before = seen.get(&upper.as_nanos()).copied().unwrap_or(0);
        if count > before {
            seen.insert(upper.as_nanos(), count);
            new.push((at.as_secs_f64(), count - before));
        }
    }
    new
}

/// Feeds `breakerbox_call_duration_seconds` the calls timed since the last export, `new`
/// ([`latency_deltas`]), and sets the last minute's quantiles.
fn record_latency(name: &str, latency: &breakerbox_runtime::LatencySnapshot, new: Vec<(f64, u64)>) {
    let h = histogram!("breakerbox_call_duration_seconds", "name" => name.to_owned());
    for (at, delta) in new {
        h.record_many(at, usize::try_from(delta).unwrap_or(usize::MAX));
    }
    // Absent until the first call timed; then NaN for a minute without calls, as a
    // Prometheus summary reads without observations: a gauge cannot be removed, and left
    // alone it would go on reading the quantile of calls long gone.
    if latency.buckets().next().is_none() {
        return;
    }
    for (quantile, value) in [
        ("0.5", latency.p50),
        ("0.9", latency.p90),
        ("0.99", latency.p99),
    ] {
        gauge!("breakerbox_call_duration_last_minute_seconds", "name" => name.to_owned(), "quantile" => quantile)
            .set(value.map_or(f64::NAN, |v| v.as_secs_f64()));
    }
}
