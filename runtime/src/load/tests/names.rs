//! Which breakers a file may configure, and when.

use super::*;

/// A misspelt table name is an error, not a config nobody reads.
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
        "breakers.toml:4: no breaker named `load-inventroy`; did you mean `load-inventory`? No `#[circuit_breaker]` function, keyed family or breaker has that name; if the program makes it at run time (with `registry().get_or_create`, `registry().family` or `Breaker::new`), say `dynamic = true` in its table."
    );
    assert!(
        matches!(&e, LoadError::UnknownBreaker { suggestion: Some(s), line: 4, .. } if s == "load-inventory")
    );
    // Nothing close: no suggestion.
    let e = err("[breakers.load-zzzzzzzz-qq]\nfailures = 2\n", &[]);
    assert!(
        e.starts_with(
            "breakers.toml:1: no breaker named `load-zzzzzzzz-qq`. No `#[circuit_breaker]`"
        ),
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

/// A file loaded after the breaker exists (any `registry().get`, a metrics exporter, an
/// admin page creates annotated ones) changes it live, keeping its state.
#[test]
fn a_load_after_the_breaker_exists_applies_it_live_and_keeps_its_state() {
    let b = registry().get_or_create("load-exists", || {
        Config::builder().failures(3).build().unwrap()
    });
    let _ = b.call(|| Err::<(), _>("down"));
    let names = load(
        "[breakers.load-fresh]\ndynamic = true\nfailures = 2\n\n[breakers.load-exists]\nfailures = 2\n",
        &[],
    )
    .unwrap();
    assert_eq!(names, ["load-exists", "load-fresh"]);
    assert_eq!(b.config().failures(), Some(2));
    // The failure before the load counts: one more is the second of the streak.
    let _ = b.call(|| Err::<(), _>("down"));
    assert_eq!(b.state(), crate::State::Open);
    // A change a live breaker cannot take is an error, and nothing is applied.
    let e = load(
        "[breakers.load-fresh2]\ndynamic = true\nfailures = 2\n\n[breakers.load-exists]\nslow = \"1s\"\n",
        &[],
    )
    .unwrap_err();
    assert!(matches!(e, LoadError::NotReloadable { line: 5, .. }), "{e}");
    let fresh = registry().get_or_create("load-fresh2", Config::default);
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
