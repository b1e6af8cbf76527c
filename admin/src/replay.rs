//! The replay of a breaker (feature `replay`): `GET /breakers/{name}/replay`, its dead letters,
//! and the controls that retry or drop them. A replay is found by its breaker's name among the
//! process's live replays ([`breakerbox_replay::find`]).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{Extensions, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use breakerbox_replay::{EntryInfo, JournalCounts, JournalStatus, ReplayHandle, StoreError};
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
    /// Read off the runtime's threads: a journal's store that does not answer costs this
    /// request its timeout, never the server's other tasks. If the store does not answer, the
    /// last status the journal read, with the store's error.
    pub(crate) async fn of(handle: &ReplayHandle) -> ReplayView {
        let status: JournalStatus = match handle.status_async().await {
            Ok(status) => status,
            Err(_) => handle.status(),
        };
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
        Ok(handle) => json(&ReplayView::of(&handle).await),
        Err(problem) => problem.into_response(),
    }
}

/// `GET /replays`: every live replay, oldest first (the dashboard's replay lines).
pub(crate) async fn list() -> Response {
    let mut replays: Vec<ReplayView> = Vec::new();
    for handle in breakerbox_replay::replays() {
        replays.push(ReplayView::of(&handle).await);
    }
    json(&serde_json::json!({ "replays": replays }))
}

/// `GET /breakers/{name}/replay/dead-letters`: oldest first.
pub(crate) async fn dead_letters(path: Result<Path<String>, PathRejection>) -> Response {
    let handle = match name(path).and_then(|n| find(&n)) {
        Ok(handle) => handle,
        Err(problem) => return problem.into_response(),
    };
    match handle.dead_letters_async().await {
        Ok(dead) => {
            let dead: Vec<DeadView> = dead.iter().map(|e| dead_view(&handle, e)).collect();
            json(&serde_json::json!({ "breaker": handle.name(), "dead_letters": dead }))
        }
        Err(e) => unavailable(&e).into_response(),
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
    let handle = match dead_letter_control(control, path, body, "retry-dead-letters") {
        Ok(handle) => handle,
        Err(problem) => return problem.into_response(),
    };
    let done = handle.retry_dead_letters_async().await;
    dead_letters_done(&handle, "retried", done).await
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
    let handle = match dead_letter_control(control, path, body, "drop-dead-letters") {
        Ok(handle) => handle,
        Err(problem) => return problem.into_response(),
    };
    let done = handle.drop_dead_letters_async().await;
    dead_letters_done(&handle, "dropped", done).await
}

/// The token first (a caller without it learns nothing else), then the replay, then the body;
/// the replay to act on only if all three are right, the action recorded in the breaker's
/// events as `action`.
fn dead_letter_control(
    (shared, extensions, headers): (&AdminState, &Extensions, &HeaderMap),
    path: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
    action: &'static str,
) -> Result<ReplayHandle, Problem> {
    let (name, caller) = control::checked(shared, extensions, headers, || name(path))?;
    let handle = find(&name)?;
    no_body(body)?;
    caller.records_on(&name, None, action, None);
    Ok(handle)
}

/// Answers how many (under `what`), and the replay after it; a `503` with the reason if the
/// journal's store could not do it.
async fn dead_letters_done(
    handle: &ReplayHandle,
    what: &str,
    done: Result<usize, StoreError>,
) -> Response {
    match done {
        Ok(n) => {
            let mut view = serde_json::json!({ "replay": ReplayView::of(handle).await });
            view[what] = n.into();
            json(&view)
        }
        Err(e) => unavailable(&e).into_response(),
    }
}

/// The journal's store failed or did not answer in time: a `503` with its reason.
fn unavailable(e: &StoreError) -> Problem {
    Problem::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
}
