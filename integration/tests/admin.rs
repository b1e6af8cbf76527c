//! The admin router (`breakerbox::admin`), driven with `tower::ServiceExt::oneshot`: no network.
//! Breakers run on a `ManualClock`, the event stream on tokio's paused clock.
//!
//! Every test uses breakers of its own names: the registry is the process's.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use breakerbox::admin::{self, Admin};
use breakerbox::{Breaker, Config, ManualClock, State, registry};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const TOKEN: &str = "correct horse battery staple";

/// A registry breaker `name` on a manual clock: opens after 2 failures, for 30 s.
fn breaker(name: &str) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    assert!(
        registry().set_clock(name, clock.clone()),
        "{name} exists already"
    );
    let config = Config::builder()
        .failures(2)
        .open_for(Duration::from_secs(30))
        .build()
        .unwrap();
    (registry().get_or_create(name, || config), clock)
}

fn trip(breaker: &Breaker) {
    for _ in 0..2 {
        let _ = breaker.call(|| Err::<(), _>("server answered 500"));
    }
    assert_eq!(breaker.state(), State::Open);
}

fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).unwrap()
}

fn post(path: &str, token: Option<&str>, body: &str) -> Request<Body> {
    let mut req = Request::post(path).header(header::CONTENT_TYPE, "application/json");
    if let Some(token) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    req.body(Body::from(body.to_owned())).unwrap()
}

/// Sends `req`; the status, the headers and the body as JSON (`Value::String` if not JSON).
async fn send(app: &Router, req: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let res = app.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, headers, body)
}

fn find<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {list}"))
}

#[tokio::test]
async fn the_list_shows_state_config_metrics_last_failure_and_time_left_open() {
    let (users, clock) = breaker("adm-list");
    trip(&users);
    clock.advance(Duration::from_millis(1500));
    let (status, headers, body) = send(&admin::router(), get("/breakers")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(body["control"], false);
    let b = find(&body["breakers"], "adm-list");
    assert_eq!(b["kind"], "breaker");
    assert_eq!(b["state"], "open");
    assert_eq!(b["open_remaining"], "28.5s");
    assert_eq!(b["last_failure"], "server answered 500");
    assert_eq!(b["config"]["failures"], 2);
    assert_eq!(b["config"]["open_for"], "30s");
    assert_eq!(b["metrics"]["failures"], 2);
    assert_eq!(b["metrics"]["calls"], 2);
    assert_eq!(b["metrics"]["time_in_state"], "1.5s");
}

#[tokio::test]
async fn the_detail_shows_one_breaker_and_an_unknown_name_is_a_404_with_a_suggestion() {
    let (b, _clock) = breaker("adm-detail");
    b.force_open();
    let app = Admin::new().token(TOKEN).router();
    let (status, _, body) = send(&app, get("/breakers/adm-detail")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["name"], "adm-detail");
    assert_eq!(body["state"], "forced-open");
    assert_eq!(body["open_remaining"], Value::Null);
    assert_eq!(body["config"]["failures"], 2);

    let (status, _, body) = send(&app, get("/breakers/adm-detial")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        json!({
            "error": "no circuit breaker named 'adm-detial'; did you mean 'adm-detail'? \
                      (GET /breakers lists them)",
            "status": 404
        })
    );
    // Looking an unknown name up creates nothing.
    assert!(!registry().names().contains(&"adm-detial".to_owned()));
}

#[tokio::test]
async fn a_keyed_family_is_listed_with_its_open_keys() {
    let tenants = registry()
        .family::<u32>("adm-tenants", || {
            Config::builder().failures(1).build().unwrap()
        })
        .unwrap();
    for key in [1, 2, 3] {
        let _ = tenants.call(&key, || if key == 1 { Ok(()) } else { Err("down") });
    }
    let (status, _, body) = send(&admin::router(), get("/breakers")).await;
    assert_eq!(status, StatusCode::OK);
    let f = find(&body["families"], "adm-tenants");
    assert_eq!(f["kind"], "family");
    assert_eq!(f["keys"], 3);
    assert_eq!(f["open_keys"], 2);
    let open: Vec<&Value> = f["open"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| &k["key"])
        .collect();
    assert_eq!(open, [&json!("2"), &json!("3")]);

    let (status, _, one) = send(&admin::router(), get("/breakers/adm-tenants")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(one["open_keys"], 2);
}

#[tokio::test]
async fn with_the_token_each_control_acts_and_answers_the_new_view() {
    let (b, _clock) = breaker("adm-act");
    let app = Admin::new().token(TOKEN).router();
    let base = "/breakers/adm-act";
    for (action, body, state) in [
        ("force-open", "", State::ForcedOpen),
        ("disable", "{}", State::Disabled),
        ("reset", "", State::Closed),
        ("trip-for", r#"{"duration": "45s"}"#, State::Open),
    ] {
        let (status, _, view) =
            send(&app, post(&format!("{base}/{action}"), Some(TOKEN), body)).await;
        assert_eq!(status, StatusCode::OK, "{action}: {view}");
        assert_eq!(b.state(), state, "{action}");
        assert_eq!(view["state"], state.as_str(), "{action}");
    }
    assert_eq!(b.metrics().retry_after, Some(Duration::from_secs(45)));
    let (_, _, view) = send(&app, get(base)).await;
    assert_eq!(view["open_remaining"], "45s");
}

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
             /events, /metrics and POST /breakers/{name}/{force-open|disable|reset|trip-for}",
        ),
    ];
    refuse_all(&Admin::new().token(TOKEN).router(), &b, cases).await;
}

