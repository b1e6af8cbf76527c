//! The loader reads its text once, in time linear in its size.

use super::*;
use crate::load::parse::SCANNED;

fn tables(n: usize) -> String {
    let mut text = String::with_capacity(n * 64);
    for i in 0..n {
        text.push_str(&format!(
            "[breakers.load-scale-{n}-{i}]\ndynamic = true\nfailures = 3\nopen_for = \"1.5s\"\n\n"
        ));
    }
    text
}

/// The loader reads the text once to number its lines, however many tables and keys
/// it has: a rescan from the start for every table and key would make a large file's load
/// quadratic in its size.
#[test]
fn the_loader_reads_the_text_once() {
    for n in [10, 100, 3_000] {
        let text = tables(n);
        SCANNED.with(|s| s.set(0));
        // A file of its own: the same file's next load would reach the last one's too.
        let file = format!("scale-{n}.toml");
        let loaded = registry().load_with_env(Path::new(&file), &text, Vec::new());
        assert_eq!(loaded.unwrap().len(), n);
        assert_eq!(SCANNED.with(|s| s.get()), text.len(), "{n} tables");
    }
    // An error costs one more pass over its own line at most.
    let text = format!("{}[breakers.x]\nfailures = = 1\n", tables(1_000));
    SCANNED.with(|s| s.set(0));
    assert!(matches!(load(&text, &[]), Err(LoadError::Syntax { .. })));
    assert!(SCANNED.with(|s| s.get()) <= text.len() + 20);
}

/// `load_toml` of a file of `n` tables, reading it once.
fn load_file(n: usize) -> usize {
    let text = tables(n);
    let path =
        std::env::temp_dir().join(format!("breakerbox-load-{}-{n}.toml", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    SCANNED.with(|s| s.set(0));
    let names = registry().load_toml(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(names.unwrap().len(), n);
    assert_eq!(SCANNED.with(|s| s.get()), text.len());
    text.len()
}

/// Tables of `bytes` in all.
fn load_size(bytes: usize) {
    let per = tables(1).len();
    assert!(load_file(bytes / per + 1) >= bytes);
}

#[test]
fn scale_1_mb() {
    load_size(1 << 20);
}

// The larger ones take seconds in debug, where the TOML parser alone is slow; run them
// with `cargo test -p breakerbox-runtime --features serde --release --lib scale_`.

#[test]
#[cfg_attr(debug_assertions, ignore = "run with --release")]
fn scale_4_mb() {
    load_size(4 << 20);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "run with --release")]
fn scale_16_mb() {
    load_size(16 << 20);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "run with --release")]
fn scale_100_000_tables() {
    load_file(100_000);
}

#[test]
fn unreadable_file_names_the_path() {
    let e = registry()
        .load_toml("/nonexistent/breakers.toml")
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot read circuit breaker config /nonexistent/breakers.toml: "),
        "{e}"
    );
}

/// 100 000 tables that each take a base, 100 000 single keys' tables of one family, and a
/// variable whose name is one character off one of the 100 000 names: each table's layers
/// are merged once, and the suggestion is searched once over all the names.
#[test]
#[cfg_attr(debug_assertions, ignore = "run with --release")]
fn scale_100_000_tables_with_bases_keys_and_a_misspelt_variable() {
    let n = 100_000;
    let mut text =
        String::from("[configs.slow]\nopen_for = \"2m\"\nsuccesses = 2\nhalf_open_calls = 2\n\n");
    for i in 0..n {
        text.push_str(&format!(
            "[breakers.load-scale-base-{i}]\ndynamic = true\nbase = \"slow\"\nfailures = 3\n\n"
        ));
    }
    text.push_str("[breakers.load-scale-family]\ndynamic = true\nfailures = 2\n\n");
    for i in 0..n {
        text.push_str(&format!(
            "[breakers.load-scale-family.keys.\"k{i}\"]\nopen_for = \"5s\"\n\n"
        ));
    }
    let e = load(
        &text,
        &[("BREAKERBOX__LOAD_SCALE_BASX_99999__FAILURES", "4")],
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("did you mean `BREAKERBOX__LOAD_SCALE_BASE_99999__FAILURES`"),
        "{e}"
    );
    assert_eq!(load(&text, &[]).unwrap().len(), n + 1);
    let b = registry().get_or_create("load-scale-base-99999", Config::default);
    assert_eq!(b.config().open_for(), Duration::from_secs(120));
    assert_eq!(b.config().failures(), Some(3));
}

/// Two files of the same 100 000 tables loaded in turn, twice: each name costs one note and
/// at most one report, whatever the number of names.
#[test]
#[cfg_attr(debug_assertions, ignore = "run with --release")]
fn scale_two_files_of_100_000_shared_tables() {
    let n = 100_000;
    let text = |open_for: &str| {
        let mut text = String::with_capacity(n * 64);
        for i in 0..n {
            text.push_str(&format!(
                "[breakers.load-scale-two-{i}]\ndynamic = true\nopen_for = \"{open_for}\"\n"
            ));
        }
        text
    };
    let (a, b) = (text("5s"), text("9s"));
    for _ in 0..2 {
        for (file, text) in [("a.toml", &a), ("b.toml", &b)] {
            registry()
                .load_with_env(Path::new(file), text, Vec::new())
                .unwrap();
        }
    }
    let c = registry().check().unwrap_err();
    let two = c
        .two_files()
        .iter()
        .filter(|t| t.name().starts_with("load-scale-two-"))
        .count();
    assert_eq!(two, n);
}
