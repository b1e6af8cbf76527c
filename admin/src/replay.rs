//! The replay of a breaker (feature `replay`): `GET /breakers/{name}/replay`, its dead letters,
//! and the controls that retry or drop them. A replay is found by its breaker's name among the
//! process's live replays ([`breakerbox_replay::find`]).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use breakerbox_replay::{EntryInfo, JournalCounts, JournalStatus, ReplayHandle};
use breakerbox_runtime::__integrations::excerpt;
use serde::Serialize;

use crate::breakers::bad_path;
use crate::control;
use crate::respond::{Problem, json};
use crate::state::AdminState;

/// A replay's journal, as `GET /breakers/{name}/replay` shows it.
#[derive(Serialize)]
pub(crate) struct ReplayView {
    breaker: String,
    /// Queued entries.
    entries: usize,
    bytes: usize,
    /// How long ago the oldest queued entry was journaled, in seconds; `null` when empty.
    oldest_age: Option<f64>,
    dead_letters: usize,
    counts: CountsView,
    /// The journal's store's last failure (the fleet journal's Redis), while it lasts.
    store_error: Option<String>,
}

#[derive(Serialize)]
struct CountsView {
    queued: u64,
    deduplicated: u64,
    replayed: u64,
    failed: u64,
    dead_lettered: u64,
    expired: u64,
    dropped: u64,
    refused: u64,
}

impl From<JournalCounts> for CountsView {
    fn from(c: JournalCounts) -> CountsView {
        CountsView {
            queued: c.queued,
            deduplicated: c.deduplicated,
            replayed: c.replayed,
            failed: c.failed,
            dead_lettered: c.dead_lettered,
            expired: c.expired,
            dropped: c.dropped,
            refused: c.refused,
        }
    }
}

impl ReplayView {
    pub(crate) fn of(handle: &ReplayHandle) -> ReplayView {
        let status: JournalStatus = handle.status();
        ReplayView {
            breaker: handle.name().to_owned(),
            entries: status.entries,
            bytes: status.bytes,
            oldest_age: handle.oldest_age(&status).map(|d| d.as_secs_f64()),
            dead_letters: status.dead_letters,
            counts: status.counts.into(),
            store_error: handle.store_error(),
        }
    }
}

/// One dead letter.
#[derive(Serialize)]
struct DeadView {
    id: u64,
    key: Option<String>,
    attempts: u32,
    bytes: usize,
    /// Seconds since it was journaled.
    age: f64,
}

fn dead_view(handle: &ReplayHandle, e: &EntryInfo) -> DeadView {
    DeadView {
        id: e.id,
        key: e.key.clone(),
        attempts: e.attempts,
        bytes: e.bytes,
        age: handle.age(e).as_secs_f64(),
    }
}

fn name(path: Result<Path<String>, PathRejection>) -> Result<String, Problem> {
    path.map(|Path(name)| name).map_err(bad_path)
}

/// The replay of breaker `name`, or a `404` naming it.
fn find(name: &str) -> Result<ReplayHandle, Problem> {
    breakerbox_replay::find(name).ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            format!(
                "no replay for breaker '{}': a breaker has one once a `Replay` is built over it \
                 (or a `#[circuit_breaker(replay = …)]` function is first called)",
                excerpt(name)
            ),
        )
    })
}

/// `GET /breakers/{name}/replay`.
pub(crate) async fn status(path: Result<Path<String>, PathRejection>) -> Response {
    match name(path).and_then(|n| find(&n)) {
        Ok(handle) => json(&ReplayView::of(&handle)),
        Err(problem) => problem.into_response(),
    }
}

/// `GET /replays`: every live replay, oldest first (the dashboard's replay lines).
pub(crate) async fn list() -> Response {
    let replays: Vec<ReplayView> = breakerbox_replay::replays()
        .iter()
        .map(ReplayView::of)
        .collect();
    json(&serde_json::json!({ "replays": replays }))
}

/// `GET /breakers/{name}/replay/dead-letters`: oldest first.
pub(crate) async fn dead_letters(path: Result<Path<String>, PathRejection>) -> Response {
    match name(path).and_then(|n| find(&n)) {
        Ok(handle) => {
            let dead: Vec<DeadView> = handle
                .dead_letters()
                .iter()
                .map(|e| dead_view(&handle, e))
                .collect();
            json(&serde_json::json!({ "breaker": handle.name(), "dead_letters": dead }))
        }
        Err(problem) => problem.into_response(),
    }
}

/// The body of a dead-letter control: empty, or the empty JSON object.
fn no_body(body: Result<Bytes, BytesRejection>) -> Result<(), Problem> {
    let body =
        body.map_err(|e| Problem::new(e.status(), format!("could not read the body: {e}")))?;
    let text = body.trim_ascii();
    let empty_object = serde_json::from_slice::<serde_json::Value>(text)
        .is_ok_and(|v| v.as_object().is_some_and(|m| m.is_empty()));
    if text.is_empty() || empty_object {
        Ok(())
    } else {
        Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "this control takes no body: send none, or `{}`",
        ))
    }
}

/// `POST /breakers/{name}/replay/dead-letters/retry`: every dead letter back in the queue.
pub(crate) async fn retry(
    State(shared): State<Arc<AdminState>>,
    path: Result<Path<String>, PathRejection>,
    extensions: Extensions,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let control = (&*shared, &extensions, &headers);
    dead_letter_control(
        control,
        path,
        body,
        ("retried", "retry-dead-letters"),
        |h| h.retry_dead_letters(),
    )
}

/// `POST /breakers/{name}/replay/dead-letters/drop`: every dead letter dropped.
pub(crate) async fn drop_all(
    State(shared): State<Arc<AdminState>>,
    path: Result<Path<String>, PathRejection>,
    extensions: Extensions,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let control = (&*shared, &extensions, &headers);
    dead_letter_control(control, path, body, ("dropped", "drop-dead-letters"), |h| {
        h.drop_dead_letters()
    })
}

/// The token first (a caller without it learns nothing else), then the replay, then the body;
/// the action only if all three are right, recorded in the breaker's events as `action`.
/// Answers how many (under `what`), and the replay after it.
fn dead_letter_control(
    (shared, extensions, headers): (&AdminState, &Extensions, &HeaderMap),
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
    (what, action): (&str, &'static str),
    act: impl FnOnce(&ReplayHandle) -> usize,
) -> Response {
    let run = || {
        let (name, caller) = control::checked(shared, extensions, headers, || name(path))?;
        let handle = find(&name)?;
        no_body(body)?;
        caller.records_on(&name, None, action, None);
        Ok::<_, Problem>((act(&handle), handle))
    };
    match run() {
        Ok((n, handle)) => {
            let mut view = serde_json::json!({ "replay": ReplayView::of(&handle) });
            view[what] = n.into();
            json(&view)
        }
        Err(problem) => problem.into_response(),
    }
}
