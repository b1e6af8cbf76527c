//! Annotated breakers are known before their first call, and configs that disagree are
//! reported with every site's file and line.
//!
//! The registry is one per process: each test uses names of its own, and no test here lists
//! every breaker (that would create them all, and `configure_before_listing` needs its breaker
//! not created yet).
//!
//! The registration's `link_section` statics come from a macro of breakerbox's, so a crate
//! that forbids `unsafe` code can still use the attribute: this one does.
#![forbid(unsafe_code)]

use std::fmt::Display;

use breakerbox::{Config, Rejected, Site, circuit_breaker, registry};

#[derive(Debug)]
enum ApiError {
    Down,
    Rejected,
}

impl From<Rejected> for ApiError {
    fn from(_: Rejected) -> Self {
        ApiError::Rejected
    }
}

/// This file, to find the line of each attribute.
const SOURCE: &str = include_str!("registration.rs");

/// The line (from 1) of the only line of this file that is `text`, trimmed.
fn line_of(text: &str) -> u32 {
    let lines: Vec<usize> = SOURCE
        .lines()
        .enumerate()
        .filter(|(_, line)| line.trim() == text)
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "{text:?} is on lines {lines:?}");
    u32::try_from(lines[0]).unwrap()
}

fn attribute_at(text: &str) -> String {
    format!("#[circuit_breaker] at {}:{}", file!(), line_of(text))
}

// --- Known before the first call: a free function, a generic one, a method, an async fn and
// --- a trait's default method. None of them is called by the test that lists them.

#[circuit_breaker(name = "reg-free", failures = 4)]
fn free() -> Result<(), ApiError> {
    Ok(())
}

#[circuit_breaker(name = "reg-generic", failures = 6)]
fn generic<T: Display>(value: T) -> Result<String, ApiError> {
    Ok(value.to_string())
}

struct Client;

impl Client {
    #[circuit_breaker(name = "reg-method", failures = 7)]
    fn method(&self) -> Result<(), ApiError> {
        Ok(())
    }

    #[circuit_breaker(name = "reg-async", failures = 8, fallback = Client::cached)]
    async fn fetch(&self, id: u32) -> u32 {
        id
    }

    async fn cached(&self, _id: u32) -> u32 {
        0
    }
}

trait Service {
    #[circuit_breaker(name = "reg-trait", failures = 9)]
    fn default_method(&self) -> Result<(), ApiError> {
        Ok(())
    }
}

impl Service for Client {}

#[circuit_breaker(failures = 2)]
fn default_named() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn annotated_breakers_are_known_before_their_first_call() {
    let default_name = concat!(module_path!(), "::default_named");
    let names = registry().names();
    for (name, failures) in [
        ("reg-free", 4),
        ("reg-generic", 6),
        ("reg-method", 7),
        ("reg-async", 8),
        ("reg-trait", 9),
        (default_name, 2),
    ] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
        let breaker = registry()
            .get(name)
            .unwrap_or_else(|| panic!("no breaker {name}"));
        assert_eq!(breaker.config().failures(), Some(failures), "{name}");
    }
    // The functions' first calls find the breakers `get` created: one breaker per name.
    free().unwrap();
    assert_eq!(generic(5).unwrap(), "5");
    Client.method().unwrap();
    Client.default_method().unwrap();
    default_named().unwrap();
    for name in [
        "reg-free",
        "reg-generic",
        "reg-method",
        "reg-trait",
        default_name,
    ] {
        assert_eq!(registry().get(name).unwrap().metrics().calls, 1, "{name}");
    }
    let fetch = Client.fetch(3);
    drop(fetch);
}

// --- Conflicts between attributes.

#[circuit_breaker(name = "reg-conflict", failures = 3)]
fn conflict_three() -> Result<(), ApiError> {
    Err(ApiError::Down)
}

