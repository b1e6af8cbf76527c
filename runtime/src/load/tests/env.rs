//! Environment variables over the file.

use super::*;
use crate::load::env::env_name;

#[test]
fn env_errors_name_the_variable() {
    let file = "[breakers.env-x]\ndynamic = true\nfailures = 3\n";
    assert_eq!(
        err(file, &[("BREAKERBOX__ENV_X__FAILURES", "zero")]),
        "environment variable BREAKERBOX__ENV_X__FAILURES: `failures` must be a whole number, got a string"
    );
    assert_eq!(
        err(file, &[("BREAKERBOX__ENV_X__FAILURES", "0")]),
        "environment variable BREAKERBOX__ENV_X__FAILURES: `failures` must be at least 1, got 0"
    );
    assert!(err(file, &[("BREAKERBOX__ENV_X__COLOUR", "red")])
        .starts_with("environment variable BREAKERBOX__ENV_X__COLOUR: unknown key `colour`; valid keys: failures,"));
    assert!(err(file, &[("BREAKERBOX__ENV_X__FAILURE", "3")])
        .starts_with("environment variable BREAKERBOX__ENV_X__FAILURE: unknown key `failure`; did you mean `failures`? valid keys: failures,"));
    let two = "[breakers.a-b]\ndynamic = true\nfailures = 3\n[breakers.a_b]\ndynamic = true\nfailures = 3\n";
    assert!(
        err(two, &[("BREAKERBOX__A_B__FAILURES", "2")])
            .ends_with("A_B could be any of the breakers 'a-b' and 'a_b'; rename one of them")
    );
    assert!(err(file, &[("BREAKERBOX__FAILURES", "3")]).starts_with(
        "environment variable BREAKERBOX__FAILURES: write it `BREAKERBOX__<NAME>__<KEY>`"
    ));
    assert!(err(file, &[("BREAKERBOX____FAILURES", "3")]).starts_with(
        "environment variable BREAKERBOX____FAILURES: write it `BREAKERBOX__<NAME>__<KEY>`"
    ));
}

/// The key is split from the right, so names with `::` (the attribute's default
/// names) and names that start or end with punctuation can be addressed.
#[test]
fn env_addresses_every_default_name() {
    let text = r#"
[breakers."load_app::client::fetch_user"]
dynamic = true
failures = 3

[breakers."load-users!"]
dynamic = true
failures = 3

[breakers."_load_lead"]
dynamic = true
failures = 3

[breakers."load::Caps::x9"]
dynamic = true
failures = 3
"#;
    load(
        text,
        &[
            ("BREAKERBOX__LOAD_APP__CLIENT__FETCH_USER__FAILURES", "7"),
            ("BREAKERBOX__LOAD_USERS___OPEN_FOR", "5s"),
            ("BREAKERBOX___LOAD_LEAD__MAX_CONCURRENT", "2"),
            ("BREAKERBOX__load__caps__X9__failures", "9"),
        ],
    )
    .unwrap();
    let config = |name: &str| {
        registry()
            .get_or_create(name, Config::default)
            .config()
            .clone()
    };
    assert_eq!(config("load_app::client::fetch_user").failures(), Some(7));
    assert_eq!(config("load-users!").open_for(), Duration::from_secs(5));
    assert_eq!(config("_load_lead").max_concurrent(), Some(2));
    assert_eq!(config("load::Caps::x9").failures(), Some(9));
    assert_eq!(
        env_name("my_app::client::fetch_user"),
        "MY_APP__CLIENT__FETCH_USER"
    );
}

