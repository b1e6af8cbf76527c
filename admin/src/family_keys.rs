//! A registry family's keys: `GET /breakers/{family}/keys` (a page, sorted and searched),
//! `GET /breakers/{family}/keys/{key}` (one key's view) and
//! `POST /breakers/{family}/keys/{key}/{action}` (its controls, behind the token).
//!
//! A key is one path segment, percent-encoded by the client (`/` as `%2F`, `%` as `%25`): axum
//! decodes it, so a key of any text round-trips. An unknown family or key is a `404` that names
//! it.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::breakers::{BreakerView, bad_path};
use crate::control;
use crate::respond::{Problem, json};
use crate::state::AdminState;
use breakerbox_runtime::__integrations::{self, excerpt};
use breakerbox_runtime::{
    Breaker, KeyError, KeyMetrics, KeyOrder, KeyPage, KeyQuery, Metrics, State as BreakerState,
    registry,
};

/// Keys a page holds unless `limit` says otherwise.
const DEFAULT_LIMIT: usize = 50;

/// One key in a page: its metrics, the time left open and its last failure.
#[derive(Serialize)]
struct KeyRow {
    key: String,
    state: BreakerState,
    /// While open: the time left before it probes, as duration text.
    open_remaining: Option<String>,
    /// [`KeyMetrics::failure_rate`], in percent.
    failure_rate: Option<f64>,
    last_failure: Option<String>,
    metrics: Metrics,
}

impl From<KeyMetrics> for KeyRow {
    fn from(k: KeyMetrics) -> KeyRow {
        KeyRow {
            failure_rate: k.failure_rate(),
            state: k.metrics.state,
            open_remaining: crate::breakers::open_remaining(&k.metrics),
            key: k.key,
            last_failure: k.last_failure,
            metrics: k.metrics,
        }
    }
}

#[derive(Serialize)]
struct Page {
    family: String,
    total: usize,
    offset: usize,
    limit: usize,
    sort: KeyOrder,
    keys: Vec<KeyRow>,
}

impl From<KeyPage> for Page {
    fn from(p: KeyPage) -> Page {
        Page {
            family: p.family,
            total: p.total,
            offset: p.offset,
            limit: p.limit,
            sort: p.order,
            keys: p.keys.into_iter().map(KeyRow::from).collect(),
        }
    }
}

/// `GET /breakers/{family}/keys?sort=&offset=&limit=&q=`.
pub(crate) async fn list(family: Result<Path<String>, PathRejection>, uri: Uri) -> Response {
    let answer = (|| {
        let Path(family) = family.map_err(bad_path)?;
        let query = query(uri.query().unwrap_or_default())?;
        registry()
            .family_keys(&family, &query)
            .map(Page::from)
            .map_err(not_found)
    })();
    match answer {
        Ok(page) => json(&page),
        Err(problem) => problem.into_response(),
    }
}

/// `GET /breakers/{family}/keys/{key}`: the key's view, as a breaker's with `"kind": "key"`.
pub(crate) async fn detail(path: Result<Path<(String, String)>, PathRejection>) -> Response {
    let found = path
        .map_err(bad_path)
        .and_then(|Path((family, key))| find(&family, &key));
    match found {
        Ok(breaker) => json(&BreakerView::of(&breaker, false)),
        Err(problem) => problem.into_response(),
    }
}

/// `POST /breakers/{family}/keys/{key}/{action}`: the key's view after the action, checked as
/// a breaker's control is (the token first).
pub(crate) async fn act(
    State(shared): State<Arc<AdminState>>,
    path: Result<Path<(String, String, String)>, PathRejection>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let done = control::checked(&shared, &extensions, &headers, || {
        let Path((family, key, action)) = path.map_err(bad_path)?;
        Ok((action, move || find(&family, &key)))
    })
    .and_then(|((action, find), caller)| control::apply(action, find, &headers, body, caller));
    match done {
        Ok(breaker) => json(&BreakerView::of(&breaker, false)),
        Err(problem) => problem.into_response(),
    }
}