#[circuit_breaker(name = "reg-conflict", failures = 5, open_for = "2s")]
fn conflict_five() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn two_attributes_with_different_configs_are_reported_with_both_lines() {
    let conflicts = registry().check().unwrap_err();
    let conflict = conflicts
        .conflicts()
        .iter()
        .find(|c| c.name() == "reg-conflict")
        .unwrap_or_else(|| panic!("reg-conflict not reported: {conflicts}"));
    let first = r#"#[circuit_breaker(name = "reg-conflict", failures = 3)]"#;
    let second = r#"#[circuit_breaker(name = "reg-conflict", failures = 5, open_for = "2s")]"#;
    let sites: Vec<Site> = conflict.sites().iter().map(|(site, _)| *site).collect();
    assert_eq!(sites.len(), 2, "{conflict}");
    assert_eq!(sites[0].file(), file!());
    assert_eq!(sites[0].line(), line_of(first));
    assert_eq!(sites[1].line(), line_of(second));
    assert_eq!(
        conflict.differences(),
        ["failures", "open_for", "max_open_for"]
    );
    let expected = format!(
        "circuit breaker 'reg-conflict' is given different configs:\n  \
         {}: failures = 3, open_for = 60s, max_open_for = 60s\n  \
         {}: failures = 5, open_for = 2s, max_open_for = 2s",
        attribute_at(first),
        attribute_at(second),
    );
    assert!(conflicts.to_string().contains(&expected), "{conflicts}");

    // The breaker has the first attribute's config (by file and line), whichever function is
    // called first.
    conflict_five().unwrap();
    let breaker = registry().get("reg-conflict").unwrap();
    assert_eq!(breaker.config().failures(), Some(3));
    assert_eq!(
        breaker.config().open_for(),
        std::time::Duration::from_secs(60)
    );
    assert!(matches!(conflict_three(), Err(ApiError::Down)));
}

#[circuit_breaker(name = "reg-agree", failures = 3, open_for = "2s")]
fn agree_read() -> Result<(), ApiError> {
    Ok(())
}

#[circuit_breaker(name = "reg-agree", open_for = "2000ms", failures = 3)]
fn agree_write() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn the_same_config_twice_is_not_a_conflict() {
    agree_read().unwrap();
    agree_write().unwrap();
    let reported = match registry().check() {
        Ok(()) => Vec::new(),
        Err(conflicts) => conflicts.conflicts().to_vec(),
    };
    assert!(
        reported.iter().all(|c| c.name() != "reg-agree"),
        "{reported:?}"
    );
    assert_eq!(registry().get("reg-agree").unwrap().metrics().calls, 2);
}

// --- `get_or_create` before the attribute's first call.

#[circuit_breaker(name = "reg-early", failures = 2)]
fn early() -> Result<(), ApiError> {
    Err(ApiError::Down)
}

#[test]
fn try_get_or_create_with_another_config_before_the_first_call_is_an_error() {
    let attribute = r#"#[circuit_breaker(name = "reg-early", failures = 2)]"#;
    let conflict = registry()
        .try_get_or_create("reg-early", Config::default)
        .unwrap_err();
    // The caller's line is the method's.
    let call_line = line!() - 3;
    assert_eq!(conflict.name(), "reg-early");
    assert_eq!(conflict.differences(), ["failures"]);
    assert_eq!(conflict.existing().failures(), Some(2));
    assert_eq!(conflict.wanted().failures(), Some(5));
    let existing = conflict.existing_site().unwrap();
    assert!(matches!(existing, Site::Attribute { .. }), "{existing:?}");
    assert_eq!(existing.line(), line_of(attribute));
    assert!(matches!(conflict.site(), Site::Call { .. }));
    assert_eq!(conflict.site().line(), call_line);
    assert_eq!(
        conflict.to_string(),
        format!(
            "circuit breaker 'reg-early' already has another config, from {} (failures = 2); \
             get_or_create at {}:{call_line} asked for failures = 5",
            attribute_at(attribute),
            file!(),
        )
    );

    // The attribute's function and the caller share the breaker, with the attribute's config.
    let breaker = conflict.into_breaker();
    assert!(matches!(early(), Err(ApiError::Down)));
    assert!(matches!(early(), Err(ApiError::Down)));
    assert!(matches!(early(), Err(ApiError::Rejected)));
    assert_eq!(breaker.state(), breakerbox::State::Open);

    // `check` reports the call beside the attribute.
    let conflicts = registry().check().unwrap_err();
    let reported = conflicts
        .conflicts()
        .iter()
        .find(|c| c.name() == "reg-early")
        .unwrap_or_else(|| panic!("reg-early not reported: {conflicts}"));
    let sites: Vec<String> = reported
        .sites()
        .iter()
        .map(|(s, _)| s.to_string())
        .collect();
    assert_eq!(
        sites,
        [
            attribute_at(attribute),
            format!("get_or_create at {}:{call_line}", file!())
        ]
    );
}

