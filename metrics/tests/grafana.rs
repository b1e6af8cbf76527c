//! docs/grafana/breakerbox.json queries only what a running service exports: every metric name
//! and every label its PromQL names is in the Prometheus text that `record_all` (with the
//! per-key export on), `install`'s listener and a replay journal make through
//! `metrics-exporter-prometheus`, for breakers, a family, a replay and a breaker that took on
//! another instance's state, in every state the panels show. And it covers them: families'
//! keys, timeouts, rejections and trips, replay and the fleet each have a panel, and its
//! `$name` variable lists breakers and families.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use breakerbox_replay::{Replay, ReplayConfig};
use breakerbox_runtime::{Breaker, Config, ManualClock, TokioClock, Window, registry};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// Metric name → the labels its series carry, from Prometheus text.
fn emitted(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut all: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        let labels = all.entry(name.to_owned()).or_default();
        if let Some(body) = rest.strip_prefix('{').and_then(|r| r.split('}').next()) {
            for pair in body.split("\",") {
                if let Some((label, _)) = pair.split_once('=') {
                    labels.insert(label.trim().to_owned());
                }
            }
        }
    }
    all
}

/// What one PromQL expression names: `(metric, labels matched in its braces)` for each
/// selector, and the labels of its `by (…)` clauses.
fn named(expr: &str) -> (Vec<(String, Vec<String>)>, Vec<String>) {
    let bytes = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let (mut selectors, mut by) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"' {
            // A string: skip it whole.
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            continue;
        }
        if !ident(bytes[i]) || (i > 0 && ident(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && ident(bytes[i]) {
            i += 1;
        }
        let word = &expr[start..i];
        let rest = expr[i..].trim_start();
        if word == "by" && rest.starts_with('(') {
            let list = &rest[1..rest.find(')').expect("a closed by (…)")];
            by.extend(list.split(',').map(|l| l.trim().to_owned()));
        } else if word.starts_with("breakerbox_") {
            let mut labels = Vec::new();
            if let Some(body) = rest.strip_prefix('{') {
                // Matchers up to the closing brace: `label op "string"`, strings skipped whole.
                let body = body.as_bytes();
                let (mut j, mut label) = (0, String::new());
                while j < body.len() && body[j] != b'}' {
                    match body[j] {
                        b'"' => {
                            j += 1;
                            while j < body.len() && body[j] != b'"' {
                                j += if body[j] == b'\\' { 2 } else { 1 };
                            }
                        }
                        b'=' | b'!' if !label.is_empty() => labels.push(std::mem::take(&mut label)),
                        c if ident(c) => label.push(c as char),
                        _ => {}
                    }
                    j += 1;
                }
            }
            selectors.push((word.to_owned(), labels));
        }
    }
    (selectors, by)
}

/// The values of label `label` that `metric`'s series carry, from Prometheus text.
fn values(text: &str, metric: &str, label: &str) -> BTreeSet<String> {
    let prefix = format!("{metric}{{");
    let key = format!("{label}=\"");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|rest| {
            let at = rest.find(&key)? + key.len();
            Some(rest[at..].split('"').next()?.to_owned())
        })
        .collect()
}

/// Labels Prometheus adds to every series it scrapes (the target's), which a `by (…)` may
/// name though no export emits them: the fleet panels group by `instance`.
const SCRAPE_LABELS: [&str; 2] = ["instance", "job"];

/// The values an expression's selectors of `metric` ask of label `label` with `=` or `=~`
/// (each alternative of a `a|b` regex).
fn asked(expr: &str, metric: &str, label: &str) -> Vec<String> {
    let mut all = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(&format!("{metric}{{")) {
        let body = &rest[at + metric.len() + 1..];
        let body = &body[..body.find('}').expect("a closed selector")];
        for matcher in body.split(',') {
            let matcher = matcher.trim();
            let value = matcher
                .strip_prefix(&format!("{label}=~"))
                .or_else(|| matcher.strip_prefix(&format!("{label}=")));
            if let Some(value) = value {
                all.extend(value.trim_matches('"').split('|').map(str::to_owned));
            }
        }
        rest = &rest[at + metric.len()..];
    }
    all
}

/// Every PromQL expression of the dashboard: its panels' targets and its variables' queries.
fn expressions(dashboard: &serde_json::Value) -> Vec<String> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        // A row holds no query.
        for target in panel["targets"].as_array().into_iter().flatten() {
            all.push(target["expr"].as_str().unwrap().to_owned());
        }
    }
    for (metric, label) in variable_metrics(dashboard) {
        all.push(format!("{metric}{{{label}=\"\"}}"));
    }
    all
}