/// The breaker of `family`'s key `key`, or a `404` that names what is missing.
pub(crate) fn find(family: &str, key: &str) -> Result<Breaker, Problem> {
    registry().key_breaker(family, key).map_err(not_found)
}

fn not_found(e: KeyError) -> Problem {
    let message = match e {
        KeyError::NoFamily { family } => {
            let hint = match __integrations::closest(
                &family,
                __integrations::family_names().iter().map(String::as_str),
            ) {
                Some(near) => format!("; did you mean '{near}'?"),
                None => String::new(),
            };
            format!(
                "no keyed family named '{}'{hint} (GET /breakers lists them)",
                excerpt(&family)
            )
        }
        KeyError::NoKey { family, key } => format!(
            "no key '{}' in the keyed family '{}': never called, or evicted \
             (GET /breakers/{{family}}/keys lists the keys held)",
            excerpt(&key),
            excerpt(&family)
        ),
        // `KeyError` is non-exhaustive: a refusal added later says what its Display says.
        other => other.to_string(),
    };
    Problem::new(StatusCode::NOT_FOUND, message)
}

/// The query string of a page: `sort` (`key`, `state`, `failure_rate`, `volume`), `offset`,
/// `limit` (at most [`KeyQuery::MAX_LIMIT`]) and `q` (a text the keys contain).
fn query(text: &str) -> Result<KeyQuery, Problem> {
    let bad = |m: String| Problem::new(StatusCode::BAD_REQUEST, m);
    let mut q = KeyQuery::by(KeyOrder::Key).limit(DEFAULT_LIMIT);
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode(value).ok_or_else(|| {
            bad(format!(
                "the query's {} is not percent-encoded UTF-8",
                excerpt(name)
            ))
        })?;
        let number = |what: &str| {
            value.parse::<usize>().map_err(|_| {
                bad(format!(
                    "{what} is a whole number, not '{}'",
                    excerpt(&value)
                ))
            })
        };
        match name {
            "sort" => {
                q.order = match value.as_str() {
                    "key" => KeyOrder::Key,
                    "state" => KeyOrder::State,
                    "failure_rate" => KeyOrder::FailureRate,
                    "volume" => KeyOrder::Volume,
                    _ => {
                        return Err(bad(format!(
                            "no sort '{}': sort by key, state, failure_rate or volume",
                            excerpt(&value)
                        )));
                    }
                }
            }
            "offset" => q.offset = number("offset")?,
            "limit" => {
                q.limit = number("limit")?;
                if q.limit > KeyQuery::MAX_LIMIT {
                    return Err(bad(format!(
                        "limit {} is above the most a page holds, {}",
                        q.limit,
                        KeyQuery::MAX_LIMIT
                    )));
                }
            }
            "q" => q.search = Some(value).filter(|s| !s.is_empty()),
            _ => {
                return Err(bad(format!(
                    "no query parameter '{}': there are sort, offset, limit and q",
                    excerpt(name)
                )));
            }
        }
    }
    Ok(q)
}

/// A query value's text: `+` is a space, `%XX` a byte; `None` if that is not UTF-8 or a `%` is
/// not followed by two hex digits.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = core::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(decode("a%2Fb+c%25").as_deref(), Some("a/b c%"));
        assert_eq!(decode("%C3%A9").as_deref(), Some("é"));
        assert_eq!(decode("%zz"), None);
        assert_eq!(decode("%4"), None);
        assert_eq!(decode("%FF"), None);
    }

    #[test]
    fn a_query_reads_its_parameters_and_refuses_the_rest() {
        let q = query("sort=failure_rate&offset=10&limit=500&q=host%2D1")
            .unwrap_or_else(|p| panic!("{}", p.message));
        assert_eq!(
            q,
            KeyQuery::by(KeyOrder::FailureRate)
                .offset(10)
                .limit(500)
                .search("host-1")
        );
        assert_eq!(query("").ok().map(|q| q.limit), Some(DEFAULT_LIMIT));
        for bad in ["limit=501", "sort=name", "offset=-1", "page=2", "q=%zz"] {
            assert_eq!(
                query(bad).unwrap_err().status,
                StatusCode::BAD_REQUEST,
                "{bad}"
            );
        }
    }
}
