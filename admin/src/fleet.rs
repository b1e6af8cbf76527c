//! `GET /fleet`: the fleet view (feature `fleet`, with [`Admin::fleet`](crate::Admin::fleet)):
//! each shared breaker with the live instances sharing it and each one's local state, as the
//! fleet's task last read them through the store. The request reads what the task keeps: no
//! network I/O here.

use std::sync::Arc;

use axum::extract::State as Extract;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::respond::{Problem, json};
use crate::state::AdminState;
use breakerbox_fleet::{FleetBreaker, FleetTrip, Quorum};
use breakerbox_runtime::State;

#[derive(Serialize)]
struct Body {
    /// This process's name in the fleet.
    instance: String,
    breakers: Vec<Breaker>,
}

#[derive(Serialize)]
struct Breaker {
    name: String,
    /// `any` or `quorum`.
    trip: &'static str,
    /// Under a quorum: `2` or `50%`.
    #[serde(skip_serializing_if = "Option::is_none")]
    quorum: Option<String>,
    /// How many instances reported (Turbine's "hosts").
    hosts: usize,
    instances: Vec<Instance>,
    /// This instance's last report of a trip under a quorum, as the store tallied it.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_tally: Option<Tally>,
}

#[derive(Serialize)]
struct Instance {
    instance: String,
    /// Its local state of the breaker when it last beat.
    state: Option<State>,
    /// How long its heartbeat had to live when read.
    expires_in_ms: u64,
    /// Whether it is this process.
    this: bool,
}

#[derive(Serialize)]
struct Tally {
    open: u32,
    needed: u32,
    live: u32,
}

fn breaker(b: FleetBreaker) -> Breaker {
    let (trip, quorum) = match b.trip {
        FleetTrip::Quorum(Quorum::Instances(n)) => ("quorum", Some(n.to_string())),
        FleetTrip::Quorum(Quorum::Percent(p)) => ("quorum", Some(format!("{p}%"))),
        FleetTrip::Quorum(_) => ("quorum", None),
        _ => ("any", None),
    };
    Breaker {
        name: b.name,
        trip,
        quorum,
        hosts: b.instances.len(),
        instances: b
            .instances
            .into_iter()
            .map(|i| Instance {
                instance: i.instance,
                state: i.state,
                expires_in_ms: u64::try_from(i.expires_in.as_millis()).unwrap_or(u64::MAX),
                this: i.this,
            })
            .collect(),
        last_tally: b
            .last_tally
            .map(|(open, needed, live)| Tally { open, needed, live }),
    }
}

/// `GET /fleet`.
pub(crate) async fn fleet(Extract(shared): Extract<Arc<AdminState>>) -> Response {
    let Some(view) = &shared.fleet else {
        return Problem::new(
            StatusCode::NOT_FOUND,
            "no fleet here: give the router your fleet's view, `Admin::new().fleet(fleet.view())`",
        )
        .into_response();
    };
    json(&Body {
        instance: view.instance().to_owned(),
        breakers: view.instances().into_iter().map(breaker).collect(),
    })
}
