//! Which breakers a file may configure, and when.

use super::*;

/// Issue 10: a misspelt table name is an error, not a config nobody reads.
#[test]
fn a_table_must_name_a_known_breaker_or_say_dynamic() {
    let _ = registry().get_or_create("load-inventory", Config::default);
    let e = load(
        "[breakers.load-fine]\ndynamic = true\n\n[breakers.load-inventroy]\nfailures = 2\n",
        &[],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "breakers.toml:4: no breaker named `load-inventroy`; did you mean `load-inventory`? A breaker that is only created at run time (`get_or_create`) needs `dynamic = true` in its table."
    );
    assert!(
        matches!(&e, LoadError::UnknownBreaker { suggestion: Some(s), line: 4, .. } if s == "load-inventory")
    );
    // Nothing close: no suggestion.
    let e = err("[breakers.load-zzzzzzzz-qq]\nfailures = 2\n", &[]);
    assert!(
        e.starts_with("breakers.toml:1: no breaker named `load-zzzzzzzz-qq`. A breaker"),
        "{e}"
    );
    // All or nothing: the dynamic table was not configured either.
    let fine = registry().get_or_create("load-fine", || {
        Config::builder().failures(9).build().unwrap()
    });
    assert_eq!(fine.config().failures(), Some(9));
    // `dynamic` is a boolean.
    assert_eq!(
        err("[breakers.load-dyn]\ndynamic = \"yes\"\n", &[]),
        "breakers.toml:2: [breakers.load-dyn] `dynamic` must be `true` (the breaker is created at run time) or `false`"
    );
    assert!(
        err("[breakers.load-dyn]\ndynamic = false\n", &[])
            .starts_with("breakers.toml:1: no breaker named `load-dyn`")
    );
}

#[test]
fn an_existing_breaker_is_not_reconfigured_and_nothing_is() {
    let _ = registry().get_or_create("load-exists", Config::default);
    let e = load(
        "[breakers.load-fresh]\ndynamic = true\nfailures = 2\n\n[breakers.load-exists]\nfailures = 2\n",
        &[],
    )
    .unwrap_err();
    assert!(
        matches!(e, LoadError::AlreadyCreated { line: 5, .. }),
        "{e}"
    );
    // All or nothing: the good table was not applied either.
    let fresh = registry().get_or_create("load-fresh", Config::default);
    assert_eq!(fresh.config().failures(), Some(5));
}

#[test]
fn an_error_leaves_every_breaker_to_its_call_site() {
    let _ = load(
        "[breakers.load-half]\ndynamic = true\nfailures = 2\n[breakers.load-half2]\ndynamic = true\nfailures = 0\n",
        &[],
    );
    let half = registry().get_or_create("load-half", || {
        Config::builder().failures(9).build().unwrap()
    });
    assert_eq!(half.config().failures(), Some(9));
}

/// A breaker created while the file loads either gets the file's config or the load
/// says it could not: never `Ok` with a breaker that silently kept its call site's. (A
/// stress check: the window between the check and `configure` is narrow; what closes it is
/// that the load turns `configure`'s refusal into an error rather than ignoring it.)
#[test]
fn a_breaker_created_during_the_load_is_never_silently_missed() {
    for round in 0..20 {
        let names: Vec<String> = (0..300).map(|i| format!("load-race-{round}-{i}")).collect();
        let text: String = names
            .iter()
            .map(|n| format!("[breakers.{n}]\ndynamic = true\nfailures = 2\n"))
            .collect();
        // The table configured last, created at some point during the load.
        let last = names.iter().max().unwrap().clone();
        let creator = std::thread::spawn(move || registry().get_or_create(&last, Config::default));
        let loaded = load(&text, &[]);
        let created = creator.join().unwrap();
        match loaded {
            Ok(names) => {
                assert!(names.contains(&created.name().to_owned()));
                assert_eq!(created.config().failures(), Some(2), "round {round}");
            }
            Err(e) => assert!(matches!(e, LoadError::AlreadyCreated { .. }), "{e}"),
        }
    }
}