#[tokio::test]
async fn a_duration_is_refused_with_the_attributes_message() {
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
async fn the_dashboard_is_one_page_that_loads_nothing_from_elsewhere() {
    let (status, headers, body) = send(&admin::router(), get("/")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none';"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
    let page = body.as_str().unwrap();
    assert!(page.contains("new EventSource(base + \"events\")"));
    for outside in ["src=", "href=", "@import", "url(", "//cdn", "https://"] {
        assert!(!page.contains(outside), "the page holds {outside}");
    }
}

#[tokio::test]
async fn no_cors_header_is_sent_even_when_asked() {
    let req = Request::get("/breakers")
        .header(header::ORIGIN, "https://evil.example")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = send(&admin::router(), req).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
    let preflight = Request::options("/breakers/x/reset")
        .header(header::ORIGIN, "https://evil.example")
        .header(header::ACCESS_CONTROL_REQUEST_METHOD, "POST")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = send(&Admin::new().token(TOKEN).router(), preflight).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN));
}

/// The next server-sent event: its name and its data as JSON.
async fn next_event(
    body: &mut (impl futures_util::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin),
) -> (String, Value) {
    let frame = body.next().await.expect("the stream goes on").unwrap();
    let text = std::str::from_utf8(&frame).unwrap();
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("event: "))
        .unwrap_or_else(|| panic!("no event name in {text:?}"));
    let data = text
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("no data in {text:?}"));
    (name.to_owned(), serde_json::from_str(data).unwrap())
}

#[tokio::test(start_paused = true)]
async fn the_event_stream_tells_changes_and_metrics_every_second() {
    let (b, _clock) = breaker("adm-sse");
    let res = admin::router().oneshot(get("/events")).await.unwrap();
    assert_eq!(res.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = res.into_body().into_data_stream();

    // At once: every breaker's metrics, without rates (no second has passed).
    let (name, first) = next_event(&mut body).await;
    assert_eq!(name, "metrics");
    let mine = find(&first["breakers"], "adm-sse");
    assert_eq!(mine["state"], "closed");
    assert_eq!(mine["per_second"], Value::Null);
    assert_eq!(first["dropped"], 0);

    // A change is told before the next tick; other tests' breakers may change meanwhile.
    trip(&b);
    let change = loop {
        let (name, data) = next_event(&mut body).await;
        if name == "state" && data["name"] == "adm-sse" {
            break data;
        }
    };
    assert_eq!(change["from"], "closed");
    assert_eq!(change["to"], "open");
    assert_eq!(change["reason"], json!({ "failures": 2 }));
    assert_eq!(change["why"], "2 consecutive failures");

    // The next tick, a second after the first on tokio's clock: 2 calls (the failures) and
    // 3 rejections in that second.
    for _ in 0..3 {
        assert!(b.call(|| Ok::<_, &str>(())).is_err());
    }
    let tick = loop {
        let (name, data) = next_event(&mut body).await;
        if name == "metrics" {
            break data;
        }
    };
    let mine = find(&tick["breakers"], "adm-sse");
    assert_eq!(mine["state"], "open");
    assert_eq!(mine["open_remaining"], "30s");
    assert_eq!(mine["last_failure"], "server answered 500");
    assert_eq!(
        mine["per_second"],
        json!({ "calls": 5.0, "failures": 2.0, "slow": 0.0, "rejected": 3.0 })
    );
}

#[tokio::test]
async fn prometheus_text_comes_from_the_recorder_the_application_installed() {
    let (b, _clock) = breaker("adm-prom");
    b.force_open();
    let (status, _, body) = send(&admin::router(), get("/metrics")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body["error"],
        "no Prometheus text here: it needs the `metrics` feature and \
         `Admin::new().prometheus(move || handle.render())` with your recorder's handle"
    );

    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .unwrap();
    let app = Admin::new().prometheus(move || handle.render()).router();
    let (status, headers, body) = send(&app, get("/metrics")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = body.as_str().unwrap();
    assert!(
        text.contains(r#"breakerbox_state{name="adm-prom"} 3"#),
        "{text}"
    );
}
