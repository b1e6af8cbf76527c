//! The recent events of a breaker, a keyed family or a family's key: `GET
//! /breakers/{name}/events` and `GET /breakers/{family}/keys/{key}/events`, as Resilience4j's
//! `circuitbreakerevents` serves them. Each keeps its last events in a bounded ring (see
//! `history.rs`): state changes with their reason, and the controls used through the router
//! with who used them and from where.

use std::sync::Arc;

use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::breakers::{bad_path, unknown};
use crate::history::{self, BREAKER_EVENTS, Entry, KEY_EVENTS};
use crate::respond::json;
use breakerbox_runtime::registry;

#[derive(Serialize)]
struct Events {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    /// The most the ring keeps.
    kept: usize,
    /// Oldest first.
    events: Vec<Arc<Entry>>,
}

/// `GET /breakers/{name}/events`: a registry breaker's, or a family's (its keys' events
/// together); `404` naming an unknown name.
pub(crate) async fn breaker(name: Result<Path<String>, PathRejection>) -> Response {
    let name = match name {
        Ok(Path(name)) => name,
        Err(e) => return bad_path(e).into_response(),
    };
    let known = registry().get(&name).is_some()
        || breakerbox_runtime::__integrations::family_names().contains(&name);
    if !known {
        return unknown(&name).into_response();
    }
    json(&Events {
        events: history::events(&name, None).unwrap_or_default(),
        name,
        key: None,
        kept: BREAKER_EVENTS,
    })
}

/// `GET /breakers/{family}/keys/{key}/events`: one key's, also once the family has evicted it
/// (while its ring is kept); `404` naming an unknown family or a key with neither.
pub(crate) async fn key(path: Result<Path<(String, String)>, PathRejection>) -> Response {
    let (family, key) = match path {
        Ok(Path(pair)) => pair,
        Err(e) => return bad_path(e).into_response(),
    };
    let events = match history::events(&family, Some(&key)) {
        Some(events) => events,
        None => match crate::family_keys::find(&family, &key) {
            Ok(_) => Vec::new(),
            Err(problem) => return problem.into_response(),
        },
    };
    json(&Events {
        events,
        name: family,
        key: Some(key),
        kept: KEY_EVENTS,
    })
}
