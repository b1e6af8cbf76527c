//! The JSON views of the breakers and families: `GET /breakers` and `GET /breakers/{name}`, and
//! what the other routes answer with too (a breaker's view, its lookup, the `404`s).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::respond::{Problem, json};
use crate::state::AdminState;
use breakerbox_runtime::__integrations::{self, display_duration, excerpt};
use breakerbox_runtime::{
    Breaker, Config, Explanation, FamilySnapshot, Metrics, State as BreakerState, registry,
};

/// How many open keys of a family the views list.
pub(crate) const OPEN_KEYS_SHOWN: usize = 20;

/// One breaker, as `GET /breakers` lists it and `GET /breakers/{name}` shows it.
#[derive(Serialize)]
pub(crate) struct BreakerView {
    /// `"breaker"`, or `"key"` for a keyed family's key (then `name` is the family's).
    kind: &'static str,
    pub(crate) name: String,
    /// A keyed family's key, as it displays.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) key: Option<String>,
    pub(crate) state: BreakerState,
    /// While open: the time left before it probes, as duration text.
    pub(crate) open_remaining: Option<String>,
    pub(crate) last_failure: Option<String>,
    /// [`Breaker::explain`]: why it is in its state, as a sentence and as data.
    explain: ExplainView,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<Config>,
    pub(crate) metrics: Metrics,
    /// [`Breaker::latency`]: `null` for a breaker that does not time its calls.
    latency: Option<LatencyView>,
}

/// The last minute's latency percentiles, in seconds (`null` without calls), and the calls
/// they are of.
#[derive(Serialize)]
struct LatencyView {
    calls: u64,
    p50: Option<f64>,
    p90: Option<f64>,
    p99: Option<f64>,
}

impl From<breakerbox_runtime::LatencySnapshot> for LatencyView {
    fn from(l: breakerbox_runtime::LatencySnapshot) -> LatencyView {
        let s = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        LatencyView {
            calls: l.recent_calls,
            p50: s(l.p50),
            p90: s(l.p90),
            p99: s(l.p99),
        }
    }
}

/// [`Explanation`] as JSON: its sentence, its short form, and its numbers.
#[derive(Serialize)]
struct ExplainView {
    text: String,
    short: String,
    cause: String,
    /// serde's form of `SystemTime`; `null` if the breaker never changed state.
    since_wall: Option<SystemTime>,
    elapsed: String,
    next_probe_in: Option<String>,
    open_for: Option<String>,
    backoff: Option<f64>,
    reopens: u32,
}

impl From<Explanation> for ExplainView {
    fn from(e: Explanation) -> ExplainView {
        ExplainView {
            text: e.to_string(),
            short: e.short().to_string(),
            cause: e.cause.to_string(),
            since_wall: e.since_wall,
            elapsed: display_duration(e.elapsed),
            next_probe_in: e.next_probe_in.map(display_duration),
            open_for: e.open_for.map(display_duration),
            backoff: e.backoff,
            reopens: e.reopens,
        }
    }
}

impl BreakerView {
    /// The breaker's view now; with its config unless `summary`.
    pub(crate) fn of(breaker: &Breaker, summary: bool) -> BreakerView {
        let metrics = breaker.metrics();
        let key = __integrations::breaker_key(breaker).map(str::to_owned);
        BreakerView {
            kind: if key.is_some() { "key" } else { "breaker" },
            name: breaker.name().to_owned(),
            key,
            state: metrics.state,
            open_remaining: open_remaining(&metrics),
            last_failure: breaker.last_failure().map(|s| s.to_string()),
            explain: breaker.explain().into(),
            config: (!summary).then(|| breaker.config().clone()),
            metrics,
            latency: breaker.latency().map(LatencyView::from),
        }
    }
}

/// The time left open, from a snapshot: `Some` in the `open` state only, rounded up to the
/// millisecond (`"56.932s"`, not `"56.931999867s"`; never `"0s"` while time is left).
pub(crate) fn open_remaining(metrics: &Metrics) -> Option<String> {
    match metrics.state {
        BreakerState::Open => metrics.retry_after.map(|left| {
            let millis = left.as_nanos().div_ceil(1_000_000);
            display_duration(Duration::from_millis(
                u64::try_from(millis).unwrap_or(u64::MAX),
            ))
        }),
        _ => None,
    }
}

/// A keyed family: [`FamilySnapshot`] (aggregates, the number of open keys, the
/// [`OPEN_KEYS_SHOWN`] open keys with the most failures), tagged as a family.
#[derive(Serialize)]
pub(crate) struct FamilyView {
    kind: &'static str,
    #[serde(flatten)]
    pub(crate) snapshot: FamilySnapshot,
    /// [`FamilySnapshot::latency`], over all its keys: `null` unless its keys time their calls.
    latency: Option<LatencyView>,
}

impl FamilyView {
    pub(crate) fn of(mut snapshot: FamilySnapshot) -> FamilyView {
        FamilyView {
            kind: "family",
            latency: snapshot.latency.take().map(LatencyView::from),
            snapshot,
        }
    }
}

/// Every registry breaker, sorted by name, with its config or without (`summary`).
pub(crate) fn breakers(summary: bool) -> Vec<BreakerView> {
    let mut all: Vec<BreakerView> = registry()
        .breakers()
        .iter()
        .map(|b| BreakerView::of(b, summary))
        .collect();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

/// Every keyed family, sorted by name.
pub(crate) fn families() -> Vec<FamilyView> {
    registry()
        .family_snapshots(OPEN_KEYS_SHOWN)
        .into_iter()
        .map(FamilyView::of)
        .collect()
}

#[derive(Serialize)]
struct List {
    breakers: Vec<BreakerView>,
    families: Vec<FamilyView>,
    control: bool,
}

/// `GET /breakers`.
pub(crate) async fn list(State(shared): State<Arc<AdminState>>) -> Response {
    json(&List {
        breakers: breakers(false),
        families: families(),
        control: shared.tokens.any(),
    })
}

/// `GET /breakers/{name}`: the breaker `name`, else the keyed family `name`.
pub(crate) async fn detail(name: Result<Path<String>, PathRejection>) -> Response {
    let name = match name {
        Ok(Path(name)) => name,
        Err(e) => return bad_path(e).into_response(),
    };
    if let Some(breaker) = registry().get(&name) {
        return json(&BreakerView::of(&breaker, false));
    }
    let snapshots = registry().family_snapshots(OPEN_KEYS_SHOWN);
    match snapshots.into_iter().find(|f| f.name == name) {
        Some(family) => json(&FamilyView::of(family)),
        None => unknown(&name).into_response(),
    }
}

/// The breaker `name` of the registry, or a `404` that says which names exist.
pub(crate) fn find(name: &str) -> Result<Breaker, Problem> {
    registry().get(name).ok_or_else(|| unknown(name))
}

pub(crate) fn unknown(name: &str) -> Problem {
    let names = registry().names();
    let hint = match __integrations::closest(name, names.iter().map(String::as_str)) {
        Some(near) => format!("; did you mean '{near}'?"),
        None => String::new(),
    };
    Problem::new(
        StatusCode::NOT_FOUND,
        format!(
            "no circuit breaker named '{}'{hint} (GET /breakers lists them)",
            excerpt(name)
        ),
    )
}

/// A path that does not decode (bad percent-encoding, not UTF-8).
pub(crate) fn bad_path(e: PathRejection) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, format!("bad path: {e}"))
}