/// The metrics and label each variable's `label_values(…)` reads: `label_values(metric,
/// label)`, or `label_values({__name__=~"a|b"}, label)` for each of `a` and `b`.
fn variable_metrics(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut all = Vec::new();
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(q) = var["query"]["query"].as_str() {
            let inner = q.trim_start_matches("label_values(").trim_end_matches(')');
            let (metric, label) = inner.rsplit_once(',').unwrap();
            let metric = metric.trim();
            let names: Vec<&str> = match metric.strip_prefix("{__name__=~\"") {
                Some(regex) => regex.trim_end_matches("\"}").split('|').collect(),
                None => vec![metric],
            };
            for name in names {
                all.push((name.to_owned(), label.trim().to_owned()));
            }
        }
    }
    all
}

/// The Prometheus text of an export of breakers and a family in every state the panels show.
fn export_text() -> String {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("breakerbox_call_duration_seconds".into()),
            &[0.001, 0.01, 0.1, 1.0],
        )
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    let clock = ManualClock::new();
    registry().set_clock("grafana-rate", clock.clone());
    let rate = registry().get_or_create("grafana-rate", || {
        Config::builder()
            .failure_rate(50)
            .window(Window::Calls(10))
            .min_calls(4)
            .slow(Duration::from_millis(100))
            .slow_rate(90)
            .latency(true)
            .build()
            .unwrap()
    });
    let hosts = registry()
        .family::<String>("grafana-hosts", || {
            Config::builder().failures(1).build().unwrap()
        })
        .unwrap();
    // Another instance's breaker, tripped: what fleet mode hands this one.
    let shared = registry().get_or_create("grafana-shared", || {
        Config::builder().failures(1).build().unwrap()
    });
    let elsewhere = Breaker::new(
        "grafana-shared",
        Config::builder().failures(1).build().unwrap(),
    );
    let _ = elsewhere.call(|| Err::<(), _>("HTTP 503"));
    metrics::with_local_recorder(&recorder, || {
        breakerbox_metrics::install();
        breakerbox_metrics::set_per_key(true);
        shared.import_state(&elsewhere.export_state());
        replay_some();
        for i in 0..6 {
            let _ = rate.call(|| {
                clock.advance(Duration::from_millis(if i == 0 { 150 } else { 5 }));
                if i % 2 == 0 { Err("down") } else { Ok(()) }
            });
        }
        let _ = rate.call(|| Ok::<_, &str>(())); // rejected: it tripped
        rate.reset();
        rate.try_acquire()
            .unwrap()
            .timed_out(&breakerbox_runtime::Timeout::new(
                "grafana-rate",
                Duration::from_secs(1),
            ));
        rate.trip_for(Duration::from_secs(60));
        let _ = rate.call_with(|| (), |_| breakerbox_runtime::Outcome::Ignored);
        hosts
            .call(&"up.example".to_owned(), || Ok::<_, &str>(()))
            .unwrap();
        let _ = hosts.call(&"down.example".to_owned(), || Err::<(), _>("refused"));
        let _ = hosts.call(&"down.example".to_owned(), || Ok::<_, &str>(()));
        breakerbox_metrics::record_all();
    });
    handle.render()
}

/// A replay over a registry breaker: calls journaled while it is forced open, one of them a
/// duplicate, then replayed (one fails, and is a dead letter) once it is reset.
fn replay_some() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let webhooks = registry().get_or_create("grafana-webhooks", || {
            Config::builder().clock(TokioClock).build().unwrap()
        });
        let replay = Replay::builder(&webhooks)
            .clock(TokioClock)
            .config(ReplayConfig::new().attempts(1))
            .key(|n: &u32| n.to_string())
            .memory(|n: u32| async move { if n == 2 { Err("down") } else { Ok(()) } })
            .unwrap();
        webhooks.force_open();
        for n in [1, 1, 2, 3] {
            let _ = replay.call(n, |_| Ok::<(), &str>(()));
        }
        webhooks.reset();
        tokio::time::sleep(Duration::from_secs(5)).await;
        webhooks.force_open();
        let _ = replay.call(4, |_| Ok::<(), &str>(()));
        drop(replay);
    });
}

