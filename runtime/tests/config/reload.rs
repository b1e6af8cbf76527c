//! Hot reload that keeps state: `Registry::reload_toml` and `Breaker::reconfigure`.
#![cfg(feature = "serde")]

use std::fmt;
use std::sync::{Mutex, mpsc};
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
            "a-new-threshold-judges-the-half-filled-w.toml",
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

/// A rate lowered below what the window already holds trips at the next failure; a success
/// in between, which lowers the window's rate, leaves the breaker closed.
#[test]
fn a_lowered_rate_trips_at_the_next_failure_not_at_a_success() {
    let (b, _clock) = live(
        "reload.lowered",
        Config::builder()
            .failure_rate(80)
            .window(Window::Calls(10))
            .min_calls(5),
    );
    for outcome in [true, true, false, false, false] {
        if outcome { ok(&b) } else { fail(&b) }
    }
    b.reconfigure(
        Config::builder()
            .failure_rate(50)
            .window(Window::Calls(10))
            .min_calls(5)
            .build()
            .unwrap(),
    )
    .unwrap();
    ok(&b); // 3 of 6: 50 %, judged at the next failure
    assert_eq!(b.state(), State::Closed);
    fail(&b); // 4 of 7: 57 % ≥ 50 %
    assert_eq!(b.state(), State::Open);
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
            "an-open-breaker-keeps-its-open-time.toml",
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
    let err = registry()
        .reload_toml_str("a-bad-file-changes-nothing.toml", text)
        .unwrap_err();
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
    assert_eq!(err.line(), Some(5));
    // A change `b` cannot take live (its window's size), after a valid one to `a`.
    let text = "[breakers.\"reload.bad.a\"]\nfailures = 1\n\n[breakers.\"reload.bad.b\"]\nfailure_rate = 50\nwindow = 20\n";
    let err = registry()
        .reload_toml_str("a-bad-file-changes-nothing.toml", text)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "a-bad-file-changes-nothing.toml:4: [breakers.reload.bad.b] `window` cannot change on a live breaker: the \
         window's kind and size are fixed when it is made; it applies to breakers created \
         after the change (restart to apply it to this one)"
    );
    assert_eq!(err.key(), Some("window"));
    // A syntax error, and an unknown breaker.
    assert!(
        registry()
            .reload_toml_str(
                "a-bad-file-changes-nothing.toml",
                "[breakers.\"reload.bad.a\"\n"
            )
            .is_err()
    );
    let err = registry()
        .reload_toml_str(
            "a-bad-file-changes-nothing.toml",
            "[breakers.\"reload.bad.aa\"]\nfailures = 1\n",
        )
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
            "a-breaker-not-created-yet-is-configured-.toml",
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
            "a-reloaded-breaker-is-an-override-not-a-.toml",
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

/// A registry family on a manual clock, failing `key` `n` times.
fn family(name: &str, config: ConfigBuilder) -> (BreakerMap<String>, ManualClock) {
    let clock = ManualClock::new();
    let config = config.clock(clock.clone()).build().unwrap();
    (registry().family(name, || config).unwrap(), clock)
}

fn fail_key(f: &BreakerMap<String>, key: &str, n: usize) {
    for _ in 0..n {
        let _ = f.call(key, || Err::<(), _>("down"));
    }
}

