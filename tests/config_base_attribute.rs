//! `#[circuit_breaker(config = "<name>")]`: a config file's `[configs.<name>]` table under the
//! attribute's keys. Every load must define the bases the attributes of the program name, so
//! each load of this binary has `[configs.fast]`.
#![cfg(feature = "serde")]

use std::time::Duration;

#[allow(dead_code)]
#[path = "attribute/support.rs"]
mod support;

use breakerbox::{ConfigSource, LoadError, Site, circuit_breaker, registry};
use support::ApiError;

#[circuit_breaker(name = "base-attr", config = "fast", failures = 3)]
fn with_base(id: u32) -> Result<u32, ApiError> {
    Ok(id)
}

#[circuit_breaker(name = "base-attr-keyed", key = host, config = "fast")]
fn keyed(host: &str) -> Result<usize, ApiError> {
    Ok(host.len())
}

const FAST: &str = "[configs.fast]\nfailures = 9\nopen_for = \"5s\"\nhalf_open_calls = 2\n";

#[test]
fn the_attributes_config_is_its_base_and_must_be_in_every_file() {
    // A file without the base the attribute names: an error naming the attribute's line.
    let e = registry()
        .load_toml_str("app.toml", "[configs.fats]\nopen_for = \"1s\"\n")
        .unwrap_err();
    let LoadError::UnknownConfig {
        breaker,
        config,
        site,
        ..
    } = &e
    else {
        panic!("{e}");
    };
    assert_eq!(config, "fast");
    assert!(
        breaker == "base-attr" || breaker == "base-attr-keyed",
        "{breaker}"
    );
    assert!(
        matches!(**site, Site::Attribute { file, .. } | Site::KeyedAttribute { file, .. } if file.ends_with("config_base_attribute.rs"))
    );
    let text = e.to_string();
    assert!(
        text.starts_with("app.toml: no [configs.fast] table for breaker `base-attr"),
        "{text}"
    );
    assert!(text.contains("tests/config_base_attribute.rs:"), "{text}");
    assert!(
        text.ends_with("takes `config = \"fast\"`; did you mean `fats`?"),
        "{text}"
    );
    assert_eq!(e.key(), Some("config"));

    // The file has it, and no table for the breaker: the base still reaches it, under the
    // attribute's keys.
    registry().load_toml_str("app.toml", FAST).unwrap();
    assert_eq!(with_base(1).unwrap(), 1);
    let b = registry().get("base-attr").unwrap();
    assert_eq!(
        b.config().failures(),
        Some(3),
        "the attribute is above its base"
    );
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    let sources = registry().config_sources("base-attr").unwrap();
    let source = |key: &str| {
        sources
            .iter()
            .find(|k| k.key == key)
            .unwrap()
            .source
            .clone()
    };
    assert!(
        matches!(source("open_for"), ConfigSource::Base { name, line: 3, .. } if name == "fast")
    );
    assert!(matches!(
        source("failures"),
        ConfigSource::Site(Site::Attribute { .. })
    ));

    // The keyed family's keys get the base too.
    assert_eq!(keyed("a.example").unwrap(), 9);
    let sources = registry().config_sources("base-attr-keyed").unwrap();
    let half_open = sources.iter().find(|k| k.key == "half_open_calls").unwrap();
    assert_eq!(half_open.value, "2");

    // A table's own `base` replaces the attribute's `config`, and its keys lie over both.
    let file = format!(
        "{FAST}\n[configs.slow]\nopen_for = \"2m\"\n\n[breakers.base-attr]\nbase = \"slow\"\nsuccesses = 1\n"
    );
    registry().load_toml_str("app.toml", &file).unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(120));
    assert_eq!(b.config().half_open_calls(), 1, "`fast` no longer applies");
    assert_eq!(b.config().failures(), Some(3));
}
