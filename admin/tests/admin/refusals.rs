//! Every request the controls refuse: a clear 4xx JSON error, and nothing changes.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use breakerbox_admin::{self as admin, Admin};
use breakerbox_runtime::{Breaker, State, registry};
use serde_json::json;

use crate::support::*;

/// A request that must be refused: what it is, the request, the status and message expected.
struct Refused {
    what: &'static str,
    req: Request<Body>,
    status: StatusCode,
    error: String,
}

/// Sends each request, and checks its status and JSON message, and that the breaker's state
/// and counts are what they were.
async fn refuse_all(app: &Router, breaker: &Breaker, cases: Vec<Refused>) {
    let before = (breaker.metrics(), breaker.export_state());
    for case in cases {
        let (status, headers, body) = send(app, case.req).await;
        assert_eq!(status, case.status, "{}: {body}", case.what);
        assert_eq!(
            headers[header::CONTENT_TYPE],
            "application/json",
            "{}",
            case.what
        );
        assert_eq!(
            body,
            json!({ "error": case.error, "status": case.status.as_u16() }),
            "{}",
            case.what
        );
        if status == StatusCode::UNAUTHORIZED {
            assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer", "{}", case.what);
        }
        assert_eq!(
            (breaker.metrics(), breaker.export_state()),
            before,
            "{} changed the breaker",
            case.what
        );
    }
}

#[tokio::test]
async fn without_a_token_the_router_is_read_only() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-ro");
    let off = "the controls are off: this admin router was built without a token; build it \
               with `Admin::new().token(...)` to turn them on";
    let cases = ["force-open", "disable", "reset", "trip-for"]
        .into_iter()
        .map(|action| Refused {
            what: action,
            req: post(
                &format!("/breakers/adm-ro/{action}"),
                Some(TOKEN),
                r#"{"duration": "1s"}"#,
            ),
            status: StatusCode::FORBIDDEN,
            error: off.to_owned(),
        })
        .collect();
    refuse_all(&admin::router(), &b, cases).await;
    // An empty token is no token.
    let empty = Refused {
        what: "empty token",
        req: post("/breakers/adm-ro/force-open", Some(""), ""),
        status: StatusCode::FORBIDDEN,
        error: off.to_owned(),
    };
    refuse_all(&Admin::new().token("").router(), &b, vec![empty]).await;
}

#[tokio::test]
async fn a_missing_wrong_or_other_length_token_is_refused_and_changes_nothing() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-auth");
    let path = "/breakers/adm-auth/force-open";
    let wrong = |what, token: String| Refused {
        what,
        req: post(path, Some(&token), ""),
        status: StatusCode::UNAUTHORIZED,
        error: "wrong token".to_owned(),
    };
    let mut cases = vec![
        Refused {
            what: "no Authorization header",
            req: post(path, None, ""),
            status: StatusCode::UNAUTHORIZED,
            error: "missing token: send the header `Authorization: Bearer <token>`".to_owned(),
        },
        Refused {
            what: "basic auth",
            req: Request::post(path)
                .header(header::AUTHORIZATION, format!("Basic {TOKEN}"))
                .body(Body::empty())
                .unwrap(),
            status: StatusCode::UNAUTHORIZED,
            error: "the Authorization header is not a bearer token: send \
                    `Authorization: Bearer <token>`"
                .to_owned(),
        },
        wrong("a wrong token of the same length", TOKEN.replace('c', "k")),
        wrong(
            "the token less its last byte",
            TOKEN[..TOKEN.len() - 1].to_owned(),
        ),
        wrong("the token and one byte more", format!("{TOKEN}e")),
        wrong("the token with a space", format!("{TOKEN} ")),
        wrong("the empty token", String::new()),
        wrong("a token of a different case", TOKEN.to_uppercase()),
    ];
    // The wrong token is checked before the breaker's name and the body: the answer tells a
    // caller without the token nothing else.
    cases.push(Refused {
        what: "a wrong token for an unknown breaker",
        req: post("/breakers/nobody/reset", Some("nope"), ""),
        status: StatusCode::UNAUTHORIZED,
        error: "wrong token".to_owned(),
    });
    cases.push(Refused {
        what: "a wrong token with an oversized body",
        req: post(path, Some("nope"), &"x".repeat(5000)),
        status: StatusCode::UNAUTHORIZED,
        error: "wrong token".to_owned(),
    });
    refuse_all(&Admin::new().token(TOKEN).router(), &b, cases).await;
}

