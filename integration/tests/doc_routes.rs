//! Every route docs/admin.md and docs/integrations.md document answers as documented: each
//! `METHOD /path` the pages write (in backticks) is requested, with that method, against the
//! admin router mounted as the pages mount it, and must answer `200`.
//!
//! docs/admin.md's paths are relative to where the router is mounted (`/admin` here);
//! docs/integrations.md's are the `admin` example's, which mounts it at `/admin`.

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use breakerbox::admin::Admin;
use breakerbox::fleet::{Fleet, FleetConfig};
use breakerbox::{Config, registry};
use tower::ServiceExt;

const ADMIN: &str = include_str!("../../docs/admin.md");
const INTEGRATIONS: &str = include_str!("../../docs/integrations.md");
const TOKEN: &str = "doc-routes token";

/// A documented route: its method, its path as written, and the page and line it is on.
#[derive(Debug)]
struct Route {
    method: String,
    path: String,
    place: String,
}

/// Every `` `METHOD /path` `` of `page`, and the `` `/sibling` `` spans that follow one on its
/// line (`` `POST /b/{name}/force-open`, `/disable` `` is two routes).
fn routes(page: &str, name: &str) -> Vec<Route> {
    let mut out = Vec::new();
    // A route's span never crosses a line in these pages (the test asserts that the routes it
    // must find are found).
    for (i, line) in page.lines().enumerate() {
        let mut last: Option<(String, String)> = None;
        for (j, span) in line.split('`').enumerate() {
            if j % 2 == 0 {
                // Text between spans: a sibling must follow its route with only ", " between.
                if !(span.trim() == "," || span.trim().is_empty()) {
                    last = None;
                }
                continue;
            }
            let place = format!("{name}:{}", i + 1);
            if let Some((method, path)) = span.split_once(' ')
                && ["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&method)
                && path.starts_with('/')
                && !path.contains(' ')
            {
                out.push(Route {
                    method: method.to_owned(),
                    path: path.to_owned(),
                    place,
                });
                last = Some((method.to_owned(), path.to_owned()));
            } else if let Some((method, path)) = &last
                && span.starts_with('/')
                && !span[1..].contains('/')
                && !span.contains(' ')
            {
                let parent = &path[..path.rfind('/').unwrap()];
                out.push(Route {
                    method: method.clone(),
                    path: format!("{parent}{span}"),
                    place,
                });
            } else {
                last = None;
            }
        }
    }
    out
}

/// The admin router, mounted as docs/admin.md's example mounts it (and the `admin` example,
/// which docs/integrations.md describes), with a breaker, a keyed family with a key,
/// Prometheus text and a fleet's view to serve. The fleet shares nothing (the controls below
/// stay local) and needs no store to answer: it is `scripts/test`'s Redis when there is one.
fn app() -> (Router, Fleet) {
    assert!(
        ADMIN.contains(r#".nest_service("/admin", admin)"#),
        "docs/admin.md mounts the router another way than this test"
    );
    assert!(
        include_str!("../examples/admin.rs")
            .contains(r#"axum::Router::new().nest_service("/admin", admin)"#),
        "the admin example mounts the router another way than this test"
    );
    let breaker = registry().get_or_create("doc-routes", Config::default);
    // Its replay, for the replay routes: kept for the process (the admin serves live ones).
    static REPLAY: std::sync::OnceLock<breakerbox::replay::Replay<u32>> =
        std::sync::OnceLock::new();
    REPLAY.get_or_init(|| {
        breakerbox::replay::Replay::builder(&breaker)
            .memory(|_: u32| async { Ok::<_, String>(()) })
            .unwrap()
    });
    let family = registry()
        .family::<String>("doc-routes-family", Config::default)
        .unwrap();
    // The key must exist; its call may be refused: the other test of this file runs the
    // documented controls, `force-open` and `trip-for` of this key among them, meanwhile.
    let _ = family.call("k1", || Ok::<_, &str>(()));
    let url = std::env::var("BREAKERBOX_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:1/".to_owned());
    let fleet = Fleet::start(
        FleetConfig::new(url)
            .prefix("doc-routes")
            .instance("doc-routes"),
    )
    .unwrap();
    let admin = Admin::new()
        .token(TOKEN)
        .prometheus(|| "breakerbox_state{name=\"doc-routes\"} 0\n".to_owned())
        .fleet(fleet.view())
        .router();
    (Router::new().nest_service("/admin", admin), fleet)
}

/// The request a route documents, with the breaker, family and key above in its placeholders
/// and the token and body a control needs.
fn request(route: &Route, path: &str) -> Request<Body> {
    let path = path
        .replace("{name}", "doc-routes")
        .replace("{family}", "doc-routes-family")
        .replace("{key}", "k1");
    let mut req = Request::builder()
        .method(route.method.as_str())
        .uri(&path)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    let body = if path.ends_with("/trip-for") {
        req = req.header(header::CONTENT_TYPE, "application/json");
        r#"{"duration": "1s"}"#
    } else {
        ""
    };
    req.body(Body::from(body)).unwrap()
}

#[tokio::test]
async fn every_documented_route_answers() {
    let (app, _fleet) = app();
    let mut admin = routes(ADMIN, "docs/admin.md");
    let integrations = routes(INTEGRATIONS, "docs/integrations.md");
    // The pages document these at least; an extraction that finds fewer is broken.
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/breakers"),
        ("POST", "/breakers/{name}/disable"),
        ("GET", "/events"),
        ("GET", "/health"),
        ("GET", "/fleet"),
        ("GET", "/metrics"),
    ] {
        assert!(
            admin.iter().any(|r| r.method == method && r.path == path),
            "docs/admin.md: {method} {path} not found in {admin:?}"
        );
    }
    assert!(
        integrations
            .iter()
            .any(|r| r.method == "GET" && r.path == "/admin/metrics"),
        "{integrations:?}"
    );
    // Relative to the mount, as docs/admin.md says; `GET /` is the dashboard at `/admin`.
    let mut checked = Vec::new();
    for route in admin.drain(..) {
        let path = match route.path.as_str() {
            "/" => "/admin".to_owned(),
            p => format!("/admin{p}"),
        };
        checked.push((route, path));
    }
    for route in integrations {
        let path = route.path.clone();
        checked.push((route, path));
    }
    assert!(checked.len() >= 15, "{checked:?}");
    for (route, path) in &checked {
        let res = app.clone().oneshot(request(route, path)).await.unwrap();
        assert_eq!(
            res.status(),
            StatusCode::OK,
            "{}: {} {path} (documented as `{} {}`)",
            route.place,
            route.method,
            route.method,
            route.path
        );
        // Once reset, a control's next request finds the breaker as the docs' examples do.
        if route.method == "POST" {
            registry().get("doc-routes").unwrap().reset();
            if let Some(key) = registry()
                .family::<String>("doc-routes-family", Config::default)
                .unwrap()
                .get("k1")
            {
                key.reset();
            }
        }
    }
}

/// Mounted as documented, the dashboard answers with and without the trailing slash.
#[tokio::test]
async fn the_admin_prefix_answers_with_a_trailing_slash() {
    let (app, _fleet) = app();
    for path in ["/admin", "/admin/"] {
        let res = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{path}");
        let kind = res.headers()[header::CONTENT_TYPE].to_str().unwrap();
        assert!(kind.starts_with("text/html"), "{path}: {kind}");
    }
}