#[test]
fn a_family_table_reaches_every_live_key_keeping_its_state() {
    let (f, clock) = family(
        "reload.keyed",
        Config::builder().failures(3).open_for(secs(10)),
    );
    fail_key(&f, "closed", 2);
    fail_key(&f, "open", 3);
    clock.advance(secs(4));
    let text = "[breakers.\"reload.keyed\"]\ndynamic = true\nfailures = 2\nopen_for = \"1s\"\n";
    let names = registry()
        .reload_toml_str("a-family-table-reaches-every-live-key-ke.toml", text)
        .unwrap();
    assert_eq!(names, ["reload.keyed"]);
    // The family's config, for keys made from now on, on the family's clock.
    assert_eq!(f.config().failures(), Some(2));
    // Every live key's breaker.
    for key in ["closed", "open"] {
        assert_eq!(f.get(key).unwrap().config().failures(), Some(2), "{key}");
    }
    // State, counts and open time kept.
    let closed = f.get("closed").unwrap();
    assert_eq!(
        (closed.state(), closed.metrics().consecutive_failures),
        (State::Closed, 2)
    );
    let open = f.get("open").unwrap();
    assert_eq!(open.state(), State::Open);
    assert_eq!(
        open.metrics().retry_after,
        Some(secs(6)),
        "the deadline is kept"
    );
    assert_eq!(open.metrics().times_opened, 1);
    // The streak of 2 is judged by the new 2 at the next failure.
    fail_key(&f, "closed", 1);
    assert_eq!(f.get("closed").unwrap().state(), State::Open);
    assert_eq!(
        f.get("closed").unwrap().metrics().retry_after,
        Some(secs(1)),
        "the new open time, on the family's manual clock"
    );
    clock.advance(secs(6));
    assert_eq!(open.state(), State::HalfOpen, "its timer still fires");
}

#[test]
fn a_family_table_reaches_the_overflow_breaker() {
    let (f, _clock) = family("reload.overflow", Config::builder().failures(1).max_keys(1));
    // Two open keys fill `max_keys = 1` twice over: a third shares the overflow breaker.
    fail_key(&f, "a", 1);
    fail_key(&f, "b", 1);
    f.call("c", || Ok::<_, &str>(())).unwrap();
    assert_eq!(f.len(), 2);
    let text = "[breakers.\"reload.overflow\"]\ndynamic = true\nmax_keys = 1\nfailures = 2\n";
    registry()
        .reload_toml_str("a-family-table-reaches-the-overflow-brea.toml", text)
        .unwrap();
    assert_eq!(f.overflow().unwrap().config().failures(), Some(2));
}

#[test]
fn a_key_table_reaches_its_live_key_and_leaves_with_it() {
    let (f, _clock) = family("reload.key", Config::builder().failures(3));
    fail_key(&f, "slow-host", 2);
    fail_key(&f, "other", 1);
    let with = "[breakers.\"reload.key\"]\ndynamic = true\nfailures = 3\n\n[breakers.\"reload.key\".keys.\"slow-host\"]\nfailures = 5\nopen_for = \"5m\"\n";
    registry()
        .reload_toml_str("a-key-table-reaches-its-live-key-and-lea.toml", with)
        .unwrap();
    let slow = f.get("slow-host").unwrap();
    assert_eq!(
        (slow.config().failures(), slow.config().open_for()),
        (Some(5), secs(300))
    );
    assert_eq!(slow.metrics().consecutive_failures, 2, "counts kept");
    assert_eq!(f.get("other").unwrap().config().failures(), Some(3));
    assert_eq!(f.config().failures(), Some(3));
    fail_key(&f, "slow-host", 2);
    assert_eq!(slow.state(), State::Closed, "4 < 5");
    // A key made after the reload gets its table too.
    f.sweep();
    assert_eq!(f.breaker("new").config().failures(), Some(3));
    // Without the table, the key goes back to the family's config. A family that exists is
    // a name the registry knows: its table needs no `dynamic = true`.
    let without = "[breakers.\"reload.key\"]\nfailures = 4\n";
    registry()
        .reload_toml_str("a-key-table-reaches-its-live-key-and-lea.toml", without)
        .unwrap();
    assert_eq!(
        (slow.config().failures(), slow.config().open_for()),
        (Some(4), Config::default().open_for())
    );
    fail_key(&f, "slow-host", 1);
    assert_eq!(
        slow.state(),
        State::Open,
        "a streak of 5 over the family's 4"
    );
}