#[test]
fn the_grafana_dashboard_queries_only_metrics_and_labels_the_export_emits() {
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../../docs/grafana/breakerbox.json")).unwrap();
    let text = export_text();
    let emitted = emitted(&text);
    let exprs = expressions(&dashboard);
    assert!(exprs.len() >= 10, "{exprs:?}");
    let mut metrics_used = BTreeSet::new();
    for expr in &exprs {
        let (selectors, by) = named(expr);
        assert!(!selectors.is_empty(), "no breakerbox metric in {expr}");
        let mut labels_here = BTreeSet::new();
        for (metric, labels) in selectors {
            let Some(has) = emitted.get(&metric) else {
                panic!("`{metric}` (in {expr}) is not emitted; the export emits:\n{text}");
            };
            for label in labels {
                assert!(
                    has.contains(&label),
                    "`{metric}` has no label `{label}` (in {expr}): {has:?}"
                );
            }
            labels_here.extend(has.iter().cloned());
            metrics_used.insert(metric);
        }
        for label in by {
            assert!(
                labels_here.contains(&label) || SCRAPE_LABELS.contains(&label.as_str()),
                "`by ({label})` names no label of the metrics of {expr}"
            );
        }
    }
    // Every value a panel asks of a label is one the export emits.
    let mut outcomes_asked = BTreeSet::new();
    for expr in &exprs {
        for (metric, label) in [
            ("breakerbox_calls_total", "outcome"),
            ("breakerbox_family_calls_total", "outcome"),
            ("breakerbox_transitions_total", "to"),
            ("breakerbox_transitions_total", "reason"),
            ("breakerbox_replay_total", "event"),
        ] {
            let emitted = values(&text, metric, label);
            for value in asked(expr, metric, label) {
                assert!(
                    emitted.contains(&value),
                    "`{metric}` has no {label} `{value}` (in {expr}): {emitted:?}"
                );
                if label == "outcome" {
                    outcomes_asked.insert(value);
                }
            }
        }
    }
    // Rejections and timeouts, each on a panel of its own kind.
    for outcome in ["success", "failure", "rejected", "slow", "timeout"] {
        assert!(
            outcomes_asked.contains(outcome),
            "no panel shows outcome `{outcome}`: {outcomes_asked:?}"
        );
    }
    // What the dashboard shows: state, rates, rejections, latency; families' keys, calls,
    // timeouts and rejections, trips and evictions; replay; the fleet's openings.
    for metric in [
        "breakerbox_state",
        "breakerbox_calls_total",
        "breakerbox_failure_rate",
        "breakerbox_call_duration_seconds_bucket",
        "breakerbox_family_open_keys",
        "breakerbox_family_keys",
        "breakerbox_family_calls_total",
        "breakerbox_family_evicted_total",
        "breakerbox_key_state",
        "breakerbox_key_opened_total",
        "breakerbox_transitions_total",
        "breakerbox_replay_entries",
        "breakerbox_replay_dead_letters",
        "breakerbox_replay_bytes",
        "breakerbox_replay_total",
    ] {
        assert!(
            metrics_used.contains(metric),
            "the dashboard does not query {metric}"
        );
    }
    // Families' timeouts and rejections, and the fleet's imported openings, are asked for.
    let asks = |metric: &str, label: &str, value: &str| {
        exprs
            .iter()
            .any(|e| asked(e, metric, label).iter().any(|v| v == value))
    };
    assert!(asks("breakerbox_family_calls_total", "outcome", "timeout"));
    assert!(asks("breakerbox_family_calls_total", "outcome", "rejected"));
    assert!(asks("breakerbox_transitions_total", "reason", "imported"));
    // Every replay event the export emits is one the replay panel shows (it asks for all).
    assert!(
        values(&text, "breakerbox_replay_total", "event").len() >= 4,
        "{text}"
    );
    // `$name` lists every breaker and every keyed family the service exports.
    let listed: BTreeSet<String> = variable_metrics(&dashboard)
        .iter()
        .filter(|(_, label)| label == "name")
        .flat_map(|(metric, label)| values(&text, metric, label))
        .collect();
    for name in [
        "grafana-rate",
        "grafana-hosts",
        "grafana-shared",
        "grafana-webhooks",
    ] {
        assert!(
            listed.contains(name),
            "$name does not list {name}: {listed:?}"
        );
    }
    // A replay panel's journal is a breaker's name: `$name` selects it.
    assert!(
        values(&text, "breakerbox_replay_entries", "journal").contains("grafana-webhooks"),
        "{text}"
    );
}

#[test]
fn the_query_reader_finds_metrics_labels_and_groupings() {
    let (selectors, by) = named(
        r#"sum by (name, le) (rate(breakerbox_x_bucket{name=~"$name", outcome!="a,b}"}[5m])) / breakerbox_y"#,
    );
    assert_eq!(
        selectors,
        [
            (
                "breakerbox_x_bucket".to_owned(),
                vec!["name".to_owned(), "outcome".to_owned()]
            ),
            ("breakerbox_y".to_owned(), vec![])
        ]
    );
    assert_eq!(by, ["name", "le"]);
    let e = emitted("# HELP x\nbreakerbox_a{name=\"n\",outcome=\"o\"} 1\nbreakerbox_b 2\n");
    assert_eq!(
        e["breakerbox_a"],
        BTreeSet::from(["name".to_owned(), "outcome".to_owned()])
    );
    assert!(e["breakerbox_b"].is_empty());
    assert_eq!(
        values(
            "breakerbox_a{name=\"n\",outcome=\"o\"} 1\nbreakerbox_a{outcome=\"p\"} 2\n",
            "breakerbox_a",
            "outcome"
        ),
        BTreeSet::from(["o".to_owned(), "p".to_owned()])
    );
    assert_eq!(
        asked(
            r#"rate(breakerbox_a{name=~"$n", outcome=~"x|y"}[1m]) / breakerbox_a{outcome="z"}"#,
            "breakerbox_a",
            "outcome"
        ),
        ["x", "y", "z"]
    );
}