/// A variable reaches a breaker whatever the file holds, and one that reaches no breaker is an
/// error that names the variable and the breaker it most likely means.
#[test]
fn a_variable_naming_no_known_breaker_is_an_error_with_a_suggestion() {
    let e = load(
        "[breakers.load-mine]\ndynamic = true\nfailures = 2\n",
        &[("BREAKERBOX__LOAD_MNE__FAILURES", "3")],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "environment variable BREAKERBOX__LOAD_MNE__FAILURES: names no known breaker or keyed family (`LOAD_MNE`); did you mean `BREAKERBOX__LOAD_MINE__FAILURES` (breaker 'load-mine')? A breaker made at run time needs a `[breakers.<name>]` table with `dynamic = true` in breakers.toml for a variable to reach it."
    );
    // Nothing near: no suggestion, and nothing was configured.
    let e = err(
        "[breakers.load-mine]\ndynamic = true\nfailures = 2\n",
        &[("BREAKERBOX__SOMEONE_ELSE_ENTIRELY__OPEN_FOR", "2s")],
    );
    assert!(
        e.starts_with("environment variable BREAKERBOX__SOMEONE_ELSE_ENTIRELY__OPEN_FOR: names no known breaker or keyed family (`SOMEONE_ELSE_ENTIRELY`). A breaker"),
        "{e}"
    );
    let mine = registry().get_or_create("load-mine", Config::default);
    assert_eq!(mine.config().failures(), Some(5));
}

/// A variable applies to a known breaker the file has no table for, over its own config.
#[test]
fn a_variable_applies_to_a_breaker_without_a_table() {
    let made = registry().get_or_create("load-untabled", || {
        Config::builder().failures(3).build().unwrap()
    });
    let names = load(
        "[other]\nx = 1\n",
        &[("BREAKERBOX__LOAD_UNTABLED__OPEN_FOR", "2s")],
    )
    .unwrap();
    assert_eq!(names, ["load-untabled"]);
    assert_eq!(made.config().open_for(), Duration::from_secs(2));
    // The code's own key stays.
    assert_eq!(made.config().failures(), Some(3));
}

/// The file's own mistake is the error, whatever the environment holds.
#[test]
fn env_never_hides_the_files_own_error() {
    let e = load(
        "[breakers.load-typo]\ndynamic = true\nfailurs = 3\n",
        &[
            ("BREAKERBOX__NO_SUCH_BREAKER__FAILURES", "3"),
            ("BREAKERBOX__LOAD_TYPO__FAILURES", "zero"),
            ("BREAKERBOX__LOAD_TYPO__COLOUR", "red"),
            ("BREAKERBOX__MALFORMED", "1"),
        ],
    )
    .unwrap_err();
    assert_eq!(e.line(), Some(3));
    assert_eq!(e.key(), Some("failurs"));
    assert!(
        e.to_string().starts_with(
            "breakers.toml:3: [breakers.load-typo] `failurs` unknown key; did you mean `failures`?"
        ),
        "{e}"
    );
}

#[cfg(unix)]
#[test]
fn a_value_that_is_not_utf8_names_the_variable() {
    use std::os::unix::ffi::OsStringExt;
    let env = vec![(
        OsString::from("BREAKERBOX__LOAD_BYTES__FAILURES"),
        OsString::from_vec(vec![b'3', 0xff]),
    )];
    let e = registry()
        .load_with_env(
            Path::new("breakers.toml"),
            "[breakers.load-bytes]\ndynamic = true\n",
            env,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "environment variable BREAKERBOX__LOAD_BYTES__FAILURES: its value is not valid UTF-8; write it as text, like `30s` or `5`"
    );
    // A name that is not UTF-8 and does not start with our prefix is not ours.
    let env = vec![(OsString::from_vec(vec![b'B', 0xff]), OsString::from("1"))];
    registry()
        .load_with_env(Path::new("b.toml"), "", env)
        .unwrap();
    // One that starts with it is, and cannot be read: an error rather than ignored.
    let mut name = b"BREAKERBOX__LOAD_BYTES__FAIL".to_vec();
    name.push(0xff);
    let env = vec![(OsString::from_vec(name), OsString::from("1"))];
    let e = registry()
        .load_with_env(Path::new("b.toml"), "", env)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "environment variable BREAKERBOX__LOAD_BYTES__FAIL\u{fffd}: its name is not valid UTF-8; write it `BREAKERBOX__<NAME>__<KEY>` in ASCII"
    );
}

