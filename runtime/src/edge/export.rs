//! Breaker metrics through the [`metrics`](https://docs.rs/metrics) crate, for Prometheus
//! (`metrics-exporter-prometheus`), StatsD, OpenTelemetry, or any other `metrics` recorder.
//!
//! Nothing is recorded on the call path: calls only bump the breaker's own counters, as they
//! always do. [`record_all`] reads every breaker's [snapshot](crate::Registry::snapshot) and
//! sets the exported values; call it where metrics are scraped (before rendering `/metrics`) or
//! from a periodic task. [`install`] adds a registry listener that keeps the state gauge
//! current between two exports (it runs on transitions only).
//!
//! ```
//! // At startup, after installing your recorder (e.g. `PrometheusBuilder::install_recorder`):
//! breakerbox_runtime::export::install();
//!
//! // In the `/metrics` handler, before rendering:
//! breakerbox_runtime::export::record_all();
//! ```
//!
//! # Names and labels
//!
//! Every metric has the label `name`, the breaker's name.
//!
//! | metric | kind | labels | value |
//! | --- | --- | --- | --- |
//! | `breakerbox_calls_total` | counter | `name`, `outcome` | calls by outcome: `success`, `failure`, `ignored`, `rejected`, and `slow` |
//! | `breakerbox_state` | gauge | `name` | 0 closed, 1 open, 2 half-open, 3 forced-open, 4 disabled |
//! | `breakerbox_failure_rate` | gauge | `name` | the rate window's failure rate, in percent (0–100) |
//! | `breakerbox_slow_rate` | gauge | `name` | the rate window's slow-call rate, in percent (0–100) |
//! | `breakerbox_opened_total` | counter | `name` | times the breaker opened |
//!
//! `success`, `failure`, `ignored` and `rejected` partition the calls; `slow` counts calls that
//! took at least the `slow` threshold *whatever their outcome*, so leave it out of sums:
//! `sum by (name) (breakerbox_calls_total{outcome!="slow"})`. The rate gauges exist for
//! breakers with a rate policy (`failure_rate`, resp. `slow_rate`), and read 0 while the window
//! is empty. Counters are set to the breaker's totals (`Counter::absolute`), so exporting twice
//! never counts twice.
//!
//! # Alerting
//!
//! `breakerbox_state >= 1 and breakerbox_state <= 3` is "not letting calls through";
//! `increase(breakerbox_opened_total[5m]) > 0` fires on every trip, even one that closed again
//! between two scrapes. To be told at once instead, see
//! [`Registry::on_state_change`](crate::Registry::on_state_change).

use std::sync::Once;

use metrics::{Unit, counter, describe_counter, describe_gauge, gauge};

use crate::breaker::Breaker;
use crate::registry::registry;
use crate::state::State;

/// The value of `breakerbox_state` for `state`.
///
/// ```
/// use breakerbox_runtime::{State, export::state_code};
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
    }
}

fn describe() {
    describe_counter!(
        "breakerbox_calls_total",
        Unit::Count,
        "Calls through each circuit breaker by outcome (success, failure, ignored, rejected; slow overlaps them)."
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
}

/// Exports one breaker's metrics (any breaker, in the registry or not).
pub fn record(breaker: &Breaker) {
    let m = breaker.metrics();
    let name = m.name;
    for (outcome, value) in [
        ("success", m.successes),
        ("failure", m.failures),
        ("ignored", m.ignored),
        ("rejected", m.rejected),
        ("slow", m.slow),
    ] {
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
    counter!("breakerbox_opened_total", "name" => name).absolute(m.times_opened);
}
