//! docs/integrations.md's metrics table says what `breakerbox::export` sends: every series a
//! breaker exports (the latency ones included) is a metric the table names, every `outcome`
//! it sends is one the table lists, and the outcomes the page says to sum count each call once.

use std::collections::BTreeSet;
use std::time::Duration;

use breakerbox::{Rejected, Timeout, circuit_breaker};
use metrics_exporter_prometheus::PrometheusBuilder;

const INTEGRATIONS: &str = include_str!("../../docs/integrations.md");
const NAME: &str = "doc-metrics";

#[derive(Debug)]
enum CallError {
    Rejected,
    TimedOut,
}

impl From<Rejected> for CallError {
    fn from(_: Rejected) -> Self {
        CallError::Rejected
    }
}

impl From<Timeout> for CallError {
    fn from(_: Timeout) -> Self {
        CallError::TimedOut
    }
}

/// Times its calls (`slow`, `latency`) and gives up after 50 ms (`timeout`), so that it
/// exports every outcome the page lists but `ignored`, and the latency series.
#[circuit_breaker(
    name = "doc-metrics",
    failures = 100,
    slow = "10ms",
    latency = true,
    timeout = "50ms"
)]
async fn call(takes: Duration) -> Result<(), CallError> {
    tokio::time::sleep(takes).await;
    Ok(())
}

/// The rows of the page's table under `## metrics` whose first cell is a metric, as
/// (metric, the row's `value` cell).
fn documented_rows() -> Vec<(String, String)> {
    let section = INTEGRATIONS
        .split("\n## ")
        .find(|s| s.starts_with("metrics\n"))
        .expect("docs/integrations.md has a `## metrics` section");
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            let metric = cells.first()?.strip_prefix('`')?.strip_suffix('`')?;
            metric
                .starts_with("breakerbox_")
                .then(|| (metric.to_string(), cells.last().unwrap().to_string()))
        })
        .collect()
}

/// The spans in backticks of `text`.
fn backticked(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Every `(metric, labels)` of the rendered text for this test's breaker, with a histogram's or
/// summary's `_bucket`, `_sum` and `_count` series under the metric's own name.
fn exported(rendered: &str) -> Vec<(String, String)> {
    rendered
        .lines()
        .filter(|line| !line.starts_with('#') && line.contains(&format!("name=\"{NAME}\"")))
        .map(|line| {
            let (metric, rest) = line.split_once('{').expect("a labelled series");
            let labels = rest.split_once('}').expect("closed labels").0;
            let metric = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|suffix| metric.strip_suffix(suffix))
                .unwrap_or(metric);
            (metric.to_string(), labels.to_string())
        })
        .collect()
}

/// The value of `breakerbox_calls_total{name="doc-metrics",outcome="<outcome>"}`, 0 if absent.
fn calls(rendered: &str, outcome: &str) -> f64 {
    let series = format!("breakerbox_calls_total{{name=\"{NAME}\",outcome=\"{outcome}\"}} ");
    rendered
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0.0, |value| value.parse().expect("a number"))
}

#[tokio::test(start_paused = true)]
async fn the_metrics_table_names_every_series_and_outcome_a_breaker_exports() {
    let prometheus = PrometheusBuilder::new()
        .install_recorder()
        .expect("one recorder");
    breakerbox::export::install();

    call(Duration::from_millis(1))
        .await
        .expect("a quick success");
    call(Duration::from_millis(20))
        .await
        .expect("a slow success");
    assert!(matches!(
        call(Duration::from_millis(200)).await,
        Err(CallError::TimedOut)
    ));
    breakerbox::registry()
        .get(NAME)
        .expect("made by its first call")
        .force_open();
    assert!(matches!(
        call(Duration::from_millis(1)).await,
        Err(CallError::Rejected)
    ));

    breakerbox::export::record_all();
    let rendered = prometheus.render();

    let rows = documented_rows();
    let documented: BTreeSet<&str> = rows.iter().map(|(metric, _)| metric.as_str()).collect();
    let outcomes = backticked(
        &rows
            .iter()
            .find(|(metric, _)| metric == "breakerbox_calls_total")
            .expect("the table has breakerbox_calls_total")
            .1,
    );
    let series = exported(&rendered);
    assert!(
        series
            .iter()
            .any(|(metric, _)| metric == "breakerbox_call_duration_seconds"),
        "a timed breaker exports its latency:\n{rendered}"
    );
    for (metric, labels) in &series {
        assert!(
            documented.contains(metric.as_str()),
            "{metric} is exported but docs/integrations.md's metrics table does not name it"
        );
        if let Some(outcome) = labels.split(',').find_map(|l| l.strip_prefix("outcome=\"")) {
            let outcome = outcome.trim_end_matches('"');
            assert!(
                outcomes.contains(outcome),
                "outcome {outcome:?} is exported but the table lists only {outcomes:?}"
            );
        }
    }

    // The page's sum, `outcome!~"slow|timeout"`, counts each of the four calls once.
    let summed: f64 = ["success", "failure", "ignored", "rejected"]
        .iter()
        .map(|o| calls(&rendered, o))
        .sum();
    assert_eq!(summed, 4.0, "{rendered}");
    assert_eq!(calls(&rendered, "timeout"), 1.0, "{rendered}");
    assert_eq!(
        calls(&rendered, "failure"),
        1.0,
        "a timeout is a failure too:\n{rendered}"
    );
    assert!(
        INTEGRATIONS.contains(r#"outcome!~"slow|timeout""#),
        "the page's PromQL leaves out both overlapping outcomes"
    );
}
