//! `load_toml` and the environment overrides, odd TOML
//! shapes, malformed variables, loads racing creation.

use std::ffi::OsString;
use std::panic::{AssertUnwindSafe, catch_unwind};

use breakerbox::{Config, LoadError, registry};

use crate::client;
use crate::support::{S, alone_with_env};

#[test]
fn env_override_addresses_the_attributes_default_name() {
    alone_with_env(
        concat!(
            module_path!(),
            "::env_override_addresses_the_attributes_default_name"
        ),
        &[
            ("BREAKERBOX__CONFIG__CLIENT__FETCH_USER__FAILURES", "3"),
            ("BREAKERBOX__CONFIG__CLIENT__FETCH_USER__open_for", "7s"),
        ],
        || {
            let name = "config::client::fetch_user";
            let file = format!("[breakers.\"{name}\"]\ndynamic = true\nfailures = 9\n");
            let names = registry()
                .load_toml_str("loading.toml", &file)
                .expect("loads");
            assert_eq!(names, [name]);
            assert_eq!(client::fetch_user(true).unwrap(), 1);
            let b = registry().get(name).expect("the attribute's default name");
            assert_eq!(
                b.config().failures(),
                Some(3),
                "the environment wins over the file"
            );
            assert_eq!(b.config().open_for(), 7 * S);
        },
    );
}

#[test]
fn env_override_for_names_ending_or_starting_in_punctuation() {
    alone_with_env(
        concat!(
            module_path!(),
            "::env_override_for_names_ending_or_starting_in_punctuation"
        ),
        &[
            ("BREAKERBOX__ADV_SVC___FAILURES", "4"),
            ("BREAKERBOX____ADV_LEAD__FAILURES", "6"),
            ("BREAKERBOX__ADV_COLONS____FAILURES", "8"),
        ],
        || {
            let file = "[breakers.\"adv-svc-\"]\ndynamic = true\n\
                        [breakers.\"::adv-lead\"]\ndynamic = true\n\
                        [breakers.\"adv.colons::\"]\ndynamic = true\n";
            let mut names = registry().load_toml_str("d06b.toml", file).expect("loads");
            names.sort();
            assert_eq!(names, ["::adv-lead", "adv-svc-", "adv.colons::"]);
            let f = |n: &str| {
                registry()
                    .get_or_create(n, Config::default)
                    .config()
                    .failures()
            };
            assert_eq!(f("adv-svc-"), Some(4));
            assert_eq!(f("::adv-lead"), Some(6));
            assert_eq!(f("adv.colons::"), Some(8));
        },
    );
}

#[test]
fn config_env_override_for_an_unknown_breaker_is_an_error_that_does_not_hide_the_files() {
    alone_with_env(
        concat!(
            module_path!(),
            "::config_env_override_for_an_unknown_breaker_is_an_error_that_does_not_hide_the_files"
        ),
        &[("BREAKERBOX__ADV_ELSEWHERE__FAILURES", "3")],
        || {
            let err = registry()
                .load_toml_str(
                    "other.toml",
                    "[breakers.adv-not-elsewhere]\ndynamic = true\nfailures = 2\n",
                )
                .unwrap_err();
            assert!(
                matches!(&err, LoadError::Env { var, .. } if var == "BREAKERBOX__ADV_ELSEWHERE__FAILURES"),
                "{err}"
            );
            let err = registry()
                .load_toml_str(
                    "typo.toml",
                    "[breakers.adv-typo]\ndynamic = true\nfailurs = 2\n",
                )
                .unwrap_err();
            assert_eq!(err.line(), Some(3), "{err}");
            assert_eq!(err.key(), Some("failurs"), "{err}");
            assert!(err.to_string().contains("failures"), "did you mean: {err}");
        },
    );
}

