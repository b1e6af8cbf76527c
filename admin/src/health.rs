//! `GET /health`: the registry's health for a readiness probe, in the JSON Spring Boot's
//! actuator answers (`{"status": "UP", "components": {…}}`), judged as [`HealthScope`] says;
//! `GET /health/readiness` is the same, `GET /health/liveness` only says the process answers.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State as Extract;
use axum::http::StatusCode;
use axum::response::Response;
use serde::Serialize;

use crate::health_scope::HealthScope;
use crate::history;
use crate::respond::json;
use crate::state::AdminState;
use breakerbox_runtime::{ComponentHealth, HealthStatus, KeyOrder, KeyQuery, State, registry};

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
    /// `"fleet"` when the breaker (or every critical open key) is open by a record taken on
    /// from another instance.
    #[serde(skip_serializing_if = "Option::is_none", rename = "openedBy")]
    opened_by: Option<&'static str>,
}

/// `GET /health` and `GET /health/readiness`: `200` for `UP` and `DEGRADED` (the service
/// answers, some calls short of a dependency), `503` for `DOWN` (a critical breaker is open),
/// so a Kubernetes readiness probe takes the pod out of the service only then.
pub(crate) async fn health(Extract(shared): Extract<Arc<AdminState>>) -> Response {
    let health = registry().health();
    let mut components: BTreeMap<String, Component> = BTreeMap::new();
    for (name, component) in health
        .components
        .into_iter()
        .map(|c| judged(c, shared.health_scope))
    {
        // A breaker and a keyed family may share a name (`Registry::check` reports it): the
        // answer keeps the worse of the two, so that the status is still the worst of all.
        match components.get(&name) {
            Some(kept) if kept.status >= component.status => {}
            _ => {
                components.insert(name, component);
            }
        }
    }
    let status = components
        .values()
        .map(|c| c.status)
        .max()
        .unwrap_or(HealthStatus::Up);
    let mut response = json(&Body { status, components });
    if status == HealthStatus::Down {
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    response
}

/// `GET /health/liveness`: `200` `{"status": "UP"}` whenever the router answers. A breaker
/// says nothing about whether restarting the process would help, so none is read.
pub(crate) async fn liveness() -> Response {
    json(&serde_json::json!({ "status": "UP" }))
}

/// One component as `scope` judges it: under [`HealthScope::Instance`] a `DOWN` made by a
/// record taken on from another instance is `DEGRADED`.
fn judged(c: ComponentHealth, scope: HealthScope) -> (String, Component) {
    let mut status = c.status;
    let mut opened_by = None;
    if scope == HealthScope::Instance && status == HealthStatus::Down {
        let by_fleet = match c.state {
            Some(_) => history::open_by_fleet(&c.name, None),
            None => !critical_key_open_here(&c.name),
        };
        if by_fleet {
            status = HealthStatus::Degraded;
            opened_by = Some("fleet");
        }
    }
    let component = Component {
        status,
        details: Details {
            state: c.state,
            critical: c.critical,
            keys: c.keys,
            open_keys: c.open_keys,
            opened_by,
        },
    };
    (c.name, component)
}

/// Whether family `family` has a counted critical key open or forced open by this instance's
/// own calls or hands. Reads the keys least healthy first, a page at a time, and stops at the
/// first that is neither open nor forced open: the cost is in the open keys, not all keys.
fn critical_key_open_here(family: &str) -> bool {
    let mut offset = 0;
    loop {
        let query = KeyQuery::by(KeyOrder::State)
            .offset(offset)
            .limit(KeyQuery::MAX_LIMIT);
        let Ok(page) = registry().family_keys(family, &query) else {
            // The family went away between the two reads: judge as the registry did.
            return true;
        };
        let n = page.keys.len();
        for k in page.keys {
            if !matches!(k.metrics.state, State::Open | State::ForcedOpen) {
                return false;
            }
            let counts = registry().key_breaker(family, &k.key).is_ok_and(|b| {
                let config = b.config();
                config.health() && config.critical()
            });
            if counts && !history::open_by_fleet(family, Some(&k.key)) {
                return true;
            }
        }
        if n < KeyQuery::MAX_LIMIT {
            return false;
        }
        offset += n;
    }
}