#[test]
fn a_bad_file_leaves_every_key_as_it_was() {
    let (f, _clock) = family(
        "reload.keyed.bad",
        Config::builder()
            .failure_rate(50)
            .window(Window::Calls(10))
            .min_calls(5),
    );
    fail_key(&f, "h", 2);
    let before = (f.config().clone(), f.get("h").unwrap().config().clone());
    let head = "[breakers.\"reload.keyed.bad\"]\ndynamic = true\n";
    let reload = |rest: &str| {
        registry()
            .reload_toml_str(
                "a-bad-file-leaves-every-key-as-it-was.toml",
                &format!("{head}{rest}"),
            )
            .unwrap_err()
    };
    // The family's window.
    let err = reload("failure_rate = 60\nwindow = 20\n");
    assert_eq!(
        err.to_string(),
        "a-bad-file-leaves-every-key-as-it-was.toml:1: [breakers.reload.keyed.bad] `window` cannot change on a live keyed \
         family's breakers: the window's kind and size are fixed when it is made; restart to \
         apply it"
    );
    assert_eq!(err.key(), Some("window"));
    // A key's window: blamed on its table.
    let err = reload(
        "failure_rate = 60\nwindow = 10\n\n[breakers.\"reload.keyed.bad\".keys.\"h\"]\nwindow = 30\n",
    );
    assert_eq!(
        err.to_string(),
        "a-bad-file-leaves-every-key-as-it-was.toml:6: [breakers.reload.keyed.bad.keys.\"h\"] `window` cannot change on a live \
         keyed family's breakers: the window's kind and size are fixed when it is made; \
         restart to apply it"
    );
    // A slow-call rate added for a key not held: refused as for a held one.
    let err = reload(
        "failure_rate = 60\nwindow = 10\n\n[breakers.\"reload.keyed.bad\".keys.\"not-held\"]\nslow = \"1s\"\nslow_rate = 50\n",
    );
    assert_eq!(
        err.to_string(),
        "a-bad-file-leaves-every-key-as-it-was.toml:6: [breakers.reload.keyed.bad.keys.\"not-held\"] `slow_rate` cannot change \
         on a live keyed family's breakers: adding or removing a slow-call rate adds or \
         removes the window; restart to apply it"
    );
    // The family's bounds.
    let err = reload("failure_rate = 60\nwindow = 10\nmax_keys = 5\n");
    assert_eq!(
        err.to_string(),
        "a-bad-file-leaves-every-key-as-it-was.toml:1: [breakers.reload.keyed.bad] `max_keys` cannot change on a live keyed \
         family: its bounds are fixed when it is made; restart to apply it"
    );
    // A valid change to the family with a bad table after it.
    let err = reload(
        "failure_rate = 60\nwindow = 10\n\n[breakers.\"reload.keyed.other\"]\ndynamic = true\nfailures = 0\n",
    );
    assert_eq!(err.line(), Some(8), "{err}");
    assert_eq!(
        (f.config().clone(), f.get("h").unwrap().config().clone()),
        before
    );
    let m = f.get("h").unwrap().metrics();
    assert_eq!((m.window_calls, m.failures), (2, 2), "counts kept");
}

/// A key whose `Display` (user code the family runs when it makes the key's breaker, to look up
/// the key's own table) stops once, when [`GATE`] is armed, until told to go on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Gated(&'static str);

type Gate = (mpsc::Sender<()>, mpsc::Receiver<()>);

static GATE: Mutex<Option<Gate>> = Mutex::new(None);

impl fmt::Display for Gated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gate = GATE.lock().unwrap().take();
        if let Some((entered, go)) = gate {
            entered.send(()).unwrap();
            // A bound on a failure, not a wait for time: the test says go at once.
            go.recv_timeout(secs(60)).unwrap();
        }
        f.write_str(self.0)
    }
}

