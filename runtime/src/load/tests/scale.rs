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

/// A load of a file forgets the accounts of the key tables its last load had and it has no
/// more, in time linear in their number: 50 000 key tables loaded again take a fraction of a
/// second, not the 10^9 string comparisons of looking each old one up in a list of the new.
#[test]
fn a_load_again_of_many_key_tables_is_linear() {
    use crate::config::layers::{FileBooks, Reached, key_account};
    let books = FileBooks::default();
    let keys: Vec<String> = (0..50_000)
        .map(|i| key_account("scale-family", &format!("k{i}")))
        .collect();
    let reached = |keys: &[String]| Reached {
        names: vec!["scale-family".to_owned()],
        keys: keys.to_vec(),
    };
    let file = Path::new("scale-keys.toml");
    books.set_reached(file, reached(&keys));
    let began = std::time::Instant::now();
    books.set_reached(file, reached(&keys[1..]));
    let took = began.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

/// A variable that names no breaker, near a breaker of the file with a name as long, is an
/// error at once: "did you mean" is not looked for by comparing two 20 000-character names,
/// which costs the product of their lengths.
#[test]
fn a_long_unknown_name_costs_its_length() {
    let name = "x".repeat(20_000);
    let text = format!("[breakers.{name}]\ndynamic = true\n");
    let var = format!("BREAKERBOX__{}Y__OPEN_FOR", "X".repeat(20_000));
    let began = std::time::Instant::now();
    let e = err(&text, &[(&var, "5s")]);
    let took = began.elapsed();
    assert!(e.contains("names no known breaker"), "{e}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

/// Matching a variable to the breakers costs the number of names, even when many of them are
/// written alike in a variable (`a-b`, `a_b`, `a.b`: `A_B`): 32 768 such names, each given
/// twice (by the registry and by the file), are matched at once, not after comparing each
/// name with every one written alike before it.
#[test]
fn names_written_alike_in_a_variable_cost_their_number() {
    use crate::load::env::{match_env, read_env};
    let names: Vec<String> = (0..1usize << 15)
        .map(|i| {
            let seps: String = (0..15)
                .map(|b| if i >> b & 1 == 1 { '-' } else { '_' })
                .collect();
            format!("alike{seps}q")
        })
        .collect();
    let vars = read_env(env_of(&[("BREAKERBOX__ALIKE__OPEN_FOR", "5s")])).unwrap();
    let began = std::time::Instant::now();
    let matched = match_env(
        Path::new("alike.toml"),
        vars,
        names.iter().chain(&names).map(String::as_str),
    );
    let took = began.elapsed();
    assert!(matched.is_err(), "ALIKE names none of them");
    assert!(took < Duration::from_secs(1), "took {took:?}");
}
