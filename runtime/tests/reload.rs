//! Hot reload that keeps state: `Registry::reload_toml` and `Breaker::reconfigure`.
#![cfg(feature = "serde")]

use std::time::Duration;

use breakerbox_runtime::{
    Breaker, BreakerMap, Config, ConfigBuilder, LoadError, ManualClock, State, Window, registry,
};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn live(name: &str, config: ConfigBuilder) -> (Breaker, ManualClock) {
    let clock = ManualClock::new();
    let config = config.clock(clock.clone()).build().unwrap();
    (registry().get_or_create(name, || config), clock)
}

fn fail(b: &Breaker) {
    b.call(|| Err::<(), _>("down")).unwrap_err();
}

fn ok(b: &Breaker) {
    b.call(|| Ok::<_, &str>(())).unwrap();
}

#[test]
fn a_new_threshold_judges_the_half_filled_window() {
    let (b, clock) = live(
        "reload.window",
        Config::builder()
            .failure_rate(80)
            .window(Window::Calls(10))
            .min_calls(5),
    );
    for outcome in [true, true, false, false, false] {
        if outcome { ok(&b) } else { fail(&b) }
    }
    assert_eq!(b.state(), State::Closed, "60 % < 80 %");
    let names = registry()
        .reload_toml_str(
            "live.toml",
            "[breakers.\"reload.window\"]\nfailure_rate = 50\nwindow = 10\nmin_calls = 5\n",
        )
        .unwrap();
    assert_eq!(names, ["reload.window"]);
    let m = b.metrics();
    assert_eq!(
        (m.window_calls, m.failures, m.successes),
        (5, 3, 2),
        "counts kept"
    );
    assert_eq!(b.config().failure_rate(), Some(50));
    // The clock stays the breaker's own: the file's config has none.
    clock.advance(secs(1));
    assert_eq!(b.metrics().time_in_state, secs(1));
    fail(&b); // 4 of 6: 66 % ≥ 50 %
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.explain().short().to_string(),
        "4 of the last 6 calls failed (66 % ≥ 50 %, window 10 calls, min 5); last failure: 'down'"
    );
}

#[test]
fn an_open_breaker_keeps_its_open_time() {
    let (b, clock) = live(
        "reload.open",
        Config::builder().failures(1).open_for(secs(10)),
    );
    fail(&b);
    clock.advance(secs(4));
    registry()
        .reload_toml_str(
            "live.toml",
            "[breakers.\"reload.open\"]\nfailures = 1\nopen_for = \"1s\"\n",
        )
        .unwrap();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.metrics().retry_after,
        Some(secs(6)),
        "the deadline is kept"
    );
    assert_eq!(b.metrics().times_opened, 1);
    clock.advance(secs(6));
    assert_eq!(b.state(), State::HalfOpen, "its timer still fires");
    fail(&b); // the probe fails: the next opening takes the new open time
    assert_eq!(b.metrics().retry_after, Some(secs(1)));
}

#[test]
fn a_bad_file_changes_nothing() {
    let (a, _) = live("reload.bad.a", Config::builder().failures(3));
    let (b, _) = live(
        "reload.bad.b",
        Config::builder().failure_rate(50).window(Window::Calls(10)),
    );
    fail(&a);
    let before = (a.config().clone(), b.config().clone());
    // A valid change to `a`, then a bad value for `b`: nothing applies.
    let text = "[breakers.\"reload.bad.a\"]\nfailures = 1\n\n[breakers.\"reload.bad.b\"]\nfailure_rate = 500\n";
    let err = registry().reload_toml_str("live.toml", text).unwrap_err();
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
    assert_eq!(err.line(), Some(5));
    // A change `b` cannot take live (its window's size), after a valid one to `a`.
    let text = "[breakers.\"reload.bad.a\"]\nfailures = 1\n\n[breakers.\"reload.bad.b\"]\nfailure_rate = 50\nwindow = 20\n";
    let err = registry().reload_toml_str("live.toml", text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "live.toml:4: [breakers.reload.bad.b] `window` cannot change on a live breaker: the \
         window's kind and size are fixed when it is made; it applies to breakers created \
         after the change (restart to apply it to this one)"
    );
    assert_eq!(err.key(), Some("window"));
    // A syntax error, and an unknown breaker.
    assert!(
        registry()
            .reload_toml_str("live.toml", "[breakers.\"reload.bad.a\"\n")
            .is_err()
    );
    let err = registry()
        .reload_toml_str("live.toml", "[breakers.\"reload.bad.aa\"]\nfailures = 1\n")
        .unwrap_err();
    assert!(matches!(err, LoadError::UnknownBreaker { .. }), "{err}");
    assert_eq!((a.config().clone(), b.config().clone()), before);
    assert_eq!(
        (a.state(), a.metrics().consecutive_failures),
        (State::Closed, 1)
    );
}

#[test]
fn a_breaker_not_created_yet_is_configured_for_its_creation() {
    registry()
        .reload_toml_str(
            "live.toml",
            "[breakers.\"reload.later\"]\ndynamic = true\nfailures = 2\n",
        )
        .unwrap();
    let b = registry().get_or_create("reload.later", Config::default);
    assert_eq!(b.config().failures(), Some(2));
}

#[test]
fn a_reloaded_breaker_is_an_override_not_a_conflict() {
    let make = || Config::builder().failures(4).build().unwrap();
    let b = registry().get_or_create("reload.override", make);
    registry()
        .reload_toml_str(
            "live.toml",
            "[breakers.\"reload.override\"]\nfailures = 2\n",
        )
        .unwrap();
    let again = registry()
        .try_get_or_create("reload.override", make)
        .unwrap();
    assert!(
        again.ptr_eq(&b),
        "the file's config is an override: no conflict"
    );
}

#[test]
fn an_existing_keyed_family_is_not_reloaded() {
    let _family: BreakerMap<String> = registry().family("reload.family", Config::default).unwrap();
    let err = registry()
        .reload_toml_str(
            "live.toml",
            "[breakers.\"reload.family\"]\ndynamic = true\nfailures = 2\n",
        )
        .unwrap_err();
    assert!(
        matches!(err, LoadError::NotReloadable { key: None, .. }),
        "{err}"
    );
}

#[test]
fn reconfigure_refuses_what_shapes_the_window_or_the_call_path() {
    let b = Breaker::new(
        "reconfigure",
        Config::builder().failures(3).build().unwrap(),
    );
    let refuse = |c: ConfigBuilder| b.reconfigure(c.build().unwrap()).unwrap_err().field;
    assert_eq!(refuse(Config::builder().failure_rate(50)), "failure_rate");
    assert_eq!(refuse(Config::builder().slow(secs(1))), "slow");
    assert_eq!(
        refuse(Config::builder().max_concurrent(3)),
        "max_concurrent"
    );
    assert_eq!(
        refuse(Config::builder().failures_within(secs(1))),
        "failures_within"
    );
    assert_eq!(
        b.reconfigure(Config::builder().failures(3).build().unwrap()),
        Ok(false)
    );
    assert_eq!(
        b.reconfigure(Config::builder().failures(2).build().unwrap()),
        Ok(true)
    );
    assert_eq!(b.config().failures(), Some(2));
}
