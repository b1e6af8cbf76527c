//! The loader's tests: the file's tables here; the environment, names and scale in `tests/`.

use super::file::read;
use super::load_error::LoadError;
use super::parse::Lines;
use crate::config::Config;
use crate::registry::registry;
use core::time::Duration;
use std::ffi::OsString;
use std::path::Path;

fn env_of(env: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    env.iter().map(|(k, v)| (k.into(), v.into())).collect()
}

fn load(text: &str, env: &[(&str, &str)]) -> Result<Vec<String>, LoadError> {
    registry().load_with_env(Path::new("breakers.toml"), text, env_of(env))
}

fn err(text: &str, env: &[(&str, &str)]) -> String {
    load(text, env).unwrap_err().to_string()
}

mod env;
mod layers;
mod names;
mod scale;

#[test]
fn loads_tables_and_env_overrides_before_first_use() {
    let text = r#"
[server]
port = 8080

[breakers.load-users]
dynamic = true
failures = 3
open_for = "30s"

[breakers.load-payments]
dynamic = true
failure_rate = 50
window = "10s"
min_calls = 20
backoff = 2
"#;
    let names = load(
        text,
        &[
            ("BREAKERBOX__LOAD_USERS__OPEN_FOR", "5s"),
            ("BREAKERBOX__load_payments__window", "100"),
            ("UNRELATED", "x"),
        ],
    )
    .unwrap();
    assert_eq!(names, ["load-payments", "load-users"]);
    let users = registry().get_or_create("load-users", Config::default);
    assert_eq!(users.config().failures(), Some(3));
    assert_eq!(users.config().open_for(), Duration::from_secs(5));
    let payments = registry().get_or_create("load-payments", Config::default);
    assert_eq!(payments.config().failure_rate(), Some(50));
    assert_eq!(payments.config().window(), crate::Window::Calls(100));
    assert_eq!(payments.config().min_calls(), 20);
    assert_eq!(payments.config().backoff(), 2.0);
}

#[test]
fn a_table_configures_every_key_of_a_family_created_after_it() {
    let text = r#"
[breakers.load-family]
dynamic = true
failures = 2
open_for = "30s"
max_keys = 7
idle_for = "1m"
"#;
    assert_eq!(load(text, &[]).unwrap(), ["load-family"]);
    let family = registry()
        .family::<String>("load-family", || {
            Config::builder().failures(9).build().unwrap()
        })
        .unwrap();
    assert_eq!(family.config().failures(), Some(2));
    assert_eq!(family.config().max_keys(), 7);
    assert_eq!(family.config().idle_for(), Duration::from_secs(60));
    for _ in 0..2 {
        let _ = family.call("down", || Err::<(), _>("refused"));
    }
    assert_eq!(family.get("down").unwrap().state(), crate::State::Open);
    assert_eq!(family.breaker("up").state(), crate::State::Closed);
    assert_eq!(family.get("up").unwrap().config().failures(), Some(2));
    // Once the family exists, a load changes it live: its keys keep their states.
    load(&text.replace("failures = 2", "failures = 4"), &[]).unwrap();
    assert_eq!(family.get("up").unwrap().config().failures(), Some(4));
    assert_eq!(family.get("down").unwrap().state(), crate::State::Open);
    // A family's keys are validated as any table's.
    let e = err(
        "[breakers.load-family-bad]
dynamic = true
max_key = 3
",
        &[],
    );
    assert!(
        e.contains("`max_key` unknown key; did you mean `max_keys`?"),
        "{e}"
    );
    let e = err(
        "[breakers.load-family-bad]
dynamic = true
idle_for = 5
",
        &[],
    );
    assert!(e.contains("`idle_for`"), "{e}");
}