#[test]
fn huge_values_give_short_messages() {
    let huge = "9".repeat(200_000);
    for (text, env) in [
        (format!("[breakers.h]\nopen_for = \"{huge}x\"\n"), None),
        (format!("[breakers.h]\nopen_for = \"{huge}s\"\n"), None),
        (format!("[breakers.h]\n{huge}x = 1\n"), None),
        (format!("[breakers.\"{huge}\"]\nfailures = 1\n"), None),
        (format!("[breakers]\n\"{huge}\" = 1\n"), None),
        (
            "[breakers.load-huge]\ndynamic = true\n".to_owned(),
            Some(("BREAKERBOX__LOAD_HUGE__OPEN_FOR", format!("{huge} s"))),
        ),
        (
            "[breakers.load-huge]\ndynamic = true\n".to_owned(),
            Some(("BREAKERBOX__LOAD_HUGE__FAILURES", huge.clone())),
        ),
    ] {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let e = err(&text, &env);
        // A name is shown up to 256 bytes, a key or value up to 32 characters.
        assert!(e.len() < 700, "{} bytes: {}", e.len(), &e[..700]);
    }
    let e = err(&format!("[breakers.h]\nopen_for = \"{huge}x\"\n"), &[]);
    assert!(e.contains("…\" (200001 bytes)"), "{e}");
}

/// A variable's name, up to 256 bytes, is shown whole: the user can tell which one is meant.
#[cfg(unix)]
#[test]
fn a_long_variable_name_is_shown_whole_and_only_a_longer_one_cut() {
    use std::os::unix::ffi::OsStringExt;
    let bad = |var: &str| {
        let env = vec![(OsString::from(var), OsString::from_vec(vec![b'3', 0xff]))];
        registry()
            .load_with_env(Path::new("breakers.toml"), "", env)
            .unwrap_err()
            .to_string()
    };
    let name = format!("LOAD_CHECK_XY_{}", "INVENTORY_".repeat(22));
    let var = format!("BREAKERBOX__{name}__FAILURES");
    assert_eq!(var.len(), 256);
    assert_eq!(
        bad(&var),
        format!(
            "environment variable {var}: its value is not valid UTF-8; write it as text, like `30s` or `5`"
        )
    );
    let longer = format!("{var}X");
    let e = bad(&longer);
    assert!(
        e.starts_with(&format!("environment variable {var}… (257 bytes): ")),
        "{e}"
    );
}

/// Two variables for one key of one breaker are an error: which would win depends on their
/// order.
#[test]
fn two_variables_for_one_key_are_an_error() {
    let e = err(
        "[breakers.load-twice]\ndynamic = true\n",
        &[
            ("BREAKERBOX__LOAD_TWICE__OPEN_FOR", "2s"),
            ("BREAKERBOX__load_twice__open_for", "3s"),
        ],
    );
    assert_eq!(
        e,
        "environment variable BREAKERBOX__load_twice__open_for: sets `open_for` of 'load-twice', and so does BREAKERBOX__LOAD_TWICE__OPEN_FOR; keep one of them"
    );
}

/// A breaker's name up to 256 bytes is shown whole, in a table's error and a variable's: an
/// attribute's default name is its module path, often longer than a key.
#[test]
fn a_long_breaker_name_is_shown_whole_in_messages() {
    let name = format!("load-long-{}", "inventory-".repeat(20));
    assert_eq!(name.len(), 210);
    let e = err(
        &format!("[breakers.{name}]\ndynamic = true\nfailures = 0\n"),
        &[],
    );
    assert!(
        e.starts_with(&format!("breakers.toml:3: [breakers.{name}] `failures` ")),
        "{e}"
    );
    let var = format!("BREAKERBOX__{}__SUCCESSES", super::env::env_name(&name));
    let e = err(
        &format!("[breakers.{name}]\ndynamic = true\n"),
        &[(&var, "3")],
    );
    assert!(
        e.starts_with(&format!(
            "environment variable {var}: [breakers.{name}] `successes` must be from 1 to"
        )),
        "{e}"
    );
}