#[test]
fn config_misspelt_table_name_is_an_error_with_a_suggestion() {
    registry().get_or_create("adv-inventory", Config::default);
    let err = registry()
        .load_toml_str("spell.toml", "[breakers.adv-inventroy]\nfailures = 2\n")
        .unwrap_err();
    match &err {
        LoadError::UnknownBreaker {
            suggestion, line, ..
        } => {
            assert_eq!(suggestion.as_deref(), Some("adv-inventory"));
            assert_eq!(*line, 1);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn config_non_utf8_env_value_is_a_named_error() {
    use std::os::unix::ffi::OsStringExt;
    alone_with_env(
        concat!(
            module_path!(),
            "::config_non_utf8_env_value_is_a_named_error"
        ),
        &[(
            "BREAKERBOX__ADV_BYTES__FAILURES",
            OsString::from_vec(vec![b'3', 0xff]),
        )],
        || {
            let err = registry()
                .load_toml_str("bytes.toml", "[breakers.adv-bytes]\ndynamic = true\n")
                .unwrap_err();
            match &err {
                LoadError::Env { var, .. } => assert_eq!(var, "BREAKERBOX__ADV_BYTES__FAILURES"),
                other => panic!("{other:?}"),
            }
            assert!(err.to_string().contains("UTF-8"), "{err}");
        },
    );
}

#[test]
fn config_error_messages_do_not_echo_huge_values() {
    let huge = "é".repeat(1 << 19); // 1 MiB of two-byte characters: a cut must not split one
    let file = format!("[breakers.adv-huge]\ndynamic = true\nopen_for = \"{huge}\"\n");
    let err = registry().load_toml_str("huge.toml", &file).unwrap_err();
    let text = err.to_string();
    assert!(text.len() < 1_000, "a {} byte message", text.len());
    assert_eq!(err.line(), Some(3));
    let name = "ü".repeat(5_000);
    let file = format!("[breakers.\"{name}\"]\ndynamic = true\nfailures = \"ß\"\n");
    let err = registry().load_toml_str("name.toml", &file).unwrap_err();
    assert!(err.to_string().len() < 1_000, "{}", err.to_string().len());
}

#[test]
fn config_messages_do_not_repeat_the_key() {
    let err = registry()
        .load_toml_str(
            "t.toml",
            "[breakers.adv-classify]\ndynamic = true\nclassify = \"by_status\"\n",
        )
        .unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("`classify` `classify`"), "{text}");
    assert!(text.contains("classify"), "{text}");
}

#[test]
fn a_2mb_file_loads_and_names_the_right_line_at_its_end() {
    let mut text = String::with_capacity(2_200_000);
    let mut n = 0;
    while text.len() < 2_000_000 {
        // Multi-byte comments and CRLF line ends: offsets are bytes, lines are lines.
        text.push_str(&format!(
            "# ünïcödé {n}\r\n[breakers.adv-big-{n}]\r\ndynamic = true\r\nfailures = {}\r\nopen_for = \"{}s\"\r\n",
            n % 100 + 1,
            n % 60 + 1
        ));
        n += 1;
    }
    let lines = text.matches('\n').count();
    let names = registry()
        .load_toml_str("big.toml", &text)
        .expect("a 2 MB file loads");
    assert_eq!(names.len(), n);
    let b = registry().get_or_create("adv-big-12345", Config::default);
    assert_eq!(b.config().failures(), Some(12345 % 100 + 1));
    // The same size with a mistake on its last line.
    let mut bad = text.replace("adv-big-", "adv-bad-");
    bad.push_str("[breakers.adv-bad-last]\r\ndynamic = true\r\nfailures = \"many\"\r\n");
    let err = registry().load_toml_str("bad.toml", &bad).unwrap_err();
    assert_eq!(err.line(), Some(lines + 3), "{err}");
    assert_eq!(err.key(), Some("failures"));
    // All or nothing: none of the bad file's breakers was configured.
    let b = registry().get_or_create("adv-bad-7", Config::default);
    assert_eq!(b.config().failures(), Config::default().failures());
}

// Odd TOML shapes and malformed variables: an error or a load, never a panic.
#[test]
fn load_odd_toml_shapes_never_panic() {
    let files = [
        "[breakers]\nadv-inline = { dynamic = true, failures = \"bad\" }\n",
        "breakers.adv-dotted.dynamic = true\nbreakers.adv-dotted.failures = \"bad\"\n",
        "[[breakers]]\nfailures = 1\n",
        "breakers = 5\n",
        "[breakers.adv-ml]\ndynamic = true\nopen_for = \"\"\"\n5s\n\"\"\"\n",
        "[breakers.adv-ml2]\ndynamic = true\nopen_for = '''\n\n'''\n",
        "[breakers.\"\"]\ndynamic = true\nfailures = 1\n",
        "[breakers.adv-nested.deeper]\nfailures = 1\n",
        "[breakers.adv-arr]\ndynamic = true\nfailures = [1, 2]\n",
        "[breakers.adv-neg]\ndynamic = true\nfailures = -1\nopen_for = -5\n",
        "[breakers.adv-big]\ndynamic = true\nfailures = 99999999999999999999999999\n",
        "[breakers.adv-huge-dur]\ndynamic = true\nopen_for = \"99999999999999999999999999h\"\n",
        "[breakers.adv-float]\ndynamic = true\nbackoff = nan\njitter = inf\n",
        "\u{feff}[breakers.adv-bom]\ndynamic = true\nfailures = \"x\"\n",
        "[breakers.adv-tab]\r\n\tdynamic = true\r\n\tfailures = \"é\u{301}\"\r\n",
        "[breakers.adv-unterminated]\ndynamic = true\nfailures = \"x\n",
        "",
        "\n\n\n",
    ];
    for (i, file) in files.iter().enumerate() {
        let r = catch_unwind(AssertUnwindSafe(|| {
            registry().load_toml_str(format!("odd{i}.toml"), file)
        }));
        let r = r.unwrap_or_else(|_| panic!("file {i} panicked: {file:?}"));
        if let Err(e) = &r {
            let text = e.to_string();
            assert!(!text.is_empty() && text.len() < 2_000, "file {i}: {text}");
            if let Some(line) = e.line() {
                assert!(
                    line >= 1 && line <= file.lines().count().max(1),
                    "file {i}: line {line}"
                );
            }
        }
    }
}

/// Variable names that are malformed: no breaker name, no key, or both empty.
const MALFORMED: [&str; 5] = [
    "BREAKERBOX__",
    "BREAKERBOX____",
    "BREAKERBOX__ADV_M__",
    "BREAKERBOX____FAILURES",
    "BREAKERBOX__ADV_M__FAILURES__",
];

/// Each variable in a process of its own that starts with it alone.
#[test]
fn malformed_variables_are_errors_not_panics() {
    for var in MALFORMED {
        alone_with_env(
            concat!(
                module_path!(),
                "::malformed_variables_are_errors_not_panics"
            ),
            &[(var, "1")],
            || {
                // The process runs this loop too: the turn of the one variable it started
                // with checks it, the others' turns nothing.
                let set: Vec<&str> = MALFORMED
                    .into_iter()
                    .filter(|v| std::env::var_os(v).is_some())
                    .collect();
                assert_eq!(set.len(), 1, "{set:?}");
                if set[0] != var {
                    return;
                }
                let r = catch_unwind(AssertUnwindSafe(|| {
                    registry().load_toml_str("m.toml", "[breakers.adv-m]\ndynamic = true\n")
                }))
                .unwrap_or_else(|_| panic!("{var} panicked"));
                match r {
                    Err(LoadError::Env { var: v, .. }) => assert_eq!(v, var),
                    other => panic!("{var}: {other:?}"),
                }
            },
        );
    }
}

#[test]
fn load_racing_creation_never_silently_misses_a_breaker() {
    for round in 0..20 {
        let names: Vec<String> = (0..300).map(|i| format!("adv-lr{round}-{i:04}")).collect();
        let mut file = String::new();
        for n in &names {
            file.push_str(&format!("[breakers.{n}]\ndynamic = true\nfailures = 7\n"));
        }
        let barrier = std::sync::Barrier::new(2);
        let result = std::thread::scope(|s| {
            s.spawn(|| {
                barrier.wait();
                for n in names.iter().rev() {
                    registry().get_or_create(n, || Config::builder().failures(3).build().unwrap());
                }
            });
            barrier.wait();
            registry().load_toml_str(format!("race{round}.toml"), &file)
        });
        let failures = |n: &str| registry().get(n).unwrap().config().failures();
        match result {
            Ok(loaded) => {
                assert_eq!(loaded.len(), names.len());
                for n in &names {
                    assert_eq!(failures(n), Some(7), "round {round}: {n} missed the file");
                }
            }
            // Reported, not missed: the breaker named exists with the creator's config. Which
            // tables before it stay configured depends on when the race was seen (before any
            // table was configured: none; while configuring: those before it), so the test
            // asserts only what the docs promise in both cases.
            Err(LoadError::AlreadyCreated { breaker, .. }) => {
                assert!(names.contains(&breaker), "round {round}: {breaker}");
                assert_eq!(failures(&breaker), Some(3), "round {round}: {breaker}");
            }
            Err(other) => panic!("round {round}: {other}"),
        }
    }
}
