//! `timeout` as a config key: the attribute's value is one layer, and a config file's table,
//! a single key's table and a reload change the timeout the next call runs under.
//!
//! Every test uses its own breaker names and no `[defaults]` (which would reach every
//! annotated breaker of this binary); tokio's paused clock times the calls, nothing sleeps.
#![cfg(all(feature = "serde", feature = "tokio"))]

use std::time::Duration;

#[allow(dead_code)]
#[path = "attribute/support.rs"]
mod support;

use breakerbox::{ConfigSource, LoadError, circuit_breaker, registry};
use support::ApiError;

/// A call that takes `ms` milliseconds of tokio's (paused) time.
async fn work(ms: u64) -> Result<u64, ApiError> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Ok(ms)
}

#[circuit_breaker(name = "timeout-table", timeout = "1s", failures = 100)]
async fn from_table(ms: u64) -> Result<u64, ApiError> {
    work(ms).await
}

fn timed_out_after(result: Result<u64, ApiError>) -> Option<Duration> {
    match result {
        Err(ApiError::Timeout(t)) => Some(t.after()),
        _ => None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_tables_timeout_replaces_the_attributes_and_a_reload_changes_it() {
    assert_eq!(
        from_table(200).await.unwrap(),
        200,
        "under the attribute's 1s"
    );

    registry()
        .load_toml_str(
            "timeout.toml",
            "[breakers.timeout-table]\ntimeout = \"100ms\"\n",
        )
        .unwrap();
    assert_eq!(
        timed_out_after(from_table(200).await),
        Some(Duration::from_millis(100)),
        "the table's 100ms applies to the breaker that exists"
    );
    let sources = registry().config_sources("timeout-table").unwrap();
    let timeout = sources.iter().find(|k| k.key == "timeout").unwrap();
    assert_eq!(timeout.value, "100ms");
    assert!(
        matches!(&timeout.source, ConfigSource::Table { table, line: 2, .. } if table == "timeout-table"),
        "{timeout}"
    );
    // The table names only `timeout`: the attribute's other keys stay.
    let b = registry().get("timeout-table").unwrap();
    assert_eq!(b.config().failures(), Some(100));

    registry()
        .reload_toml_str(
            "timeout.toml",
            "[breakers.timeout-table]\ntimeout = \"300ms\"\n",
        )
        .unwrap();
    assert_eq!(from_table(200).await.unwrap(), 200, "reloaded to 300ms");
    assert_eq!(
        timed_out_after(from_table(400).await),
        Some(Duration::from_millis(300))
    );

    // A reload without the table gives the attribute's value back.
    registry()
        .reload_toml_str("timeout.toml", "[breakers.timeout-table]\nfailures = 100\n")
        .unwrap();
    assert_eq!(from_table(900).await.unwrap(), 900);
    assert_eq!(
        timed_out_after(from_table(1100).await),
        Some(Duration::from_secs(1))
    );
}

#[circuit_breaker(name = "timeout-keyed", key = host, timeout = "1s")]
async fn per_host(host: &str, ms: u64) -> Result<u64, ApiError> {
    let _ = host;
    work(ms).await
}

#[tokio::test(start_paused = true)]
async fn a_single_keys_table_gives_that_key_its_own_timeout() {
    registry()
        .load_toml_str(
            "timeout-keyed.toml",
            "[breakers.timeout-keyed.keys.\"slow.example\"]\ntimeout = \"50ms\"\n\n\
             [breakers.timeout-keyed]\ntimeout = \"2s\"\n",
        )
        .unwrap();
    assert_eq!(
        timed_out_after(per_host("slow.example", 100).await),
        Some(Duration::from_millis(50))
    );
    assert_eq!(per_host("fast.example", 1500).await.unwrap(), 1500);
    assert_eq!(
        timed_out_after(per_host("fast.example", 2500).await),
        Some(Duration::from_secs(2))
    );
}

#[circuit_breaker(name = "timeout-base", timeout = "1s")]
async fn from_base(ms: u64) -> Result<u64, ApiError> {
    work(ms).await
}

#[circuit_breaker(name = "timeout-untimed", failures = 3)]
async fn untimed(ms: u64) -> Result<u64, ApiError> {
    work(ms).await
}

/// A base lies under the attribute: its `timeout` does not replace the attribute's, and a
/// function that cannot time out takes the base's other keys and no timeout.
#[tokio::test(start_paused = true)]
async fn a_bases_timeout_lies_under_the_attribute_and_skips_untimed_functions() {
    let file = "[configs.quick]\ntimeout = \"20ms\"\nopen_for = \"7s\"\n\n\
                [breakers.timeout-base]\nbase = \"quick\"\n\n\
                [breakers.timeout-untimed]\nbase = \"quick\"\n";
    registry().load_toml_str("base.toml", file).unwrap();
    assert_eq!(
        from_base(30).await.unwrap(),
        30,
        "the attribute's 1s is above the base"
    );
    let b = registry().get("timeout-base").unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(7));
    assert_eq!(b.config().timeout(), Some(Duration::from_secs(1)));

    assert_eq!(untimed(5000).await.unwrap(), 5000);
    let b = registry().get("timeout-untimed").unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(7));
    assert_eq!(b.config().timeout(), None);
}

#[circuit_breaker(name = "timeout-refused", failures = 3)]
async fn refused(ms: u64) -> Result<u64, ApiError> {
    work(ms).await
}

/// A table that sets `timeout` for a function that cannot time out is an error at its line
/// that names the attribute and says what to add, and the load changes nothing.
#[tokio::test(start_paused = true)]
async fn a_table_timing_a_function_without_timeout_is_refused() {
    let _ = refused(1).await;
    let e = registry()
        .load_toml_str(
            "refused.toml",
            "[breakers.timeout-refused]\nopen_for = \"9s\"\ntimeout = \"50ms\"\n",
        )
        .unwrap_err();
    assert!(matches!(&e, LoadError::Invalid { line: 3, key, .. } if key == "timeout"));
    let text = e.to_string();
    assert!(
        text.starts_with("refused.toml:3: [breakers.timeout-refused] `timeout` cannot apply"),
        "{text}"
    );
    assert!(
        text.contains("config_timeout.rs:"),
        "names the attribute: {text}"
    );
    assert!(text.contains("add `timeout = \"…\"`"), "{text}");
    let b = registry().get("timeout-refused").unwrap();
    assert_eq!(
        b.config().open_for(),
        Duration::from_secs(60),
        "all or nothing"
    );
}

#[circuit_breaker(name = "timeout-zero", timeout = "1s")]
async fn zero(ms: u64) -> Result<u64, ApiError> {
    work(ms).await
}

#[tokio::test(start_paused = true)]
async fn a_zero_timeout_from_a_file_is_refused_at_its_line() {
    let e = registry()
        .load_toml_str("zero.toml", "[breakers.timeout-zero]\n\ntimeout = \"0s\"\n")
        .unwrap_err();
    assert_eq!(e.line(), Some(3), "{e}");
    assert_eq!(e.key(), Some("timeout"), "{e}");
    assert_eq!(zero(500).await.unwrap(), 500);
}
