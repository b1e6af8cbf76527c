//! `GET /breakers/{name}/config` and `GET /breakers/{family}/keys/{key}/config`: each key's
//! effective value and the layer it came from, and a `404` naming what is unknown.

use axum::http::StatusCode;
use breakerbox_admin as admin;
use breakerbox_runtime::{Config, registry};
use serde_json::Value;

use crate::support::*;

fn key<'a>(body: &'a Value, key: &str) -> &'a Value {
    body["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key"] == key)
        .unwrap_or_else(|| panic!("{key} not in {body}"))
}

#[tokio::test]
async fn a_breakers_config_says_where_each_value_came_from() {
    let _shared = shared().await;
    let config = Config::builder().failures(4).build().unwrap();
    let _ = registry().get_or_create("adm-config", || config);
    registry()
        .load_toml_str("adm.toml", "[breakers.adm-config]\nopen_for = \"5s\"\n")
        .unwrap();
    let (status, _, body) = send(&admin::router(), get("/breakers/adm-config/config")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["name"], "adm-config");
    let open_for = key(&body, "open_for");
    assert_eq!(open_for["value"], "5s");
    assert_eq!(open_for["source"]["layer"], "table");
    assert_eq!(open_for["source"]["table"], "adm-config");
    assert_eq!(open_for["source"]["file"], "adm.toml");
    assert_eq!(open_for["source"]["line"], 2);
    assert_eq!(
        open_for["source"]["text"],
        "[breakers.adm-config] at adm.toml:2"
    );
    let failures = key(&body, "failures");
    assert_eq!(failures["value"], "4");
    assert_eq!(failures["source"]["layer"], "code", "{failures}");
    assert!(
        failures["source"]["file"]
            .as_str()
            .unwrap()
            .ends_with("config_sources.rs"),
        "{failures}"
    );
    assert_eq!(key(&body, "half_open_calls")["source"]["layer"], "default");
    assert_eq!(
        body["keys"].as_array().unwrap().len(),
        breakerbox_runtime::keys::KEYS.len(),
        "every key"
    );
}

#[tokio::test]
async fn an_unknown_breaker_is_a_404_that_names_it() {
    let _shared = shared().await;
    let _ = registry().get_or_create("adm-config-near", Config::default);
    let (status, _, body) = send(&admin::router(), get("/breakers/adm-config-naer/config")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let error = body["error"].as_str().unwrap();
    assert!(
        error.starts_with(
            "no circuit breaker named 'adm-config-naer'; did you mean 'adm-config-near'?"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_keys_config_is_its_own_tables_or_its_familys() {
    let _shared = shared().await;
    let family = registry()
        .family::<String>("adm-config-family", Config::default)
        .unwrap();
    registry()
        .load_toml_str(
            "adm.toml",
            "[breakers.adm-config-family]\nfailures = 7\n\n\
             [breakers.adm-config-family.keys.\"h/1\"]\nopen_for = \"9s\"\n",
        )
        .unwrap();
    family.call("h/1", || Ok::<_, &str>(())).unwrap();
    family.call("h2", || Ok::<_, &str>(())).unwrap();
    let app = admin::router();

    let (status, _, body) = send(&app, get("/breakers/adm-config-family/keys/h%2F1/config")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["key"], "h/1");
    let open_for = key(&body, "open_for");
    assert_eq!(open_for["value"], "9s");
    assert_eq!(
        open_for["source"]["table"],
        "adm-config-family.keys.\"h/1\""
    );
    assert_eq!(open_for["source"]["line"], 5);
    assert_eq!(key(&body, "failures")["value"], "7");
    assert_eq!(key(&body, "failures")["source"]["line"], 2);

    let (status, _, body) = send(&app, get("/breakers/adm-config-family/keys/h2/config")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(key(&body, "failures")["value"], "7", "the family's account");
    assert_eq!(key(&body, "open_for")["source"]["layer"], "default");

    let (status, _, body) = send(&app, get("/breakers/adm-config-family/keys/h3/config")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("no key 'h3' in the keyed family 'adm-config-family'"),
        "{body}"
    );
    let (status, _, body) = send(&app, get("/breakers/adm-config-famly/keys/h2/config")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("did you mean 'adm-config-family'?"),
        "{body}"
    );
}

/// A keyed family made in code and a `configure`d name: the code's keys come from the call's
/// site, under the file's table.
#[tokio::test]
async fn a_family_and_a_configured_config_name_their_call_sites() {
    let _shared = shared().await;
    let rate = || Config::builder().failure_rate(50).build().unwrap();
    let family_line = line!() + 1;
    let _family = registry().family::<String>("adm-family", rate).unwrap();
    let configure_line = line!() + 1;
    assert!(registry().configure("adm-configured", rate()));
    registry()
        .load_toml_str(
            "adm-code.toml",
            "[breakers.adm-family]\nopen_for = \"5s\"\n\n[breakers.adm-configured]\nopen_for = \"5s\"\n",
        )
        .unwrap();
    for (name, what, line) in [
        ("adm-family", "Registry::family", family_line),
        ("adm-configured", "Registry::configure", configure_line),
    ] {
        let (status, _, body) =
            send(&admin::router(), get(&format!("/breakers/{name}/config"))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let rate = key(&body, "failure_rate");
        assert_eq!(rate["value"], "50", "{body}");
        assert_eq!(rate["source"]["layer"], "code", "{rate}");
        assert_eq!(rate["source"]["line"], line, "{rate}");
        assert_eq!(
            rate["source"]["text"],
            format!("{what} at admin/tests/admin/config_sources.rs:{line}")
        );
        assert_eq!(key(&body, "open_for")["source"]["layer"], "table");
    }
}