#[test]
fn a_key_made_from_the_old_config_during_a_reload_ends_with_the_new() {
    let f: BreakerMap<Gated> = registry()
        .family("reload.race", || {
            Config::builder().failures(3).build().unwrap()
        })
        .unwrap();
    let file = |n: u32| {
        format!(
            "[breakers.\"reload.race\"]\ndynamic = true\nfailures = 3\n\n[breakers.\"reload.race\".keys.late]\nfailures = {n}\n"
        )
    };
    registry()
        .reload_toml_str("a-key-made-from-the-old-config-during-a-.toml", &file(5))
        .unwrap();
    let (entered, on_entered) = mpsc::channel();
    let (go, on_go) = mpsc::channel();
    *GATE.lock().unwrap() = Some((entered, on_go));
    let maker = {
        let f = f.clone();
        std::thread::spawn(move || f.breaker(&Gated("late")).config().failures())
    };
    // The maker has read the key's table (failures = 5) and is in the key's `Display`: its
    // breaker is not in the family yet, so the reload's walk cannot find it.
    on_entered.recv_timeout(secs(60)).unwrap();
    registry()
        .reload_toml_str("a-key-made-from-the-old-config-during-a-.toml", &file(4))
        .unwrap();
    go.send(()).unwrap();
    assert_eq!(maker.join().unwrap(), Some(4), "the maker's handle");
    assert_eq!(
        f.get(&Gated("late")).unwrap().config().failures(),
        Some(4),
        "the key's breaker in the family"
    );
}

#[test]
fn keys_made_while_reloads_run_end_with_the_last_config_and_every_count() {
    let f: BreakerMap<u64> = registry()
        .family("reload.stress", || {
            Config::builder().failures(1000).build().unwrap()
        })
        .unwrap();
    let file = |n: u32| format!("[breakers.\"reload.stress\"]\ndynamic = true\nfailures = {n}\n");
    let (threads, keys) = (3u64, 1000u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let f = &f;
            s.spawn(move || {
                for i in 0..keys {
                    let key = t * 1_000_000 + i;
                    f.call(&key, || Ok::<_, &str>(())).unwrap();
                    f.call(&key, || Err::<(), _>("down")).unwrap_err();
                }
            });
        }
        s.spawn(|| {
            for n in 520..550 {
                registry()
                    .reload_toml_str("keys-made-while-reloads-run-end-with-the.toml", &file(n))
                    .unwrap();
            }
        });
    });
    let (mut held, mut calls, mut failures) = (0, 0, 0);
    f.for_each(|key, b| {
        assert_eq!(b.config().failures(), Some(549), "key {key}");
        let m = b.metrics();
        held += 1;
        calls += m.calls;
        failures += m.failures;
    });
    assert_eq!(f.evicted().keys, 0);
    assert_eq!(
        (held, calls, failures),
        (threads * keys, 2 * threads * keys, threads * keys)
    );
}

#[test]
fn keys_of_a_single_breaker_are_refused_before_anything_changes() {
    let (b, _) = live("reload.single", Config::builder().failures(3));
    let (other, _) = live("reload.single.other", Config::builder().failures(3));
    let text = "[breakers.\"reload.single\"]\nfailures = 2\n\n[breakers.\"reload.single\".keys.h]\nfailures = 1\n\n[breakers.\"reload.single.other\"]\nfailures = 2\n";
    let err = registry()
        .reload_toml_str("keys-of-a-single-breaker-are-refused-bef.toml", text)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "keys-of-a-single-breaker-are-refused-bef.toml:4: [breakers.reload.single.keys.\"h\"] 'reload.single' is a single breaker, \
         not a keyed family: only a family has keys"
    );
    assert_eq!(
        (b.config().failures(), other.config().failures()),
        (Some(3), Some(3))
    );
}

/// A key whose `Display` panics at the second call after [`PANIC_AT`] is armed: a reload with
/// key tables displays each held key once to check the file, then once to apply it.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Flaky(&'static str);

static PANIC_AT: Mutex<Option<u32>> = Mutex::new(None);

impl fmt::Display for Flaky {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == "flaky" {
            let mut at = PANIC_AT.lock().unwrap();
            if let Some(n) = at.as_mut() {
                *n -= 1;
                if *n == 0 {
                    *at = None;
                    drop(at);
                    panic!("the user's key Display panics");
                }
            }
        }
        f.write_str(self.0)
    }
}

