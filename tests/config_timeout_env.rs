//! `timeout` from an environment variable, with the real environment: the one test of this
//! binary sets it, so no other load of the process reads it.
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

/// A variable sets the timeout of a function that times out, with no table in the file; one
/// for a function that cannot is an error naming the variable.
#[tokio::test(start_paused = true)]
async fn a_variable_sets_the_timeout_or_is_refused() {
    // SAFETY: the only test of this binary: nothing else reads or writes the environment.
    unsafe { std::env::set_var("BREAKERBOX__TIMEOUT_ENV__TIMEOUT", "40ms") };
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

    // SAFETY: as above.
    unsafe { std::env::set_var("BREAKERBOX__TIMEOUT_ENV_UNTIMED__TIMEOUT", "40ms") };
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