/// Spring's relaxed binding writes `SPRING_…` with single underscores and in any case: a
/// variable of ours in lower case applies, and one with single underscores that ends in a
/// key is an error that shows it written right. Other `BREAKERBOX_…` variables are the
/// application's.
#[test]
fn a_variable_in_lower_case_applies_and_one_with_single_underscores_is_an_error() {
    let names = load(
        "[breakers.load-relaxed]\ndynamic = true\n",
        &[("breakerbox__load_relaxed__open_for", "5s")],
    )
    .unwrap();
    assert_eq!(names, ["load-relaxed"]);
    let b = registry().get_or_create("load-relaxed", Config::default);
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    for (var, fixed) in [
        (
            "BREAKERBOX_LOAD_RELAXED_OPEN_FOR",
            "BREAKERBOX__LOAD_RELAXED__OPEN_FOR",
        ),
        (
            "breakerbox_load_relaxed_max_open_for",
            "BREAKERBOX__LOAD_RELAXED__MAX_OPEN_FOR",
        ),
        (
            "BREAKERBOX_LOAD_RELAXED__FAILURES",
            "BREAKERBOX__LOAD_RELAXED__FAILURES",
        ),
    ] {
        assert_eq!(
            err("[breakers.load-relaxed]\ndynamic = true\n", &[(var, "5s")]),
            format!(
                "environment variable {var}: a breaker's key is set by `BREAKERBOX__<NAME>__<KEY>`, with two underscores after `BREAKERBOX` and before the key; write `{fixed}`"
            )
        );
    }
    // Not a key at the end: the application's own variable.
    load(
        "",
        &[
            ("BREAKERBOX_TEST_REDIS_URL", "redis://127.0.0.1:1/"),
            ("BREAKERBOX_OPEN_FOR", "5s"),
        ],
    )
    .unwrap();
}

/// `BREAKERBOX__USERS_OPEN_FOR`: the prefix right, one underscore before the key. The message
/// shows the variable written right.
#[test]
fn a_variable_with_one_underscore_before_its_key_is_shown_written_right() {
    for (var, fixed) in [
        (
            "BREAKERBOX__LOAD_APART_OPEN_FOR",
            "BREAKERBOX__LOAD_APART__OPEN_FOR",
        ),
        (
            "BREAKERBOX__LOAD_APART_MAX_OPEN_FOR",
            "BREAKERBOX__LOAD_APART__MAX_OPEN_FOR",
        ),
    ] {
        assert_eq!(
            err("[breakers.load-apart]\ndynamic = true\n", &[(var, "5s")]),
            format!(
                "environment variable {var}: a breaker's key follows its name after two underscores; write `{fixed}`"
            )
        );
    }
}

/// A whole number past 128 bits is out of its key's range, in a file and in a variable alike:
/// not "must be a whole number, got an integer" (nor "got a float").
#[test]
fn a_whole_number_past_128_bits_is_out_of_range() {
    let big = "9".repeat(39);
    let shown = format!("{}… (39 characters)", "9".repeat(32));
    let text = format!("[breakers.load-big]\ndynamic = true\nfailures = {big}\n");
    assert_eq!(
        err(&text, &[]),
        format!(
            "breakers.toml:3: [breakers.load-big] `failures` must be a whole number from 1 to \
             4294967295, got {shown}"
        )
    );
    let text = "[breakers.load-big]\ndynamic = true\n";
    assert_eq!(
        err(text, &[("BREAKERBOX__LOAD_BIG__FAILURE_RATE", &big)]),
        format!(
            "environment variable BREAKERBOX__LOAD_BIG__FAILURE_RATE: `failure_rate` must be a \
             percentage from 1 to 100, got {shown}"
        )
    );
}

/// A value in quotes, as a `.env` or compose file may keep them, reads as the value inside.
#[test]
fn a_quoted_variable_value_reads_as_the_value_inside() {
    let file = "[breakers.env-q]\ndynamic = true\n";
    let env = [
        ("BREAKERBOX__ENV_Q__OPEN_FOR", "\"5s\""),
        ("BREAKERBOX__ENV_Q__FAILURES", "'3'"),
    ];
    let origin = Path::new("env-quoted.toml");
    registry()
        .load_with_env(origin, file, env_of(&env))
        .unwrap();
    let b = registry().get_or_create("env-q", Config::default);
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    assert_eq!(b.config().failures(), Some(3));
}