#[tokio::test]
async fn oversized_malformed_and_misdirected_requests_get_a_clear_4xx_and_change_nothing() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-body");
    let trip_for = "/breakers/adm-body/trip-for";
    let how = r#"send {"duration": "30s"} with `Content-Type: application/json`"#;
    let bad = |what, req, status, error: &str| Refused {
        what,
        req,
        status,
        error: error.to_owned(),
    };
    let cases = vec![
        bad(
            "a body over 4 KiB",
            post(
                trip_for,
                Some(TOKEN),
                &format!(r#"{{"duration": "{}"}}"#, "1".repeat(5000)),
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body is larger than 4096 bytes",
        ),
        bad(
            "a reset with a body over 4 KiB",
            post("/breakers/adm-body/reset", Some(TOKEN), &" ".repeat(4097)),
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body is larger than 4096 bytes",
        ),
        bad(
            "JSON cut short",
            post(trip_for, Some(TOKEN), r#"{"duration": "#),
            StatusCode::BAD_REQUEST,
            &format!(
                "malformed trip-for body (EOF while parsing a value at line 1 column 13): {how}"
            ),
        ),
        bad(
            "no duration",
            post(trip_for, Some(TOKEN), "{}"),
            StatusCode::BAD_REQUEST,
            &format!(
                "malformed trip-for body (missing field `duration` at line 1 column 2): {how}"
            ),
        ),
        bad(
            "a number of seconds",
            post(trip_for, Some(TOKEN), r#"{"duration": 30}"#),
            StatusCode::BAD_REQUEST,
            &format!(
                "malformed trip-for body (invalid type: integer `30`, expected a string at line \
                 1 column 15): {how}"
            ),
        ),
        bad(
            "an unknown field",
            post(
                trip_for,
                Some(TOKEN),
                r#"{"duration": "1s", "force": true}"#,
            ),
            StatusCode::BAD_REQUEST,
            &format!(
                "malformed trip-for body (unknown field `force`, expected `duration` at line 1 \
                 column 26): {how}"
            ),
        ),
        bad(
            "a duration the attribute would refuse",
            post(trip_for, Some(TOKEN), r#"{"duration": "0s"}"#),
            StatusCode::BAD_REQUEST,
            "trip-for: duration \"0s\" is zero: use a length of time greater than zero, like \"1ms\"",
        ),
        bad(
            "not JSON",
            Request::post(trip_for)
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from("duration=30s"))
                .unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &format!("trip-for reads JSON: {how}"),
        ),
        bad(
            "an array on reset",
            post("/breakers/adm-body/reset", Some(TOKEN), "[]"),
            StatusCode::BAD_REQUEST,
            "reset takes no body: send none, or `{}`",
        ),
        bad(
            "a body on reset",
            post(
                "/breakers/adm-body/reset",
                Some(TOKEN),
                r#"{"duration": "1s"}"#,
            ),
            StatusCode::BAD_REQUEST,
            "reset takes no body: send none, or `{}`",
        ),
        bad(
            "an unknown action",
            post("/breakers/adm-body/explode", Some(TOKEN), ""),
            StatusCode::NOT_FOUND,
            "no action 'explode': the actions are force-open, disable, reset, trip-for",
        ),
        bad(
            "an unknown breaker",
            post("/breakers/no-such-thing-anywhere/reset", Some(TOKEN), ""),
            StatusCode::NOT_FOUND,
            "no circuit breaker named 'no-such-thing-anywhere' (GET /breakers lists them)",
        ),
        bad(
            "GET on a control",
            get("/breakers/adm-body/reset"),
            StatusCode::METHOD_NOT_ALLOWED,
            "GET is not allowed on '/breakers/adm-body/reset': use POST",
        ),
        bad(
            "POST on the list",
            post("/breakers", Some(TOKEN), ""),
            StatusCode::METHOD_NOT_ALLOWED,
            "POST is not allowed on '/breakers': use GET",
        ),
        bad(
            "no such endpoint",
            get("/admin.php"),
            StatusCode::NOT_FOUND,
            "no admin endpoint at '/admin.php'; there are GET /, /breakers, /breakers/{name}, \
             /breakers/{name}/events, /breakers/{family}/keys, /breakers/{family}/keys/{key}, \
             /breakers/{family}/keys/{key}/events, /breakers/{name}/replay, \
             /breakers/{name}/replay/dead-letters, /replays, /events, /health, /metrics and \
             POST /breakers/{name}/{action}, /breakers/{family}/keys/{key}/{action} \
             (actions: force-open, disable, reset, trip-for), \
             /breakers/{name}/replay/dead-letters/retry, /breakers/{name}/replay/dead-letters/drop",
        ),
    ];
    refuse_all(&Admin::new().token(TOKEN).router(), &b, cases).await;
}

#[tokio::test]
async fn a_duration_is_refused_with_the_attributes_message() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-duration");
    // The same text in a config file gets the same sentence: one parser.
    let toml = "[breakers.adm-duration-file]\ndynamic = true\nopen_for = \"10 sec\"\n";
    let file_error = registry()
        .load_toml_str("admin.toml", toml)
        .unwrap_err()
        .to_string();
    let app = Admin::new().token(TOKEN).router();
    let req = post(
        "/breakers/adm-duration/trip-for",
        Some(TOKEN),
        r#"{"duration": "10 sec"}"#,
    );
    let (status, _, body) = send(&app, req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = body["error"].as_str().unwrap();
    let sentence = message.strip_prefix("trip-for: ").unwrap();
    assert!(
        file_error.contains(sentence),
        "{file_error}\nvs\n{sentence}"
    );
    assert_eq!(
        sentence,
        r#"unexpected space in duration "10 sec": write it without spaces, like "10s""#
    );
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test]
async fn the_wrong_method_on_a_view_names_get_as_its_allow_header_does() {
    let _shared = crate::support::shared().await;
    let app = Admin::new().token(TOKEN).router();
    // Views whose path has the length of a control's: a breaker's config and events, a key's
    // config and events.
    for (req, right) in [
        (post("/breakers/adm-405/config", Some(TOKEN), ""), "GET"),
        (post("/breakers/adm-405/events", Some(TOKEN), ""), "GET"),
        (post("/breakers/f/keys/k/config", Some(TOKEN), ""), "GET"),
        (post("/breakers/f/keys/k/events", Some(TOKEN), ""), "GET"),
        (get("/breakers/f/keys/k/reset"), "POST"),
        (get("/breakers/adm-405/reset"), "POST"),
        (get("/breakers/f/replay/dead-letters/drop"), "POST"),
        (
            post("/breakers/f/replay/dead-letters", Some(TOKEN), ""),
            "GET",
        ),
    ] {
        let (method, path) = (req.method().clone(), req.uri().path().to_owned());
        let (status, headers, body) = send(&app, req).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert!(
            headers[header::ALLOW]
                .to_str()
                .unwrap()
                .split(',')
                .any(|m| m == right),
            "{method} {path}: {headers:?}"
        );
        // The path is quoted shortened past 32 characters.
        let error = body["error"].as_str().unwrap();
        assert!(
            error.starts_with(&format!("{method} is not allowed on '/breakers/"))
                && error.ends_with(&format!("': use {right}")),
            "{method} {path}: {error}"
        );
    }
}