#[test]
fn a_key_table_configures_one_key_over_its_family() {
    let text = r#"
[breakers.load-keyed]
dynamic = true
failures = 2
open_for = "30s"

[breakers.load-keyed.keys."slow-host.example"]
failures = 1
open_for = "5m"
"#;
    assert_eq!(load(text, &[]).unwrap(), ["load-keyed"]);
    let family = registry()
        .family::<String>("load-keyed", Config::default)
        .unwrap();
    let slow = family.breaker("slow-host.example").config().clone();
    assert_eq!(slow.failures(), Some(1));
    assert_eq!(slow.open_for(), Duration::from_secs(300));
    let other = family.breaker("other.example").config().clone();
    assert_eq!(other.failures(), Some(2));
    assert_eq!(other.open_for(), Duration::from_secs(30));
    // One failure opens the slow host's breaker, not another's.
    let _ = family.call("slow-host.example", || Err::<(), _>("refused"));
    let _ = family.call("other.example", || Err::<(), _>("refused"));
    assert_eq!(
        family.get("slow-host.example").unwrap().state(),
        crate::State::Open
    );
    assert_eq!(
        family.get("other.example").unwrap().state(),
        crate::State::Closed
    );
}

#[test]
fn key_tables_are_validated_like_any_table() {
    let e = err(
        "[breakers.load-keyed-bad]\ndynamic = true\n\n[breakers.load-keyed-bad.keys.\"h\"]\nfailure = 1\n",
        &[],
    );
    assert_eq!(
        e,
        "breakers.toml:5: [breakers.load-keyed-bad.keys.\"h\"] `failure` unknown key; did you mean `failures`? valid keys: failures, failures_within, failure_rate, window, min_calls, slow, slow_rate, open_for, max_open_for, backoff, jitter, half_open_calls, successes, probe_timeout, max_concurrent, probe_every, max_keys, idle_for, latency, health, critical, timeout"
    );
    // Combinations are checked with the family's keys under the key's.
    let e = err(
        "[breakers.load-keyed-bad]\ndynamic = true\nhalf_open_calls = 2\n[breakers.load-keyed-bad.keys.h]\nsuccesses = 3\n",
        &[],
    );
    assert_eq!(
        e,
        "breakers.toml:5: [breakers.load-keyed-bad.keys.\"h\"] `successes` must be from 1 to `half_open_calls` (a round admits no more probes), got 3 with half_open_calls 2 (successes = 3 from [breakers.load-keyed-bad.keys.\"h\"] at breakers.toml:5; half_open_calls = 2 from [breakers.load-keyed-bad] at breakers.toml:3)"
    );
    let e = err("[breakers.load-keyed-bad]\ndynamic = true\nkeys = 5\n", &[]);
    assert!(
        e.contains("`breakers.load-keyed-bad.keys` must be a table of single keys' tables"),
        "{e}"
    );
    let e = err("[breakers.load-keyed-bad.keys]\nh = 5\n", &[]);
    assert!(e.contains("must be a table of single keys' tables"), "{e}");
}

