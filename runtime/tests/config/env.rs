//! Environment variables over config files, with the real environment: the test sets them
//! alone in a process of its own (`crate::alone`), so no other load reads them.
#![cfg(feature = "serde")]

use breakerbox_runtime::{Config, LoadError, registry};

/// A variable reaches a breaker with a `::` name (the attribute's default names), a variable
/// that names no breaker fails every load that reads it, and a value that is not UTF-8 names
/// its variable.
#[test]
fn environment_overrides() {
    crate::alone::alone(
        concat!(module_path!(), "::environment_overrides"),
        environment_overrides_alone,
    );
}

fn environment_overrides_alone() {
    // SAFETY: the only test of this process: nothing else reads or writes the environment.
    unsafe {
        std::env::set_var("BREAKERBOX__TEXT_APP__CLIENT__FETCH_USER__FAILURES", "7");
    }
    let file = "[breakers.\"text_app::client::fetch_user\"]\ndynamic = true\nfailures = 2\n";
    registry().load_toml_str("env.toml", file).unwrap();
    let b = registry().get_or_create("text_app::client::fetch_user", Config::default);
    assert_eq!(b.config().failures(), Some(7));

    // The breaker is known now: a file without its table loads, and the variable still
    // reaches it.
    registry()
        .load_toml_str(
            "env.toml",
            "[breakers.text-mine]\ndynamic = true\nfailures = 2\n",
        )
        .unwrap();
    assert_eq!(b.config().failures(), Some(7));

    // A variable for a breaker nobody knows fails the load, and the file's own mistake comes
    // first.
    // SAFETY: as above.
    unsafe { std::env::set_var("BREAKERBOX__TEXT_ELSEWHERE__FAILURES", "3") };
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
    // SAFETY: as above.
    unsafe { std::env::remove_var("BREAKERBOX__TEXT_ELSEWHERE__FAILURES") };

    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        // SAFETY: as above.
        unsafe {
            std::env::set_var(
                "BREAKERBOX__TEXT_BYTES__FAILURES",
                std::ffi::OsString::from_vec(vec![b'3', 0xff]),
            );
        }
        let e = registry()
            .load_toml_str("env.toml", "[breakers.text-bytes]\ndynamic = true\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("environment variable BREAKERBOX__TEXT_BYTES__FAILURES: its value is not valid UTF-8"),
            "{e}"
        );
    }
}
