//! `timeout` from an environment variable, with the real environment: each test runs alone in
//! a process that starts with its variable (`support::alone_with_env`), so no other load
//! reads it.
#![cfg(all(feature = "serde", feature = "tokio"))]

use std::time::Duration;

#[allow(dead_code)]
#[path = "attribute/support.rs"]
mod support;

use breakerbox::{ConfigSource, LoadError, circuit_breaker, registry};
use support::ApiError;

#[circuit_breaker(name = "timeout-env", timeout = "1s")]
async fn timed(ms: u64) -> Result<u64, ApiError> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(ms)
}

#[circuit_breaker(name = "timeout-env-untimed")]
async fn untimed(ms: u64) -> Result<u64, ApiError> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(ms)
}

/// A variable sets the timeout of a function that times out, with no table in the file, and
/// `config_sources` names it.
#[test]
fn a_variable_sets_the_timeout_of_a_function_that_times_out() {
    support::alone_with_env(
        concat!(
            module_path!(),
            "::a_variable_sets_the_timeout_of_a_function_that_times_out"
        ),
        &[("BREAKERBOX__TIMEOUT_ENV__TIMEOUT", "40ms")],
        a_variable_sets_the_timeout_of_a_function_that_times_out_alone,
    );
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn a_variable_sets_the_timeout_of_a_function_that_times_out_alone() {
    registry().load_toml_str("env.toml", "").unwrap();
    match timed(50).await {
        Err(ApiError::Timeout(t)) => assert_eq!(t.after(), Duration::from_millis(40)),
        other => panic!("expected a timeout after 40ms, got {other:?}"),
    }
    let sources = registry().config_sources("timeout-env").unwrap();
    let timeout = sources.iter().find(|k| k.key == "timeout").unwrap();
    assert_eq!(
        timeout.source,
        ConfigSource::Env {
            var: "BREAKERBOX__TIMEOUT_ENV__TIMEOUT".into()
        }
    );
}

/// A variable for the timeout of a function that cannot time out is an error naming the
/// variable, and the function runs untimed.
#[test]
fn a_timeout_variable_for_a_function_without_one_is_refused() {
    support::alone_with_env(
        concat!(
            module_path!(),
            "::a_timeout_variable_for_a_function_without_one_is_refused"
        ),
        &[("BREAKERBOX__TIMEOUT_ENV_UNTIMED__TIMEOUT", "40ms")],
        a_timeout_variable_for_a_function_without_one_is_refused_alone,
    );
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn a_timeout_variable_for_a_function_without_one_is_refused_alone() {
    let e = registry().load_toml_str("env.toml", "").unwrap_err();
    assert!(
        matches!(&e, LoadError::Env { var, .. } if var == "BREAKERBOX__TIMEOUT_ENV_UNTIMED__TIMEOUT"),
        "{e}"
    );
    assert!(
        e.to_string().contains("has no `timeout` in its attribute"),
        "{e}"
    );
    assert_eq!(untimed(5000).await.unwrap(), 5000);
}
