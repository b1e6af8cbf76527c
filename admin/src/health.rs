//! `GET /health`: the registry's health for a readiness probe, in the JSON Spring Boot's
//! actuator answers (`{"status": "UP", "components": {…}}`).

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;

use crate::respond::json;
use breakerbox_runtime::{HealthStatus, State, registry};

#[derive(Serialize)]
struct Body {
    status: HealthStatus,
    components: BTreeMap<String, Component>,
}

#[derive(Serialize)]
struct Component {
    status: HealthStatus,
    details: Details,
}

#[derive(Serialize)]
struct Details {
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<State>,
    critical: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none", rename = "openKeys")]
    open_keys: Option<usize>,
}

/// `GET /health`: `200` for `UP` and `DEGRADED` (the service answers, some calls short of a
/// dependency), `503` for `DOWN` (a critical breaker is open), so a Kubernetes readiness probe
/// takes the pod out of the service only then.
pub(crate) async fn health() -> Response {
    let health = registry().health();
    let components = health
        .components
        .into_iter()
        .map(|c| {
            (
                c.name,
                Component {
                    status: c.status,
                    details: Details {
                        state: c.state,
                        critical: c.critical,
                        keys: c.keys,
                        open_keys: c.open_keys,
                    },
                },
            )
        })
        .collect();
    let mut response = json(&Body {
        status: health.status,
        components,
    });
    if health.status == HealthStatus::Down {
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    response
}
