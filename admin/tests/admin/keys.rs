//! A registry family's keys over the admin router: a page of keys sorted by state, failure
//! rate and volume, searched and bounded; one key's view; its controls behind the token; a key
//! of any text through its percent-encoded path segment; a 404 that names an unknown family or
//! key.

use std::time::Duration;

use axum::http::StatusCode;
use breakerbox_admin::Admin;
use breakerbox_runtime::{BreakerMap, Config, ManualClock, State, registry};
use serde_json::Value;

use crate::support::{TOKEN, get, post, send};

/// A registry family on a manual clock: opens a key after 2 failures in a row, for 30 s.
fn family<K>(name: &str) -> BreakerMap<K>
where
    K: std::hash::Hash + Eq + Clone + std::fmt::Display + Send + Sync + 'static,
{
    assert!(registry().set_clock(name, ManualClock::new()));
    registry()
        .family::<K>(name, || {
            Config::builder()
                .failures(2)
                .open_for(Duration::from_secs(30))
                .build()
                .unwrap()
        })
        .unwrap()
}

/// A key with a slash, a space, a percent sign, a question mark and a non-ASCII letter.
const ODD: &str = "d/é %x?#";

/// `ODD` as one path segment.
const ODD_PATH: &str = "d%2F%C3%A9%20%25x%3F%23";

fn hosts(name: &str) -> BreakerMap<String> {
    let hosts = family::<String>(name);
    let fail = || Err::<(), _>("server answered 500");
    let ok = || Ok::<_, &str>(());
    // a: open (2 failures); b: 1 failure in 2 calls; c: 3 successes; ODD: 1 success.
    let _ = hosts.call("a.example", fail);
    let _ = hosts.call("a.example", fail);
    let _ = hosts.call("b.example", fail);
    hosts.call("b.example", ok).unwrap();
    for _ in 0..3 {
        hosts.call("c.example", ok).unwrap();
    }
    hosts.call(ODD, ok).unwrap();
    hosts
}

