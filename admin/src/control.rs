//! The controls: `POST /breakers/{name}/{force-open|disable|reset|trip-for}`.
//!
//! Each request is checked in this order, and the first failure answers: the token (so that a
//! caller without it learns nothing else), the action, the breaker, the body. Nothing changes
//! unless every check passes.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::ConnectInfo;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{Extensions, HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use core::time::Duration;
use std::net::SocketAddr;
use std::time::SystemTime;

use crate::auth;
use crate::breakers::{BreakerView, bad_path, find};
use crate::history;
use crate::respond::{Problem, json};
use crate::state::AdminState;
use breakerbox_runtime::__integrations::display_duration;
use breakerbox_runtime::{__integrations, Breaker, Reason};

/// The largest request body the router reads, in bytes: a control's, with a `413` over it.
pub(crate) const BODY_LIMIT: usize = 4096;

/// What a control does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    ForceOpen,
    Disable,
    Reset,
    TripFor,
}

const ACTIONS: &str = "force-open, disable, reset, trip-for";

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::ForceOpen => "force-open",
            Action::Disable => "disable",
            Action::Reset => "reset",
            Action::TripFor => "trip-for",
        }
    }

    fn parse(text: &str) -> Option<Action> {
        Some(match text {
            "force-open" => Action::ForceOpen,
            "disable" => Action::Disable,
            "reset" => Action::Reset,
            "trip-for" => Action::TripFor,
            _ => return None,
        })
    }
}

/// `POST /breakers/{name}/{action}`: the breaker's view after the action.
pub(crate) async fn act(
    State(shared): State<Arc<AdminState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    extensions: Extensions,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match run(&shared, path, &extensions, &headers, body) {
        Ok(breaker) => json(&BreakerView::of(&breaker, false)),
        Err(problem) => problem.into_response(),
    }
}

fn run(
    shared: &AdminState,
    path: Result<Path<(String, String)>, PathRejection>,
    extensions: &Extensions,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Breaker, Problem> {
    let ((name, action), caller) = checked(shared, extensions, headers, || {
        path.map(|Path(p)| p).map_err(bad_path)
    })?;
    apply(action, || find(&name), headers, body, caller)
}

/// Who used a control, and from where: the label of the token the request held, the
/// connection's peer address and `X-Forwarded-For` when there are, and this instance's name
/// in the fleet.
pub(crate) struct Caller {
    by: String,
    peer: Option<String>,
    forwarded_for: Option<String>,
    instance: Option<String>,
}

impl Caller {
    /// Records `action` on `breaker` (a registry breaker, or a family's key) in its ring and
    /// in the log (target `breakerbox::admin`, at `INFO`).
    /// Answers the token's label, to tell the changes the action makes with.
    pub(crate) fn records(
        self,
        breaker: &Breaker,
        action: &'static str,
        duration: Option<Duration>,
    ) -> String {
        let key = __integrations::breaker_key(breaker).map(str::to_owned);
        let by = self.by.clone();
        self.records_on(breaker.name(), key, action, duration);
        by
    }

    /// Records `action` on breaker `name` (or its key `key`) in its ring and in the log.
    pub(crate) fn records_on(
        self,
        name: &str,
        key: Option<String>,
        action: &'static str,
        duration: Option<Duration>,
    ) {
        self.log(name, key.as_deref(), action);
        history::act(
            name,
            history::Action {
                wall: SystemTime::now(),
                key,
                action,
                duration: duration.map(display_duration),
                by: self.by,
                peer: self.peer,
                forwarded_for: self.forwarded_for,
                instance: self.instance,
            },
        );
    }

    fn log(&self, name: &str, key: Option<&str>, action: &str) {
        let what = match key {
            Some(key) => format!(
                "key '{}' of circuit breaker '{}'",
                __integrations::excerpt(key),
                __integrations::excerpt(name)
            ),
            None => format!("circuit breaker '{}'", __integrations::excerpt(name)),
        };
        let from = self.peer.as_deref().unwrap_or("an unknown address");
        let on = self
            .instance
            .as_deref()
            .map(|i| format!(" on instance '{i}'"))
            .unwrap_or_default();
        tracing::info!(
            target: "breakerbox::admin",
            name,
            key,
            action,
            by = %self.by,
            peer = self.peer.as_deref(),
            forwarded_for = self.forwarded_for.as_deref(),
            instance = self.instance.as_deref(),
            "{action} of {what} by '{}' from {from}{on}",
            self.by
        );
    }
}

/// The token checked first (so that a caller without it learns nothing else), then `path`
/// read: the start of every control, a breaker's, a key's or a replay's. Answers what `path`
/// read, and who is calling.
pub(crate) fn checked<T>(
    shared: &AdminState,
    extensions: &Extensions,
    headers: &HeaderMap,
    path: impl FnOnce() -> Result<T, Problem>,
) -> Result<(T, Caller), Problem> {
    let by = auth::authorize(&shared.tokens, headers)?.to_owned();
    let read = path()?;
    let caller = Caller {
        by,
        peer: extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.to_string()),
        forwarded_for: forwarded_for(headers),
        instance: shared.instance(),
    };
    Ok((read, caller))
}