#[test]
fn a_key_whose_display_panics_while_a_reload_applies_keeps_its_config_alone() {
    let f: BreakerMap<Flaky> = registry()
        .family("reload.flaky", || {
            Config::builder().failures(5).build().unwrap()
        })
        .unwrap();
    for key in ["a", "flaky", "z"] {
        f.call(&Flaky(key), || Ok::<_, &str>(())).unwrap();
    }
    *PANIC_AT.lock().unwrap() = Some(2);
    let text = "[breakers.\"reload.flaky\"]\nfailures = 3\n\n[breakers.\"reload.flaky\".keys.other]\nfailures = 2\n";
    assert_eq!(
        registry()
            .reload_toml_str("a-key-whose-display-panics-while-a-reloa.toml", text)
            .unwrap(),
        ["reload.flaky"]
    );
    assert_eq!(*PANIC_AT.lock().unwrap(), None, "it panicked");
    let failures = |k| f.get(&Flaky(k)).unwrap().config().failures();
    assert_eq!(
        (failures("a"), failures("flaky"), failures("z")),
        (Some(3), Some(5), Some(3))
    );
    assert_eq!(f.config().failures(), Some(3));
}

#[test]
fn a_family_keeps_the_probe_of_its_code() {
    fn healthy() -> bool {
        true
    }
    let f: BreakerMap<String> = registry()
        .family("reload.probe", || {
            Config::builder()
                .failures(3)
                .probe(healthy)
                .build()
                .unwrap()
        })
        .unwrap();
    f.call("held", || Ok::<_, &str>(())).unwrap();
    let text = "[breakers.\"reload.probe\"]\nfailures = 2\n\n[breakers.\"reload.probe\".keys.own]\nfailures = 4\n";
    registry()
        .reload_toml_str("a-family-keeps-the-probe-of-its-code.toml", text)
        .unwrap();
    assert!(f.config().probe().is_some(), "the family's");
    for key in ["held", "new", "own"] {
        let config = f.breaker(key).config().clone();
        assert!(config.probe().is_some(), "{key}");
        assert_eq!(
            config.failures(),
            Some(if key == "own" { 4 } else { 2 }),
            "{key}"
        );
    }
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

/// Two loads at once of files that give the same breakers different configs apply one file
/// after the other: every breaker ends with the config of the same file, never some with one
/// file's and the rest with the other's.
#[test]
fn two_loads_at_once_apply_one_file_after_the_other() {
    let names: Vec<String> = (0..64).map(|i| format!("reload-together-{i}")).collect();
    let breakers: Vec<Breaker> = names
        .iter()
        .map(|n| registry().get_or_create(n, || Config::builder().build().unwrap()))
        .collect();
    let text = |failures: u32| {
        let tables = names
            .iter()
            .map(|n| format!("[breakers.{n}]\nfailures = {failures}\n"));
        tables.collect::<String>()
    };
    let (two, three) = (text(2), text(3));
    for round in 0..200 {
        let start = std::sync::Barrier::new(2);
        let load = |text: &str| {
            start.wait();
            registry().reload_toml_str("together.toml", text).unwrap()
        };
        std::thread::scope(|s| {
            s.spawn(|| load(&two));
            s.spawn(|| load(&three));
        });
        let failures: Vec<_> = breakers.iter().map(|b| b.config().failures()).collect();
        assert!(
            failures.iter().all(|f| *f == failures[0]),
            "round {round}: {failures:?}"
        );
    }
}

/// A new key whose `Display` panics, in a family with key tables: it reads as a key of no
/// table, and its calls run on the family's config (a reload while it is held reports the
/// panic instead: see `watch.rs`).
#[test]
fn a_new_key_whose_display_panics_takes_the_familys_config_under_key_tables() {
    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Host(u32);
    impl fmt::Display for Host {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            assert_ne!(self.0, 13, "unlucky host");
            write!(f, "h{}", self.0)
        }
    }
    let name = "reload-display-panics";
    let family: BreakerMap<Host> = registry()
        .family(name, || Config::builder().failures(5).build().unwrap())
        .unwrap();
    let text =
        format!("[breakers.{name}]\nfailures = 4\n[breakers.{name}.keys.\"h1\"]\nfailures = 2\n");
    registry()
        .reload_toml_str("display-panics.toml", &text)
        .unwrap();
    family.call(&Host(13), || Ok::<_, &str>(())).unwrap();
    family.call(&Host(1), || Ok::<_, &str>(())).unwrap();
    assert_eq!(family.get(&Host(13)).unwrap().config().failures(), Some(4));
    assert_eq!(family.get(&Host(1)).unwrap().config().failures(), Some(2));
}