fn keys(page: &Value) -> Vec<&str> {
    page["keys"]
        .as_array()
        .unwrap_or_else(|| panic!("no keys in {page}"))
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_page_of_keys_sorts_by_state_failure_rate_and_volume() {
    let _shared = crate::support::shared().await;
    let _hosts = hosts("adm-keys.sorted");
    let app = Admin::new().router();
    let base = "/breakers/adm-keys.sorted/keys";
    let page = |query: &str| {
        let app = app.clone();
        let path = format!("{base}{query}");
        async move {
            let (status, _, page) = send(&app, get(&path)).await;
            assert_eq!(status, StatusCode::OK, "{path}: {page}");
            page
        }
    };

    let by_key = page("").await;
    assert_eq!(keys(&by_key), ["a.example", "b.example", "c.example", ODD]);
    assert_eq!(
        (&by_key["total"], &by_key["limit"], &by_key["sort"]),
        (&4.into(), &50.into(), &"key".into())
    );
    let a = &by_key["keys"][0];
    assert_eq!(a["state"], "open");
    assert_eq!(a["open_remaining"], "30s");
    assert_eq!(a["last_failure"], "server answered 500");
    assert_eq!(a["failure_rate"], 100.0);
    assert_eq!(by_key["keys"][1]["failure_rate"], 50.0);

    assert_eq!(
        keys(&page("?sort=state").await),
        ["a.example", "b.example", "c.example", ODD]
    );
    assert_eq!(
        keys(&page("?sort=failure_rate").await),
        ["a.example", "b.example", "c.example", ODD]
    );
    assert_eq!(
        keys(&page("?sort=volume").await),
        ["c.example", "a.example", "b.example", ODD]
    );
    // Paged: the total counts every key, the page holds `limit` from `offset`.
    let second = page("?sort=volume&offset=1&limit=2").await;
    assert_eq!(keys(&second), ["a.example", "b.example"]);
    assert_eq!(
        (&second["total"], &second["offset"]),
        (&4.into(), &1.into())
    );
    // Searched, by a percent-encoded text.
    let found = page("?q=%C3%A9+%25").await;
    assert_eq!((keys(&found), &found["total"]), (vec![ODD], &1.into()));
}

#[tokio::test]
async fn the_state_sort_puts_the_least_healthy_first() {
    let _shared = crate::support::shared().await;
    let hosts = hosts("adm-keys.states");
    hosts.get("c.example").unwrap().force_open();
    hosts.get(ODD).unwrap().disable();
    let app = Admin::new().router();
    let (_, _, page) = send(&app, get("/breakers/adm-keys.states/keys?sort=state")).await;
    assert_eq!(keys(&page), ["c.example", "a.example", ODD, "b.example"]);
}

#[tokio::test]
async fn bad_pages_unknown_families_and_unknown_keys_are_refused_by_name() {
    let _shared = crate::support::shared().await;
    let _hosts = hosts("adm-keys.refused");
    let app = Admin::new().token(TOKEN).router();
    for (path, status, message) in [
        (
            "/breakers/adm-keys.refused/keys?limit=501",
            StatusCode::BAD_REQUEST,
            "limit 501 is above the most a page holds, 500",
        ),
        (
            "/breakers/adm-keys.refused/keys?sort=name",
            StatusCode::BAD_REQUEST,
            "no sort 'name': sort by key, state, failure_rate or volume",
        ),
        (
            "/breakers/adm-keys.refused/keys?page=2",
            StatusCode::BAD_REQUEST,
            "no query parameter 'page': there are sort, offset, limit and q",
        ),
        (
            "/breakers/adm-keys.refusedd/keys",
            StatusCode::NOT_FOUND,
            "no keyed family named 'adm-keys.refusedd'; did you mean 'adm-keys.refused'? \
             (GET /breakers lists them)",
        ),
        (
            "/breakers/adm-keys.refused/keys/z%2Fz.example",
            StatusCode::NOT_FOUND,
            "no key 'z/z.example' in the keyed family 'adm-keys.refused': never called, or \
             evicted (GET /breakers/{family}/keys lists the keys held)",
        ),
    ] {
        let (got, _, body) = send(&app, get(path)).await;
        assert_eq!(
            (got, body["error"].as_str()),
            (status, Some(message)),
            "{path}"
        );
    }
    // The wrong method names the right one (the path shortened past 32 characters).
    for (req, method, right) in [
        (post("/breakers/k/keys", Some(TOKEN), ""), "POST", "GET"),
        (get("/breakers/k/keys/a.example/reset"), "GET", "POST"),
    ] {
        let path = req.uri().path().to_owned();
        let (got, _, body) = send(&app, req).await;
        assert_eq!(got, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(
            body["error"],
            format!("{method} is not allowed on '{path}': use {right}")
        );
    }
    // Without the token, even an unknown key learns nothing but the 401.
    let (status, _, _) = send(
        &app,
        post("/breakers/adm-keys.refused/keys/nope/reset", None, ""),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A control of an unknown key is a 404 too, and of an unknown family; with the token.
    let (status, _, body) = send(
        &app,
        post(
            "/breakers/adm-keys.refused/keys/nope/reset",
            Some(TOKEN),
            "",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body["error"].as_str().unwrap().starts_with("no key 'nope'"));
    let (status, _, body) = send(
        &app,
        post("/breakers/nope/keys/a.example/reset", Some(TOKEN), ""),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("no keyed family named 'nope'")
    );
}

#[tokio::test]
async fn a_keys_controls_act_behind_the_token_and_its_path_round_trips_any_text() {
    let _shared = crate::support::shared().await;
    let hosts = hosts("adm-keys.controls");
    let odd = hosts.get(ODD).unwrap();
    let base = format!("/breakers/adm-keys.controls/keys/{ODD_PATH}");

    // Read-only router and wrong token: refused, nothing changes.
    let (status, _, _) = send(
        &Admin::new().router(),
        post(&format!("{base}/force-open"), Some(TOKEN), ""),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let app = Admin::new().token(TOKEN).router();
    let (status, _, _) = send(&app, post(&format!("{base}/force-open"), Some("wrong"), "")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(&app, post(&format!("{base}/force-open"), None, "")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(odd.state(), State::Closed);

    for (action, body, state) in [
        ("force-open", "", State::ForcedOpen),
        ("disable", "{}", State::Disabled),
        ("reset", "", State::Closed),
        ("trip-for", r#"{"duration": "45s"}"#, State::Open),
    ] {
        let (status, _, view) =
            send(&app, post(&format!("{base}/{action}"), Some(TOKEN), body)).await;
        assert_eq!(status, StatusCode::OK, "{action}: {view}");
        assert_eq!(odd.state(), state, "{action}");
        assert_eq!(
            (&view["kind"], &view["name"], &view["key"], &view["state"]),
            (
                &"key".into(),
                &"adm-keys.controls".into(),
                &ODD.into(),
                &state.as_str().into()
            ),
            "{action}"
        );
    }
    // Another key is untouched; the key's own view reads it back.
    assert_eq!(hosts.get("c.example").unwrap().state(), State::Closed);
    let (status, _, view) = send(&app, get(&base)).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(view["open_remaining"], "45s");
    assert_eq!(view["key"], ODD);
    // An unknown action, a bad body: refused as a breaker's control is.
    let (status, _, _) = send(&app, post(&format!("{base}/open"), Some(TOKEN), "")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = send(&app, post(&format!("{base}/reset"), Some(TOKEN), "[]")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(odd.state(), State::Open);
}

/// A family whose keys are not strings: found by the text they display as.
#[tokio::test]
async fn a_key_of_another_type_is_found_by_its_text() {
    let _shared = crate::support::shared().await;
    let tenants = family::<u64>("adm-keys.tenants");
    for tenant in [7, 42, 420] {
        tenants.call(&tenant, || Ok::<_, &str>(())).unwrap();
    }
    let app = Admin::new().token(TOKEN).router();
    let (status, _, view) = send(
        &app,
        post(
            "/breakers/adm-keys.tenants/keys/42/force-open",
            Some(TOKEN),
            "",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(tenants.get(&42).unwrap().state(), State::ForcedOpen);
    assert_eq!(tenants.get(&420).unwrap().state(), State::Closed);
    // The registry API says the same.
    let page = registry()
        .family_keys(
            "adm-keys.tenants",
            &breakerbox_runtime::KeyQuery::by(breakerbox_runtime::KeyOrder::State).limit(1),
        )
        .unwrap();
    assert_eq!((page.total, page.keys[0].key.as_str()), (3, "42"));
    registry().reset_key("adm-keys.tenants", "42").unwrap();
    assert_eq!(tenants.get(&42).unwrap().state(), State::Closed);
    assert_eq!(
        registry().reset_key("adm-keys.tenants", "43").unwrap_err(),
        breakerbox_runtime::KeyError::NoKey {
            family: "adm-keys.tenants".into(),
            key: "43".into()
        }
    );
}
