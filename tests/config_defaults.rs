//! A config file's layers over the `#[circuit_breaker]` attributes, key by key: `[defaults]`,
//! a named base, a table and a variable, each changing only the keys it names.
//!
//! `[defaults]` reaches every annotated breaker of the program, and the load reads the real
//! environment: the one test of this binary sets it, and no other test shares the process.
#![cfg(feature = "serde")]

use std::time::Duration;

use breakerbox::{Config, Rejected, circuit_breaker, registry};

#[derive(Debug)]
struct Down;

impl From<Rejected> for Down {
    fn from(_: Rejected) -> Self {
        Down
    }
}

#[circuit_breaker(name = "def-rate", failure_rate = 50, min_calls = 20)]
fn rate() -> Result<(), Down> {
    Ok(())
}

#[circuit_breaker(name = "def-count", failures = 3)]
fn count() -> Result<(), Down> {
    Ok(())
}

#[circuit_breaker(name = "def-keyed", key = host, failures = 2)]
fn keyed(host: &str) -> Result<(), Down> {
    let _ = host;
    Ok(())
}

/// This file, to find the attribute's line.
const SOURCE: &str = include_str!("config_defaults.rs");

fn line_of(text: &str) -> usize {
    SOURCE.lines().position(|l| l.trim() == text).unwrap() + 1
}

const FILE: &str = r#"[defaults]
open_for = "20s"
half_open_calls = 2

[configs.patient]
open_for = "2m"

[breakers.def-count]
base = "patient"
successes = 2
"#;

#[test]
fn each_layer_changes_only_the_keys_it_names() {
    // Validation runs on the merged config: a default that does not go with an attribute's
    // keys is an error naming both, and the load applies nothing.
    let e = registry()
        .load_toml_str("app.toml", "[defaults]\nfailures = 4\n")
        .unwrap_err();
    let attribute =
        line_of(r#"#[circuit_breaker(name = "def-rate", failure_rate = 50, min_calls = 20)]"#);
    assert_eq!(
        e.to_string(),
        format!(
            "app.toml:2: [breakers.def-rate] `failures` cannot be combined with `failure_rate`: \
             trip either on consecutive failures or on a failure rate (failures = 4 from \
             [defaults] at app.toml:2; failure_rate = 50 from #[circuit_breaker] at \
             tests/config_defaults.rs:{attribute})"
        )
    );
    assert_eq!(
        registry().get("def-count").unwrap().config().failures(),
        Some(3)
    );

    // SAFETY: the only test of this binary: nothing else reads or writes the environment.
    unsafe { std::env::set_var("BREAKERBOX__DEF_RATE__OPEN_FOR", "3s") };
    let names = registry().load_toml_str("app.toml", FILE).unwrap();
    assert_eq!(names, ["def-count", "def-keyed", "def-rate"]);

    // The attribute's keys, `[defaults]` under them, the variable over both.
    rate().unwrap();
    let c = registry().get("def-rate").unwrap().config().clone();
    assert_eq!(c.failure_rate(), Some(50));
    assert_eq!(c.min_calls(), 20);
    assert_eq!(c.half_open_calls(), 2);
    assert_eq!(c.open_for(), Duration::from_secs(3));

    // The base over `[defaults]`, the attribute over the base, the table over all.
    count().unwrap();
    let c = registry().get("def-count").unwrap().config().clone();
    assert_eq!(c.failures(), Some(3));
    assert_eq!(c.open_for(), Duration::from_secs(120));
    assert_eq!(c.half_open_calls(), 2);
    assert_eq!(c.successes(), 2);

    // A keyed attribute's family, created after the load, takes the same layers.
    keyed("a").unwrap();
    let family = registry()
        .family::<String>("def-keyed", Config::default)
        .unwrap();
    let c = family.breaker("a").config().clone();
    assert_eq!(c.failures(), Some(2));
    assert_eq!(c.open_for(), Duration::from_secs(20));
    assert_eq!(c.half_open_calls(), 2);
}
