//! The controls, with the token.

use std::time::Duration;

use axum::http::StatusCode;
use breakerbox_admin::Admin;
use breakerbox_runtime::State;

use crate::support::*;

#[tokio::test]
async fn with_the_token_each_control_acts_and_answers_the_new_view() {
    let _shared = crate::support::shared().await;
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

#[tokio::test]
async fn a_token_read_with_its_line_end_is_the_token_a_client_sends() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-act-newline");
    // A token read from a file (a mounted secret) ends with a newline, which no HTTP header
    // can carry: a client sends the token without it.
    let app = Admin::new().token(format!("{TOKEN}\n")).router();
    let (status, _, view) = send(
        &app,
        post("/breakers/adm-act-newline/force-open", Some(TOKEN), ""),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(b.state(), State::ForcedOpen);
    // Whitespace alone is no token, as the empty one is: the controls are off.
    let app = Admin::new().token(" \n").router();
    let (status, _, view) = send(
        &app,
        post("/breakers/adm-act-newline/reset", Some(TOKEN), ""),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{view}");
}

#[tokio::test]
async fn a_bearer_token_after_several_spaces_is_read() {
    let _shared = crate::support::shared().await;
    let (b, _clock) = breaker("adm-act-spaces");
    let app = Admin::new().token(TOKEN).router();
    // RFC 6750: `credentials = "Bearer" 1*SP b64token`.
    let req = axum::http::Request::post("/breakers/adm-act-spaces/force-open")
        .header(
            axum::http::header::AUTHORIZATION,
            format!("Bearer   {TOKEN}"),
        )
        .body(axum::body::Body::empty())
        .unwrap();
    let (status, _, view) = send(&app, req).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    assert_eq!(b.state(), State::ForcedOpen);
}