/// The most of a request's `X-Forwarded-For` a control's record keeps, in bytes.
const FORWARDED_KEPT: usize = 512;

/// The request's `X-Forwarded-For`, every line of it joined with `, ` as RFC 9110 combines
/// them; `None` without one. Each proxy appends the address it saw, so the end of the chain is
/// what the proxies in front of this server wrote and the start what the client did: a longer
/// chain keeps its last [`FORWARDED_KEPT`] bytes, behind `…`, never its start alone.
fn forwarded_for(headers: &HeaderMap) -> Option<String> {
    let lines: Vec<_> = headers
        .get_all("x-forwarded-for")
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
        .filter(|v| !v.is_empty())
        .collect();
    if lines.is_empty() {
        return None;
    }
    let chain = lines.join(", ");
    if chain.len() <= FORWARDED_KEPT {
        return Some(chain);
    }
    let mut start = chain.len() - FORWARDED_KEPT;
    while !chain.is_char_boundary(start) {
        start += 1;
    }
    Some(format!("…{}", &chain[start..]))
}

/// The rest of a control, once [`checked`]: the action, then the breaker `find` gives, then
/// the body; the action is taken only if all three are right.
pub(crate) fn apply(
    action: String,
    find: impl FnOnce() -> Result<Breaker, Problem>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    caller: Caller,
) -> Result<Breaker, Problem> {
    let action = Action::parse(&action).ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_FOUND,
            format!(
                "no action '{}': the actions are {ACTIONS}",
                __integrations::excerpt(&action)
            ),
        )
    })?;
    let breaker = find()?;
    let body = body.map_err(|e| {
        let status = e.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            Problem::new(
                status,
                format!("the body is larger than {BODY_LIMIT} bytes"),
            )
        } else {
            Problem::new(status, format!("could not read the body: {e}"))
        }
    })?;
    match action {
        Action::TripFor => {
            let duration = trip_for_duration(headers, &body)?;
            // Recorded before it is done: the ring shows the action, then the change it made.
            let by = caller.records(&breaker, action.as_str(), Some(duration));
            let on = (breaker.name(), __integrations::breaker_key(&breaker));
            history::acting(on, Reason::TripFor(duration), &by, || {
                breaker.trip_for(duration);
            });
        }
        other => {
            no_body(other, &body)?;
            let by = caller.records(&breaker, other.as_str(), None);
            let on = (breaker.name(), __integrations::breaker_key(&breaker));
            let (reason, act): (Reason, fn(&Breaker)) = match other {
                Action::ForceOpen => (Reason::ForcedOpen, Breaker::force_open),
                Action::Disable => (Reason::Disabled, Breaker::disable),
                _ => (Reason::Reset, Breaker::reset),
            };
            history::acting(on, reason, &by, || act(&breaker));
        }
    }
    Ok(breaker)
}

/// The body of force-open, disable and reset: empty, or the empty JSON object.
fn no_body(action: Action, body: &[u8]) -> Result<(), Problem> {
    let text = body.trim_ascii();
    let empty_object = || {
        serde_json::from_slice::<serde_json::Value>(text)
            .is_ok_and(|v| v.as_object().is_some_and(|m| m.is_empty()))
    };
    if text.is_empty() || empty_object() {
        return Ok(());
    }
    let name = match action {
        Action::ForceOpen => "force-open",
        Action::Disable => "disable",
        _ => "reset",
    };
    Err(Problem::new(
        StatusCode::BAD_REQUEST,
        format!("{name} takes no body: send none, or `{{}}`"),
    ))
}

/// `{"duration": "30s"}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TripFor {
    duration: String,
}

const TRIP_FOR_BODY: &str = r#"send {"duration": "30s"} with `Content-Type: application/json`"#;

/// The duration of a trip-for body, read by the attribute's duration parser (so the same
/// text is accepted, with the same messages).
fn trip_for_duration(headers: &HeaderMap, body: &[u8]) -> Result<Duration, Problem> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("trip-for reads JSON: {TRIP_FOR_BODY}"),
        ));
    }
    let TripFor { duration } = serde_json::from_slice(body).map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            format!("malformed trip-for body ({e}): {TRIP_FOR_BODY}"),
        )
    })?;
    __integrations::parse_duration(&duration)
        .map_err(|e| Problem::new(StatusCode::BAD_REQUEST, format!("trip-for: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_read_as_written_in_the_path() {
        assert_eq!(Action::parse("force-open"), Some(Action::ForceOpen));
        assert_eq!(Action::parse("trip-for"), Some(Action::TripFor));
        assert_eq!(Action::parse("force_open"), None);
        assert_eq!(Action::parse("Reset"), None);
    }

    #[test]
    fn only_an_empty_body_or_object_goes_with_a_plain_control() {
        assert!(no_body(Action::Reset, b"").is_ok());
        assert!(no_body(Action::Reset, b" {} \n").is_ok());
        for bad in [&b"{\"x\": 1}"[..], b"[]", b"reset", b"{"] {
            let e = no_body(Action::Reset, bad).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert_eq!(e.message, "reset takes no body: send none, or `{}`");
        }
    }
}