#[circuit_breaker(name = "reg-early-plain", failures = 2)]
fn early_plain() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn get_or_create_with_another_config_gets_the_attribute_config_and_check_reports_it() {
    let breaker = registry().get_or_create("reg-early-plain", || {
        Config::builder().failures(9).build().unwrap()
    });
    let call_line = line!() - 3;
    assert_eq!(breaker.config().failures(), Some(2));
    early_plain().unwrap();
    assert_eq!(breaker.metrics().calls, 1);
    let conflicts = registry().check().unwrap_err().to_string();
    let expected = format!(
        "circuit breaker 'reg-early-plain' is given different configs:\n  \
         {}: failures = 2\n  \
         get_or_create at {}:{call_line}: failures = 9",
        attribute_at(r#"#[circuit_breaker(name = "reg-early-plain", failures = 2)]"#),
        file!(),
    );
    assert!(conflicts.contains(&expected), "{conflicts}");
}

#[test]
fn get_or_create_with_the_same_config_is_ok() {
    let two = || Config::builder().failures(2).build().unwrap();
    let a = registry().try_get_or_create("reg-same", two).unwrap();
    let b = registry().try_get_or_create("reg-same", two).unwrap();
    assert!(a.ptr_eq(&b));
    // Two calls by hand that disagree are a conflict too, named by their lines.
    let conflict = registry()
        .try_get_or_create("reg-same", Config::default)
        .unwrap_err();
    assert!(conflict.breaker().ptr_eq(&a));
    assert_eq!(conflict.existing_site().unwrap().line(), line!() - 8);
}

// --- A config set by hand (or by `load_toml`) overrides the attribute's: no conflict.

#[circuit_breaker(name = "reg-preset", failures = 3)]
fn preset() -> Result<(), ApiError> {
    Ok(())
}

#[test]
fn configure_before_listing() {
    assert!(registry().names().iter().any(|n| n == "reg-preset"));
    let eleven = Config::builder().failures(11).build().unwrap();
    assert!(registry().configure("reg-preset", eleven));
    let all = registry().breakers();
    let listed = all.iter().find(|b| b.name() == "reg-preset").unwrap();
    assert_eq!(listed.config().failures(), Some(11));
    preset().unwrap();
    assert_eq!(listed.metrics().calls, 1);
    // Every annotated breaker of this file is listed, called or not.
    for name in ["reg-free", "reg-trait", "reg-early-plain", "reg-agree"] {
        assert!(all.iter().any(|b| b.name() == name), "{name}");
    }
    // The override is not a conflict, and asking for the attribute's config is fine.
    let three = || Config::builder().failures(3).build().unwrap();
    assert!(registry().try_get_or_create("reg-preset", three).is_ok());
    if let Err(conflicts) = registry().check() {
        assert!(
            conflicts
                .conflicts()
                .iter()
                .all(|c| c.name() != "reg-preset"),
            "{conflicts}"
        );
    }
}
