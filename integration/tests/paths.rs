//! Every public path a user writes under each of the facade's features still names the item it
//! did when the integrations lived in the runtime: a path lost in a move fails this build.

#[allow(unused_imports)]
use breakerbox::{
    LoadError, TokioClock,
    admin::{Admin, router},
    export::{
        install, record, record_all, record_family, set_per_key, set_top_open, state_code, watch,
    },
    fleet::{Fleet, FleetConfig, FleetConfigError, FleetError, FleetStatus, OnStoreError},
    http::{DEFAULT_MAX_RETRY_AFTER, HttpClassifier, Statuses, parse_retry_after, retry_after},
    tower::{
        CircuitBreaker, CircuitBreakerLayer, Classify, DefaultClassifier, KeyedCircuitBreaker,
        KeyedCircuitBreakerLayer, ResponseFuture,
    },
};

#[test]
fn the_integrations_paths_name_their_items() {
    // Each works as it did: a status is an outcome, the classifier is a tower classifier.
    let outcome = breakerbox::Outcome::from(axum::http::StatusCode::BAD_GATEWAY);
    assert_eq!(outcome, breakerbox::Outcome::Failure);
    fn classifies<C: Classify<axum::http::Response<()>, &'static str>>(_: &C) {}
    classifies(&HttpClassifier::new());
    assert_eq!(state_code(breakerbox::State::Open), 1.0);
    let _ = Admin::new().prometheus(String::new).router();
}
