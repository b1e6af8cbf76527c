//! Configuration as text, through the public API only: config files, environment overrides
//! and serde: large files, names of any shape, and the extremes of each value's range.
//!
//! No test here sets a `BREAKERBOX__` variable: every load reads them all, and one that names
//! no breaker fails the load. `env`'s tests each run alone in a process that starts with them.
#![cfg(feature = "serde")]

use std::time::Duration;

use breakerbox_runtime::{Config, registry};

/// A 1 MB file of 16 000 tables loads in linear time (a rescan of the text from its start
/// for every table and key would take minutes). The linear cost itself is asserted by counting in the unit tests
/// (`load::tests::the_loader_reads_the_text_once`).
#[test]
fn a_megabyte_of_tables_loads() {
    let mut text = String::new();
    let mut n = 0;
    while text.len() < 1 << 20 {
        text.push_str(&format!(
            "[breakers.text-scale-{n}]\ndynamic = true\nfailures = 3\nopen_for = \"1.5s\"\n\n"
        ));
        n += 1;
    }
    assert_eq!(
        registry().load_toml_str("big.toml", &text).unwrap().len(),
        n
    );
}

/// The longest duration reads back from the text serialization writes for it (the
/// `integration/tests/config/serialize.rs` serializes it through TOML and JSON).
#[test]
fn the_longest_duration_reads_back() {
    let config: Config = toml::from_str("open_for = \"18446744073709551615.999999999s\"").unwrap();
    assert_eq!(config.open_for(), Duration::MAX);
}

/// "`classify` `classify` belongs…": the key once.
#[test]
fn an_attribute_key_in_a_file_is_named_once() {
    let e = registry()
        .load_toml_str("t.toml", "[breakers.text-t]\nclassify = \"by_status\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("t.toml:2: [breakers.text-t] `classify` belongs to the function's"),
        "{e}"
    );
}

/// A 10 MB value does not make a 10 MB message.
#[test]
fn a_huge_value_makes_a_short_message() {
    let huge = "1".repeat(10 << 20);
    let e = registry()
        .load_toml_str(
            "h.toml",
            &format!("[breakers.text-h]\nopen_for = \"{huge}x\"\n"),
        )
        .unwrap_err()
        .to_string();
    assert!(e.len() < 300, "a message of {} bytes", e.len());
}

/// The attribute's duration dialect and its advice, in a file.
#[test]
fn a_file_reads_durations_as_the_attribute_does() {
    let e = registry()
        .load_toml_str("d.toml", "[breakers.text-d]\nopen_for = \"2 sec\"\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "d.toml:2: [breakers.text-d] `open_for` unexpected space in duration \"2 sec\": write it without spaces, like \"2s\""
    );
    let e = registry()
        .load_toml_str("d.toml", "[breakers.text-d]\nfailurs = 2\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`failurs` unknown key; did you mean `failures`?"),
        "{e}"
    );
}

/// A misspelt table name fails the load.
#[test]
fn a_misspelt_table_name_fails() {
    let _ = registry().get_or_create("text-inventory", Config::default);
    let e = registry()
        .load_toml_str("i.toml", "[breakers.text-inventroy]\nfailures = 2\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "i.toml:1: no breaker named `text-inventroy`; did you mean `text-inventory`?"
        ),
        "{e}"
    );
}

/// docs/configuration.md lists every key the loader accepts, in the loader's order, once.
#[test]
fn the_configuration_page_lists_every_key() {
    let page = include_str!("../../../docs/configuration.md");
    let table = &page[page
        .find("| key | type | unit | default | meaning | live |")
        .unwrap()..];
    let listed: Vec<&str> = table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| line.split('|').nth(1).unwrap().trim().trim_matches('`'))
        .collect();
    assert_eq!(listed, breakerbox_runtime::keys::KEYS);
    // Each row has its six cells filled.
    for line in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 8, "{line}");
        assert!(cells[1..7].iter().all(|c| !c.is_empty()), "{line}");
    }
}