#[test]
fn no_breakers_table_configures_nothing() {
    assert_eq!(
        load("[server]\nport = 1\n", &[]).unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn syntax_error_names_file_line_and_column() {
    let e = load("[breakers.x]\nfailures = = 3\n", &[]).unwrap_err();
    assert!(matches!(e, LoadError::Syntax { line: 2, .. }), "{e}");
    assert!(e.to_string().starts_with("breakers.toml:2:"), "{e}");
    let e = load("[breakers.x]\nµ = é = 3\n", &[]).unwrap_err();
    assert!(matches!(e, LoadError::Syntax { line: 2, .. }), "{e}");
}

#[test]
fn positions_never_slice_inside_a_character_or_past_the_end() {
    let text = "é\nµµ\n";
    let lines = Lines::new(text);
    for offset in 0..text.len() + 10 {
        let (line, column) = lines.position(offset);
        assert!((1..=3).contains(&line) && column >= 1, "{offset}");
    }
    assert_eq!(lines.position(1), (1, 1)); // inside `é`
    assert_eq!(lines.position(3), (2, 1));
    assert_eq!(lines.position(5), (2, 2));
    assert_eq!(lines.position(99), (3, 1));
    assert_eq!(Lines::new("").position(5), (1, 1));
}

#[test]
fn breakers_must_be_tables() {
    assert_eq!(
        err("breakers = 5\n", &[]),
        "breakers.toml:1:1: `breakers` must be a table of breaker tables, like `[breakers.users]`"
    );
    assert!(
        err("[breakers]\nusers = 5\n", &[])
            .starts_with("breakers.toml:2:1: `breakers.users` must be a table")
    );
}

#[test]
fn unknown_key_names_line_suggests_and_lists_keys() {
    let e = load("[breakers.bad-key]\nfailures = 3\nfailure = 3\n", &[]).unwrap_err();
    assert_eq!(e.line(), Some(3));
    assert_eq!(e.key(), Some("failure"));
    assert!(e.to_string().starts_with(
        "breakers.toml:3: [breakers.bad-key] `failure` unknown key; did you mean `failures`? valid keys: failures, failures_within,"
    ), "{e}");
    assert!(
        err("[breakers.bad-key]\ncooldown = \"1s\"\n", &[])
            .contains("`cooldown` unknown key; did you mean `open_for`?")
    );
    assert!(
        err("[breakers.bad-key]\ncolour = 1\n", &[])
            .contains("`colour` unknown key; valid keys: failures,")
    );
}

#[test]
fn attribute_only_keys_are_explained_once() {
    let e = err("[breakers.t]\nfallback = \"cached\"\n", &[]);
    assert!(
        e.starts_with("breakers.toml:2: [breakers.t] `fallback` belongs to the function's `#[circuit_breaker(...)]` attribute, not to the breaker's config; valid keys here: failures,"),
        "{e}"
    );
}

#[test]
fn wrong_kinds_of_value() {
    for (line, says) in [
        (
            "failures = \"3\"",
            "`failures` must be a whole number, got a string",
        ),
        (
            "failures = -1",
            "`failures` must be a whole number from 1 to 4294967295, got -1",
        ),
        (
            "failure_rate = 300",
            "`failure_rate` must be a percentage from 1 to 100, got 300",
        ),
        (
            "open_for = 30",
            "`open_for` must be a duration with a unit, like \"30s\" or \"30ms\", got the bare number 30",
        ),
        (
            "open_for = 99999999999999999999999",
            "`open_for` must be a duration with a unit, like \"250ms\" or \"2s\", got the bare number 99999999999999999999999",
        ),
        (
            "window = true",
            "`window` must be a number of calls (`window = 100`) or a duration (`window = \"10s\"`), got a boolean",
        ),
        (
            "backoff = \"2\"",
            "`backoff` must be a number, got a string",
        ),
    ] {
        let e = err(&format!("[breakers.kinds]\n\n{line}\n"), &[]);
        assert!(
            e.starts_with(&format!("breakers.toml:3: [breakers.kinds] {says}")),
            "{e}"
        );
    }
}

/// A config file takes the attribute's durations, with the attribute's messages (the
/// parser is one file, `duration.rs`, compiled into both crates).
#[test]
fn durations_read_as_in_the_attribute() {
    for (value, says) in [
        (
            "30 s",
            "unexpected space in duration \"30 s\": write it without spaces, like \"30s\"",
        ),
        (
            "2 sec",
            "unexpected space in duration \"2 sec\": write it without spaces, like \"2s\"",
        ),
        (
            "0s",
            "duration \"0s\" is zero: use a length of time greater than zero, like \"1ms\"",
        ),
        (
            "-1s",
            "negative duration \"-1s\": a duration is a length of time, write \"1s\"",
        ),
        (
            "1m30s",
            "duration \"1m30s\" mixes units: write a single number and unit, like \"90s\"",
        ),
        (
            "6000000h",
            "duration \"6000000h\" is too long: durations are limited to u64::MAX nanoseconds (about 584 years)",
        ),
    ] {
        let e = err(&format!("[breakers.d]\nopen_for = \"{value}\"\n"), &[]);
        assert_eq!(
            e,
            format!("breakers.toml:2: [breakers.d] `open_for` {says}")
        );
        let e = err(
            "[breakers.load-env-d]\ndynamic = true\n",
            &[("BREAKERBOX__LOAD_ENV_D__OPEN_FOR", value)],
        );
        assert_eq!(
            e,
            format!("environment variable BREAKERBOX__LOAD_ENV_D__OPEN_FOR: `open_for` {says}")
        );
    }
}

#[test]
fn invalid_values_and_combinations_blame_the_key() {
    assert_eq!(
        err("[breakers.zero]\ndynamic = true\nfailures = 0\n", &[]),
        "breakers.toml:3: [breakers.zero] `failures` must be at least 1, got 0"
    );
    let e = err(
        "[breakers.combo]\nfailures = 3\nfailure_rate = 50\ndynamic = true\n",
        &[],
    );
    assert_eq!(
        e,
        "breakers.toml:2: [breakers.combo] `failures` cannot be combined with `failure_rate`: trip either on consecutive failures or on a failure rate (failures = 3 from [breakers.combo] at breakers.toml:2; failure_rate = 50 from [breakers.combo] at breakers.toml:3)"
    );
    // The key that needs another one.
    let e = err("\n[breakers.needs]\nslow_rate = 50\ndynamic = true\n", &[]);
    assert_eq!(
        e,
        "breakers.toml:3: [breakers.needs] `slow_rate` requires `slow`, the duration from which a call is slow (slow_rate = 50 from [breakers.needs] at breakers.toml:3; `slow` is not set)"
    );
}

#[cfg(unix)]
#[test]
fn only_a_regular_file_is_read_so_a_fifo_or_a_device_cannot_hang_a_load() {
    let dir = std::env::temp_dir().join(format!("breakerbox-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("config.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let file = dir.join("config.toml");
    std::fs::write(&file, "[breakers.a]\nfailures = 3\n").unwrap();
    let refused = |path: &Path| match read(path) {
        Err(LoadError::Read { source, .. }) => source.to_string(),
        other => panic!("{}: {other:?}", path.display()),
    };
    // Opening the FIFO would wait for a writer for ever; /dev/zero would never end.
    assert_eq!(refused(&fifo), "not a regular file");
    assert_eq!(refused(Path::new("/dev/zero")), "not a regular file");
    assert_eq!(refused(&dir), "not a regular file");
    assert_eq!(read(&file).unwrap(), "[breakers.a]\nfailures = 3\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `[defaults]`, `[configs]` and `base` of the wrong shape are errors with their line, never a
/// panic, and configure nothing.
#[test]
fn odd_shapes_of_defaults_configs_and_bases_are_errors() {
    for (text, line, starts) in [
        (
            "defaults = 5\n",
            1,
            "breakers.toml:1:1: `defaults` must be a table of keys",
        ),
        (
            "defaults = [1, 2]\n",
            1,
            "breakers.toml:1:1: `defaults` must be a table of keys",
        ),
        (
            "configs = 5\n",
            1,
            "breakers.toml:1:1: `configs` must be a table of named configs",
        ),
        (
            "[configs]\nfast = 5\n",
            2,
            "breakers.toml:2:1: `configs` must be a table of named configs",
        ),
        (
            "[defaults]\nfailurs = 3\n",
            2,
            "breakers.toml:2: [defaults] `failurs` unknown key; did you mean `failures`?",
        ),
        (
            "[defaults.nested]\nfailures = 3\n",
            1,
            "breakers.toml:1: [defaults] `nested` unknown key",
        ),
        (
            "[defaults]\nbase = \"x\"\n",
            2,
            "breakers.toml:2: [defaults] `base` belongs in a `[breakers.<name>]` table",
        ),
        (
            "[configs.x]\nbase = \"y\"\n",
            2,
            "breakers.toml:2: [configs.x] `base` belongs in a `[breakers.<name>]` table",
        ),
        (
            "[configs.x]\nkeys = 1\n",
            2,
            "breakers.toml:2: [configs.x] `keys` belongs in a `[breakers.<name>]` table",
        ),
        (
            "[breakers.load-odd]\ndynamic = true\nbase = 5\n",
            3,
            "breakers.toml:3: [breakers.load-odd] `base` must be the name of a `[configs.<name>]` table",
        ),
        (
            "[breakers.load-odd]\ndynamic = true\nbase = \"none\"\n",
            3,
            "breakers.toml:3: [breakers.load-odd] `base` `none` names no `[configs.<name>]` table; the file has none",
        ),
        (
            "[configs.fast]\n[breakers.load-odd]\ndynamic = true\nbase = \"zzzzzz\"\n",
            4,
            "breakers.toml:4: [breakers.load-odd] `base` `zzzzzz` names no `[configs.<name>]` table; the file's are `fast`",
        ),
    ] {
        let e = load(text, &[]).unwrap_err();
        assert_eq!(e.line(), Some(line), "{text:?}: {e}");
        assert!(e.to_string().starts_with(starts), "{text:?}: {e}");
    }
    let odd = registry().get_or_create("load-odd", Config::default);
    assert_eq!(odd.config(), &Config::default());
}

/// A top-level table spelt almost like `breakers` is a typo, not the application's table.
#[test]
fn a_misspelt_breakers_table_is_an_error() {
    for (text, at) in [
        ("[breaker.load-typo]\nfailures = 2\n", "breaker"),
        (
            "[app]\nx = 1\n\n[Breakers.load-typo]\nfailures = 2\n",
            "Breakers",
        ),
        ("[braekers.load-typo]\nfailures = 2\n", "braekers"),
    ] {
        let e = err(text, &[]);
        assert!(
            e.ends_with(&format!(
                "`{at}` is not a table breakerbox reads; did you mean `breakers`, as in `[breakers.users]`?"
            )),
            "{e}"
        );
    }
    // The application's own tables stay its own.
    load(
        "[server]\nport = 8080\n[breakwater]\nx = 1\n[brokers]\nurl = \"x\"\n",
        &[],
    )
    .unwrap();
}

/// A key or a table given twice names itself, where the parser says only "duplicate key".
#[test]
fn a_key_or_table_given_twice_is_named() {
    assert_eq!(
        err("[breakers.a]\nfailures = 2\nfailures = 3\n", &[]),
        "breakers.toml:3:1: duplicate key `failures`: a key or a table may appear once in its \
         table; keep one of the two"
    );
    assert_eq!(
        err(
            "[breakers.a]\nfailures = 2\n[breakers.a]\nopen_for = \"1s\"\n",
            &[]
        ),
        "breakers.toml:3:11: duplicate key `a`: a key or a table may appear once in its table; \
         keep one of the two"
    );
}

/// A key written in capitals (as environment variables are) is suggested in lowercase.
#[test]
fn a_key_in_capitals_is_suggested_in_lowercase() {
    let e = err("[breakers.a]\ndynamic = true\nFAILURES = 5\n", &[]);
    assert!(
        e.starts_with(
            "breakers.toml:3: [breakers.a] `FAILURES` unknown key; did you mean `failures`?"
        ),
        "{e}"
    );
}

/// A file that is not UTF-8 (Latin-1 here) is an error at its first bad byte, saying so.
#[test]
fn a_file_that_is_not_utf8_is_an_error_at_its_first_bad_byte() {
    let dir = std::env::temp_dir().join(format!("breakerbox-latin1-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("latin1.toml");
    std::fs::write(&path, b"[breakers.a]\n# caf\xe9\nfailures = 2\n").unwrap();
    let e = read(&path).unwrap_err();
    assert_eq!(e.line(), Some(2));
    assert_eq!(
        e.to_string(),
        format!(
            "{}:2:6: not UTF-8 text (a TOML file must be): save the file as UTF-8",
            path.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `max_keys` and `idle_for` bound a whole family: in one key's table they are an error that
/// says where they go, not keys that do nothing.
#[test]
fn a_family_bound_in_one_keys_table_is_an_error() {
    let text = "[breakers.bound-fam]\ndynamic = true\n\n[breakers.bound-fam.keys.\"k1\"]\nfailures = 2\nmax_keys = 1\n";
    assert_eq!(
        err(text, &[]),
        "breakers.toml:6: [breakers.bound-fam.keys.\"k1\"] `max_keys` bounds the whole family: \
         set it in [breakers.bound-fam], not in one key's table"
    );
}