/// A load that runs while a keyed family is first made (here from the family's clock, which
/// the family reads as it is made) reaches the family: its table and its key tables apply,
/// though the family was not live when the load looked.
#[test]
fn a_load_while_a_family_is_made_reaches_the_family() {
    struct LoadsAtFirstRead {
        time: ManualClock,
        loaded: std::sync::atomic::AtomicBool,
    }
    impl breakerbox_runtime::Clock for LoadsAtFirstRead {
        fn now(&self) -> Duration {
            if !self.loaded.swap(true, std::sync::atomic::Ordering::SeqCst) {
                let text = "[breakers.made-meanwhile]\ndynamic = true\nfailures = 2\n\
                            [breakers.made-meanwhile.keys.\"k\"]\nfailures = 3\n";
                registry()
                    .reload_toml_str("made-meanwhile.toml", text)
                    .unwrap();
            }
            self.time.now()
        }
    }
    let clock = LoadsAtFirstRead {
        time: ManualClock::new(),
        loaded: Default::default(),
    };
    let config = Config::builder().failures(5).clock(clock).build().unwrap();
    let family: BreakerMap<String> = registry().family("made-meanwhile", || config).unwrap();
    for key in ["k", "other"] {
        family.call(key, || Ok::<_, &str>(())).unwrap();
    }
    let failures = |key: &str| family.get(key).unwrap().config().failures();
    assert_eq!((failures("k"), failures("other")), (Some(3), Some(2)));
}

/// User code that a load runs (here a key's `Display`, shown to match key tables) may itself
/// load a file and make a family on the same thread: loads run one at a time, but a load
/// never waits for itself.
#[test]
fn user_code_run_by_a_load_may_load_and_make_a_family() {
    #[derive(Clone, PartialEq, Eq, Hash)]
    struct Reenters(&'static str);
    static ARMED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    impl fmt::Display for Reenters {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            if ARMED.swap(false, std::sync::atomic::Ordering::SeqCst) {
                registry()
                    .reload_toml_str("reentered.toml", "[breakers.reentered-b]\ndynamic = true\n")
                    .unwrap();
                registry()
                    .family::<String>("reentered-family", Config::default)
                    .unwrap();
            }
            f.write_str(self.0)
        }
    }
    let name = "reentering-keys";
    let family: BreakerMap<Reenters> = registry().family(name, Config::default).unwrap();
    family.call(&Reenters("h"), || Ok::<_, &str>(())).unwrap();
    ARMED.store(true, std::sync::atomic::Ordering::SeqCst);
    let text =
        format!("[breakers.{name}]\nfailures = 3\n[breakers.{name}.keys.\"h\"]\nfailures = 2\n");
    registry()
        .reload_toml_str("reentering.toml", &text)
        .unwrap();
    assert!(
        !ARMED.load(std::sync::atomic::Ordering::SeqCst),
        "the key was shown"
    );
    assert_eq!(
        family.get(&Reenters("h")).unwrap().config().failures(),
        Some(2)
    );
    assert!(
        registry()
            .family::<String>("reentered-family", Config::default)
            .is_ok()
    );
}
