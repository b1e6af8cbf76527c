//! Environment variables over config files, with the real environment: each test runs alone
//! in a process of its own that starts with its variables (`crate::alone::alone_with_env`),
//! so no other load reads them and nothing sets a variable while the process runs.
#![cfg(feature = "serde")]

use breakerbox_runtime::{Config, LoadError, registry};

use crate::alone::alone_with_env;

/// A variable reaches a breaker with a `::` name (the attribute's default names) over the
/// file's table, and still reaches it from a file without that table once the breaker is
/// known.
#[test]
fn a_variable_overrides_the_file_for_a_breaker_named_with_colons() {
    alone_with_env(
        concat!(
            module_path!(),
            "::a_variable_overrides_the_file_for_a_breaker_named_with_colons"
        ),
        &[("BREAKERBOX__TEXT_APP__CLIENT__FETCH_USER__FAILURES", "7")],
        || {
            let file =
                "[breakers.\"text_app::client::fetch_user\"]\ndynamic = true\nfailures = 2\n";
            registry().load_toml_str("env.toml", file).unwrap();
            let b = registry().get_or_create("text_app::client::fetch_user", Config::default);
            assert_eq!(b.config().failures(), Some(7));

            // The breaker is known now: a file without its table loads, and the variable
            // still reaches it.
            registry()
                .load_toml_str(
                    "env.toml",
                    "[breakers.text-mine]\ndynamic = true\nfailures = 2\n",
                )
                .unwrap();
            assert_eq!(b.config().failures(), Some(7));
        },
    );
}

/// A variable for a breaker nobody knows fails the load, and a mistake in the file is
/// reported before it.
#[test]
fn a_variable_for_an_unknown_breaker_fails_the_load_after_the_files_own_mistakes() {
    alone_with_env(
        concat!(
            module_path!(),
            "::a_variable_for_an_unknown_breaker_fails_the_load_after_the_files_own_mistakes"
        ),
        &[("BREAKERBOX__TEXT_ELSEWHERE__FAILURES", "3")],
        || {
            let e = registry()
                .load_toml_str("env.toml", "[breakers.text-other]\ndynamic = true\n")
                .unwrap_err();
            assert!(
                matches!(&e, LoadError::Env { var, .. } if var == "BREAKERBOX__TEXT_ELSEWHERE__FAILURES"),
                "{e}"
            );
            let e = registry()
                .load_toml_str(
                    "env.toml",
                    "[breakers.text-typo]\ndynamic = true\nfailurs = 2\n",
                )
                .unwrap_err();
            assert_eq!(e.line(), Some(3));
            assert_eq!(e.key(), Some("failurs"));
        },
    );
}

/// A value that is not UTF-8 fails the load with an error naming its variable.
#[cfg(unix)]
#[test]
fn a_value_that_is_not_utf8_is_an_error_naming_its_variable() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    alone_with_env(
        concat!(
            module_path!(),
            "::a_value_that_is_not_utf8_is_an_error_naming_its_variable"
        ),
        &[(
            "BREAKERBOX__TEXT_BYTES__FAILURES",
            OsString::from_vec(vec![b'3', 0xff]),
        )],
        || {
            let e = registry()
                .load_toml_str("env.toml", "[breakers.text-bytes]\ndynamic = true\n")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("environment variable BREAKERBOX__TEXT_BYTES__FAILURES: its value is not valid UTF-8"),
                "{e}"
            );
        },
    );
}
