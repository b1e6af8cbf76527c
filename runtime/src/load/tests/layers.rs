//! A file's tables, bases and variables over an attribute's config, key by key.
//!
//! The attributes here are registered as `#[circuit_breaker]` registers them. No file of these
//! tests has a `[defaults]` table, which would reach every attribute of the test binary
//! (tests/config_defaults.rs checks it, alone in its process).

use super::*;
use crate::registration::{Registration, Site};

macro_rules! attribute {
    ($static:ident, $name:literal, $line:literal, $configure:expr) => {
        #[linkme::distributed_slice(crate::registration::REGISTRATIONS)]
        static $static: Registration = Registration::new($name, $configure, "src/api.rs", $line, 1);
    };
}

attribute!(RATE, "layer-rate", 10, |b| b.failure_rate(50).min_calls(20));
attribute!(ENV, "layer-env", 20, |b| b.failures(3));
attribute!(BLAME, "layer-blame", 30, |b| b
    .failure_rate(50)
    .half_open_calls(2));
attribute!(EARLY, "layer-early", 40, |b| b.failures(3));
attribute!(BASED, "layer-base", 50, |b| b
    .failures(4)
    .open_for(Duration::from_secs(10)));

attribute!(REMOVED, "layer-removed", 70, |b| b.failures(3));
attribute!(SOURCED, "layer-sourced", 80, |b| b.failures(3));
attribute!(SINGLE, "layer-single", 90, |b| b.failures(3));
attribute!(SWITCH, "layer-switch", 100, |b| b
    .failures(3)
    .failures_within(Duration::from_secs(1)));
attribute!(SWITCH_BACK, "layer-switch-back", 110, |b| b
    .failure_rate(50)
    .window(crate::Window::Calls(20))
    .min_calls(5));
attribute!(CONF_ATTR, "layer-conf-attr", 120, |b| b.failures(3));
attribute!(VAR_GONE, "layer-var-gone", 130, |b| b.failure_rate(50));

#[linkme::distributed_slice(crate::registration::REGISTRATIONS)]
static KEYED: Registration =
    Registration::new("layer-keyed", |b| b.failures(2), "src/api.rs", 60, 1).keyed();

#[test]
fn a_table_changes_only_the_keys_it_names_over_the_attribute() {
    load("[breakers.layer-rate]\nopen_for = \"5s\"\n", &[]).unwrap();
    let b = registry().get("layer-rate").unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    // The attribute's keys the table does not name stay.
    assert_eq!(b.config().failure_rate(), Some(50));
    assert_eq!(b.config().min_calls(), 20);
}

#[test]
fn a_variable_changes_one_key_of_an_attribute_without_a_table() {
    let names = load("", &[("BREAKERBOX__LAYER_ENV__OPEN_FOR", "2s")]).unwrap();
    assert_eq!(names, ["layer-env"]);
    let b = registry().get("layer-env").unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(2));
    assert_eq!(b.config().failures(), Some(3));
}

#[test]
fn an_error_names_each_key_with_its_value_and_layer() {
    // A variable's key against the attribute's.
    let e = err("", &[("BREAKERBOX__LAYER_BLAME__SUCCESSES", "3")]);
    assert_eq!(
        e,
        "environment variable BREAKERBOX__LAYER_BLAME__SUCCESSES: [breakers.layer-blame] `successes` must be from 1 to `half_open_calls` (a round admits no more probes), got 3 with half_open_calls 2 (successes = 3 from BREAKERBOX__LAYER_BLAME__SUCCESSES; half_open_calls = 2 from #[circuit_breaker] at src/api.rs:30)"
    );
    // A table's key against the attribute's.
    let e = err("[breakers.layer-blame]\nsuccesses = 3\n", &[]);
    assert_eq!(
        e,
        "breakers.toml:2: [breakers.layer-blame] `successes` must be from 1 to `half_open_calls` (a round admits no more probes), got 3 with half_open_calls 2 (successes = 3 from [breakers.layer-blame] at breakers.toml:2; half_open_calls = 2 from #[circuit_breaker] at src/api.rs:30)"
    );
    // The table's key, then the variable's over it: the variable is blamed.
    let e = load(
        "[breakers.layer-blame]\nmin_calls = 20\n",
        &[("BREAKERBOX__LAYER_BLAME__WINDOW", "10")],
    )
    .unwrap_err();
    assert!(matches!(&e, LoadError::Env { var, .. } if var == "BREAKERBOX__LAYER_BLAME__WINDOW"));
    assert!(
        e.to_string().ends_with("(min_calls = 20 from [breakers.layer-blame] at breakers.toml:2; window = 10 calls from BREAKERBOX__LAYER_BLAME__WINDOW)"),
        "{e}"
    );
}

#[test]
fn a_keyed_attributes_family_is_known_without_dynamic() {
    let names = load(
        "[breakers.layer-keyed]\nopen_for = \"5s\"\n\n[breakers.layer-keyed.keys.\"slow\"]\nopen_for = \"5m\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(names, ["layer-keyed"]);
    let family = registry().registered_family(&KEYED).unwrap();
    assert_eq!(family.config().failures(), Some(2));
    assert_eq!(family.config().open_for(), Duration::from_secs(5));
    let slow = family.breaker("slow").config().clone();
    assert_eq!(slow.open_for(), Duration::from_secs(300));
    assert_eq!(slow.failures(), Some(2));
}

#[test]
fn a_load_after_get_keeps_the_attribute_and_the_state() {
    let b = registry().get("layer-early").unwrap();
    let _ = b.call(|| Err::<(), _>("down"));
    let _ = b.call(|| Err::<(), _>("down"));
    load("[breakers.layer-early]\nopen_for = \"5s\"\n", &[]).unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    assert_eq!(b.config().failures(), Some(3));
    // The third failure of the streak begun before the load opens it.
    let _ = b.call(|| Err::<(), _>("down"));
    assert_eq!(b.state(), crate::State::Open);
}

#[test]
fn a_base_lies_under_the_attribute_and_the_table_over_both() {
    let text = "[configs.fast]\nopen_for = \"5s\"\nhalf_open_calls = 2\n\n[breakers.layer-base]\nbase = \"fast\"\nsuccesses = 2\n";
    load(text, &[]).unwrap();
    let c = registry().get("layer-base").unwrap().config().clone();
    assert_eq!(c.failures(), Some(4));
    // The attribute's open_for over the base's.
    assert_eq!(c.open_for(), Duration::from_secs(10));
    assert_eq!(c.half_open_calls(), 2);
    assert_eq!(c.successes(), 2);
    // A base the file does not have.
    assert_eq!(
        err(&text.replace("base = \"fast\"", "base = \"fats\""), &[]),
        "breakers.toml:6: [breakers.layer-base] `base` `fats` names no `[configs.<name>]` table; did you mean `fast`?"
    );
    // A base's keys are checked as any table's, and name their table.
    assert!(
        err("[configs.slow]\nopen_for = 5\n", &[]).starts_with(
            "breakers.toml:2: [configs.slow] `open_for` must be a duration with a unit"
        )
    );
    assert!(err("[configs.slow]\ndynamic = true\n", &[]).starts_with(
        "breakers.toml:2: [configs.slow] `dynamic` belongs in a `[breakers.<name>]` table"
    ));
}

#[test]
fn a_key_removed_from_the_file_goes_back_to_the_layer_under_it() {
    load("[breakers.layer-removed]\nfailures = 7\n", &[]).unwrap();
    let b = registry().get("layer-removed").unwrap();
    assert_eq!(b.config().failures(), Some(7));
    load("[breakers.layer-removed]\nopen_for = \"5s\"\n", &[]).unwrap();
    assert_eq!(b.config().failures(), Some(3));
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
}

#[test]
fn config_sources_follow_the_attribute_the_file_and_code() {
    use crate::config::sources::ConfigSource;
    let source = |key: &str| {
        let all = registry().config_sources("layer-sourced").unwrap();
        assert_eq!(
            all.iter().map(|k| k.key).collect::<Vec<_>>(),
            crate::config_keys::KEYS
        );
        all.into_iter().find(|k| k.key == key).unwrap()
    };
    // Before any file, and before the breaker exists: the attribute's keys, the defaults.
    assert_eq!(
        source("failures").to_string(),
        "failures = 3 (#[circuit_breaker] at src/api.rs:80)"
    );
    assert_eq!(source("open_for").source, ConfigSource::Default);
    load("[breakers.layer-sourced]\nopen_for = \"5s\"\n", &[]).unwrap();
    assert_eq!(
        source("open_for").to_string(),
        "open_for = 5s ([breakers.layer-sourced] at breakers.toml:2)"
    );
    assert_eq!(
        source("failures").to_string(),
        "failures = 3 (#[circuit_breaker] at src/api.rs:80)"
    );
    // A change in code since the file.
    let b = registry().get("layer-sourced").unwrap();
    let config = Config::builder()
        .failures(4)
        .open_for(Duration::from_secs(5))
        .build()
        .unwrap();
    b.reconfigure(config).unwrap();
    assert_eq!(source("failures").source, ConfigSource::Code);
    assert_eq!(source("failures").value, "4");
    assert!(matches!(
        source("open_for").source,
        ConfigSource::Table { line: 2, .. }
    ));
    assert!(registry().config_sources("layer-no-such").is_none());
}

#[test]
fn a_table_changes_only_its_keys_of_a_breaker_made_in_code_after_the_load() {
    use crate::config::sources::ConfigSource;
    load(
        "[breakers.layer-dyn]\ndynamic = true\nopen_for = \"5s\"\n",
        &[],
    )
    .unwrap();
    let line = line!() + 1;
    let b = registry().get_or_create("layer-dyn", || {
        Config::builder().failures(3).build().unwrap()
    });
    assert_eq!(b.config().failures(), Some(3));
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    let sources = registry().config_sources("layer-dyn").unwrap();
    let failures = sources.iter().find(|k| k.key == "failures").unwrap();
    assert!(
        matches!(failures.source, ConfigSource::Site(site) if site.line() == line),
        "{failures}"
    );
    // The next file layers over the code's config again.
    load("[breakers.layer-dyn]\ndynamic = true\nsuccesses = 1\n", &[]).unwrap();
    assert_eq!(b.config().failures(), Some(3));
    assert_eq!(b.config().open_for(), Duration::from_secs(60));
    // A code config that does not go with the file's keys: the file's keys over the defaults,
    // and an error logged, naming both.
    load(
        "[breakers.layer-dyn2]\ndynamic = true\nopen_for = \"30s\"\n",
        &[],
    )
    .unwrap();
    let errors = ErrorLog::default();
    let line = line!() + 2;
    let b = tracing::subscriber::with_default(errors.clone(), || {
        registry().get_or_create("layer-dyn2", || {
            Config::builder()
                .open_for(Duration::from_secs(10))
                .max_open_for(Duration::from_secs(20))
                .build()
                .unwrap()
        })
    });
    assert_eq!(b.config().open_for(), Duration::from_secs(30));
    assert_eq!(b.config().max_open_for(), Duration::from_secs(30));
    let logged = errors.0.lock().unwrap().clone();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(
        logged[0].starts_with(&format!(
            "circuit breaker 'layer-dyn2': the config file's keys do not go with the config of get_or_create at runtime/src/load/tests/layers.rs:{line} (breakers.toml:3: [breakers.layer-dyn2] `max_open_for` must be at least `open_for`, got 20s with open_for 30s"
        )),
        "{logged:?}"
    );
}

/// The messages of the `error` events of target `breakerbox`.
#[derive(Clone, Default)]
struct ErrorLog(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl tracing::Subscriber for ErrorLog {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(
                &mut self,
                field: &tracing::field::Field,
                value: &dyn core::fmt::Debug,
            ) {
                if field.name() == "message" {
                    self.0 = format!("{value:?}");
                }
            }
        }
        let meta = event.metadata();
        if *meta.level() == tracing::Level::ERROR && meta.target() == "breakerbox" {
            let mut message = Message(String::new());
            event.record(&mut message);
            self.0.lock().unwrap().push(message.0);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn check_reports_a_key_the_tables_of_two_files_set() {
    let at = |file: &str, text: &str| {
        registry()
            .load_with_env(Path::new(file), text, Vec::new())
            .unwrap()
    };
    let base = "[breakers.layer-two]\ndynamic = true\nopen_for = \"5s\"\nsuccesses = 1\n";
    let local = "\n[breakers.layer-two]\ndynamic = true\nopen_for = \"9s\"\n";
    at("base.toml", base);
    // One file loaded again, as a watch does, sets nothing twice.
    at("base.toml", base);
    let twice = |c: &crate::registration::Conflicts| {
        c.two_files()
            .iter()
            .filter(|t| t.name() == "layer-two")
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    if let Err(c) = registry().check() {
        assert!(twice(&c).is_empty(), "{c}");
    }
    at("local.toml", local);
    at("local.toml", local);
    let c = registry().check().unwrap_err();
    assert_eq!(
        twice(&c),
        [
            "circuit breaker 'layer-two': `open_for` is set by [breakers.layer-two] in two config files, at base.toml:1 and then at local.toml:2; each load replaces the table of the one before"
        ]
    );
    assert_eq!(
        c.two_files()
            .iter()
            .find(|t| t.name() == "layer-two")
            .unwrap()
            .keys(),
        ["open_for"]
    );
}

#[test]
fn a_key_table_of_an_annotated_single_breaker_is_an_error() {
    // `layer-single` is a plain attribute's, which no test creates: its keys' tables would
    // reach nothing.
    let e = load(
        "[breakers.layer-single.keys.\"a\"]\nopen_for = \"5s\"\n",
        &[],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "breakers.toml:1: [breakers.layer-single.keys.\"a\"] 'layer-single' is a single breaker, not a keyed family: only a family has keys"
    );
}

/// `failures` and `failure_rate` are two ways of tripping: a layer that names one drops the
/// other from the layers under it, so a file can switch an attribute's breaker.
#[test]
fn a_layer_switches_the_way_of_tripping() {
    load(
        "[breakers.layer-switch]\nfailure_rate = 50\nwindow = 20\n",
        &[],
    )
    .unwrap();
    let c = registry().get("layer-switch").unwrap().config().clone();
    assert_eq!(c.failure_rate(), Some(50));
    assert_eq!(c.failures(), None);
    assert_eq!(c.failures_within(), None);
    assert_eq!(c.window(), crate::Window::Calls(20));
    // Back to consecutive failures: the rate's window and minimum go with it (the file
    // keeps its table: without it, the live breaker would go back to its attribute's
    // failures, which a reload refuses).
    load(
        "[breakers.layer-switch]\nfailure_rate = 50\nwindow = 20\n",
        &[("BREAKERBOX__LAYER_SWITCH_BACK__FAILURES", "4")],
    )
    .unwrap();
    let c = registry()
        .get("layer-switch-back")
        .unwrap()
        .config()
        .clone();
    assert_eq!(c.failures(), Some(4));
    assert_eq!(c.failure_rate(), None);
    assert_eq!(c.min_calls(), Config::default().min_calls());
    // Both in one layer is still an error.
    let e = err(
        "[breakers.layer-switch]\nfailure_rate = 50\nfailures = 2\n",
        &[],
    );
    assert!(e.contains("cannot be combined with `failure_rate`"), "{e}");
}

/// The site and source of `key` of `name`'s config, as `config_sources` gives them.
fn source_of(name: &str, key: &str) -> crate::config::sources::KeySource {
    registry()
        .config_sources(name)
        .unwrap()
        .into_iter()
        .find(|k| k.key == key)
        .unwrap()
}

#[test]
fn a_table_changes_only_its_keys_of_a_family_made_in_code_before_the_load() {
    use crate::config::sources::ConfigSource;
    let line = line!() + 2;
    let family = registry()
        .family::<String>("layer-fam-before", || {
            Config::builder().failure_rate(50).build().unwrap()
        })
        .unwrap();
    let held = family.breaker(&"held".to_owned());
    load(
        "[breakers.layer-fam-before]\nopen_for = \"5s\"\n\n[breakers.layer-fam-before.keys.\"slow\"]\nhalf_open_calls = 2\n",
        &[],
    )
    .unwrap();
    assert_eq!(family.config().failure_rate(), Some(50));
    assert_eq!(family.config().open_for(), Duration::from_secs(5));
    // A key held before the load, and a key with its own table.
    assert_eq!(held.config().failure_rate(), Some(50));
    assert_eq!(held.config().open_for(), Duration::from_secs(5));
    let slow = family.breaker(&"slow".to_owned());
    assert_eq!(slow.config().failure_rate(), Some(50));
    assert_eq!(slow.config().open_for(), Duration::from_secs(5));
    assert_eq!(slow.config().half_open_calls(), 2);
    let rate = source_of("layer-fam-before", "failure_rate");
    assert!(
        matches!(rate.source, ConfigSource::Site(site @ Site::Family { .. }) if site.line() == line),
        "{rate}"
    );
    assert_eq!(
        rate.to_string(),
        format!("failure_rate = 50 (Registry::family at runtime/src/load/tests/layers.rs:{line})")
    );
    let key = registry()
        .key_config_sources("layer-fam-before", "slow")
        .unwrap();
    let key_rate = key.iter().find(|k| k.key == "failure_rate").unwrap();
    assert!(matches!(
        key_rate.source,
        ConfigSource::Site(Site::Family { .. })
    ));
    // A reload and a variable change their keys only, over the code's again.
    load(
        "[breakers.layer-fam-before]\nsuccesses = 1\n",
        &[("BREAKERBOX__LAYER_FAM_BEFORE__MIN_CALLS", "5")],
    )
    .unwrap();
    assert_eq!(family.config().failure_rate(), Some(50));
    assert_eq!(family.config().min_calls(), 5);
    assert_eq!(family.config().open_for(), Duration::from_secs(60));
    assert_eq!(held.config().failure_rate(), Some(50));
    assert_eq!(held.config().min_calls(), 5);
}

#[test]
fn a_table_changes_only_its_keys_of_a_family_made_in_code_after_the_load() {
    use crate::config::sources::ConfigSource;
    load(
        "[breakers.layer-fam-after]\ndynamic = true\nopen_for = \"5s\"\n\n[breakers.layer-fam-after.keys.\"slow\"]\nhalf_open_calls = 2\n",
        &[],
    )
    .unwrap();
    let line = line!() + 2;
    let family = registry()
        .family::<String>("layer-fam-after", || {
            Config::builder().failure_rate(50).build().unwrap()
        })
        .unwrap();
    assert_eq!(family.config().failure_rate(), Some(50));
    assert_eq!(family.config().open_for(), Duration::from_secs(5));
    let slow = family.breaker(&"slow".to_owned());
    assert_eq!(slow.config().failure_rate(), Some(50));
    assert_eq!(slow.config().open_for(), Duration::from_secs(5));
    assert_eq!(slow.config().half_open_calls(), 2);
    let rate = source_of("layer-fam-after", "failure_rate");
    assert!(
        matches!(rate.source, ConfigSource::Site(site @ Site::Family { .. }) if site.line() == line),
        "{rate}"
    );
    assert!(matches!(
        source_of("layer-fam-after", "open_for").source,
        ConfigSource::Table { line: 3, .. }
    ));
    let key = registry()
        .key_config_sources("layer-fam-after", "slow")
        .unwrap();
    let key_rate = key.iter().find(|k| k.key == "failure_rate").unwrap();
    assert!(matches!(
        key_rate.source,
        ConfigSource::Site(Site::Family { .. })
    ));
    // The next load layers over the code's config again.
    load("[breakers.layer-fam-after]\nsuccesses = 1\n", &[]).unwrap();
    assert_eq!(family.config().failure_rate(), Some(50));
    assert_eq!(family.config().open_for(), Duration::from_secs(60));
}

#[test]
fn a_configured_config_is_a_layer_under_the_file_whatever_the_order() {
    use crate::config::sources::ConfigSource;
    let rate = || Config::builder().failure_rate(50).build().unwrap();
    // configure, then the file.
    let line = line!() + 1;
    assert!(registry().configure("layer-conf-first", rate()));
    load("[breakers.layer-conf-first]\nopen_for = \"5s\"\n", &[]).unwrap();
    // The file, then configure (the file keeps the first table: without it, that breaker
    // would go back to its configured config).
    load(
        "[breakers.layer-conf-first]\nopen_for = \"5s\"\n\
         [breakers.layer-conf-then]\ndynamic = true\nopen_for = \"5s\"\n",
        &[],
    )
    .unwrap();
    let then_line = line!() + 1;
    assert!(registry().configure("layer-conf-then", rate()));
    for (name, line) in [("layer-conf-first", line), ("layer-conf-then", then_line)] {
        let b = registry().get_or_create(name, Config::default);
        assert_eq!(b.config().failure_rate(), Some(50), "{name}");
        assert_eq!(b.config().open_for(), Duration::from_secs(5), "{name}");
        let rate = source_of(name, "failure_rate");
        assert!(
            matches!(rate.source, ConfigSource::Site(site @ Site::Configure { .. }) if site.line() == line),
            "{rate}"
        );
        assert_eq!(
            rate.to_string(),
            format!(
                "failure_rate = 50 (Registry::configure at runtime/src/load/tests/layers.rs:{line})"
            )
        );
        // A reload changes its keys only, over the configured config again (from a file of
        // its own, which leaves the other name's table alone).
        let var = format!(
            "BREAKERBOX__{}__MIN_CALLS",
            name.to_uppercase().replace('-', "_")
        );
        registry()
            .load_with_env(
                Path::new(&format!("{name}.toml")),
                &format!("[breakers.{name}]\nsuccesses = 1\n"),
                env_of(&[(&var, "5")]),
            )
            .unwrap();
        assert_eq!(b.config().failure_rate(), Some(50), "{name}");
        assert_eq!(b.config().min_calls(), 5, "{name}");
        assert_eq!(b.config().open_for(), Duration::from_secs(60), "{name}");
    }
    // Over an attribute: the configured config is the code's layer instead of the attribute's.
    assert!(registry().configure("layer-conf-attr", rate()));
    load("[breakers.layer-conf-attr]\nopen_for = \"5s\"\n", &[]).unwrap();
    let c = registry().get("layer-conf-attr").unwrap().config().clone();
    assert_eq!(c.failure_rate(), Some(50));
    assert_eq!(c.failures(), None);
    assert_eq!(c.open_for(), Duration::from_secs(5));
}

#[test]
fn a_configured_config_that_does_not_go_with_the_file_is_an_error_naming_both() {
    let config = Config::builder()
        .open_for(Duration::from_secs(10))
        .max_open_for(Duration::from_secs(20))
        .build()
        .unwrap();
    let line = line!() + 1;
    assert!(registry().configure("layer-conf-bad", config));
    let e = err("[breakers.layer-conf-bad]\nopen_for = \"30s\"\n", &[]);
    assert_eq!(
        e,
        format!(
            "breakers.toml:2: [breakers.layer-conf-bad] `max_open_for` must be at least `open_for`, got 20s with open_for 30s (max_open_for = 20s from Registry::configure at runtime/src/load/tests/layers.rs:{line}; open_for = 30s from [breakers.layer-conf-bad] at breakers.toml:2)"
        )
    );
}

#[test]
fn check_reports_two_calls_that_give_one_family_or_name_different_configs() {
    let first = line!() + 2;
    let _a = registry()
        .family::<String>("layer-fam-twice", || {
            Config::builder().failures(2).build().unwrap()
        })
        .unwrap();
    let then = line!() + 2;
    let _b = registry()
        .family::<String>("layer-fam-twice", || {
            Config::builder().failures(3).build().unwrap()
        })
        .unwrap();
    let conf_first = line!() + 1;
    assert!(registry().configure(
        "layer-conf-twice",
        Config::builder().failures(2).build().unwrap()
    ));
    let conf_then = line!() + 1;
    assert!(registry().configure(
        "layer-conf-twice",
        Config::builder().failures(3).build().unwrap()
    ));
    // The last `configure` is the one used.
    assert_eq!(
        registry()
            .get_or_create("layer-conf-twice", Config::default)
            .config()
            .failures(),
        Some(3)
    );
    let c = registry().check().unwrap_err();
    let shown = |name: &str| {
        c.conflicts()
            .iter()
            .find(|c| c.name() == name)
            .map(ToString::to_string)
            .unwrap_or_default()
    };
    let file = "runtime/src/load/tests/layers.rs";
    assert_eq!(
        shown("layer-fam-twice"),
        format!(
            "circuit breaker 'layer-fam-twice' is given different configs:\n  Registry::family at {file}:{first}: failures = 2\n  Registry::family at {file}:{then}: failures = 3"
        )
    );
    assert_eq!(
        shown("layer-conf-twice"),
        format!(
            "circuit breaker 'layer-conf-twice' is given different configs:\n  Registry::configure at {file}:{conf_first}: failures = 2\n  Registry::configure at {file}:{conf_then}: failures = 3"
        )
    );
}

/// A base and a single key's table are layers too: the same key set by one of them in two
/// files is reported, with both places.
#[test]
fn check_reports_a_key_a_base_or_a_key_table_of_two_files_sets() {
    let text = |open_for: &str| {
        format!(
            "[configs.layer-shared]\nopen_for = \"{open_for}\"\n\n[breakers.layer-two-keys]\ndynamic = true\n\n[breakers.layer-two-keys.keys.\"k\"]\nsuccesses = 1\n"
        )
    };
    for (file, text) in [("shared-a.toml", text("5s")), ("shared-b.toml", text("9s"))] {
        registry()
            .load_with_env(Path::new(file), &text, Vec::new())
            .unwrap();
    }
    let c = registry().check().unwrap_err();
    let shown = |name: &str| {
        c.two_files()
            .iter()
            .filter(|t| t.name() == name)
            .map(|t| (t.is_shared(), t.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        shown("configs.layer-shared"),
        [(
            true,
            "`open_for` is set by [configs.layer-shared] in two config files, at shared-a.toml:1 and then at shared-b.toml:1; each load replaces the table of the one before".to_owned()
        )]
    );
    assert_eq!(
        shown("layer-two-keys.keys.\"k\""),
        [(
            false,
            "circuit breaker 'layer-two-keys.keys.\"k\"': `successes` is set by [breakers.layer-two-keys.keys.\"k\"] in two config files, at shared-a.toml:7 and then at shared-b.toml:7; each load replaces the table of the one before".to_owned()
        )]
    );
}

/// A variable alone changes one key of a family or a breaker made in code before the load,
/// over the code's config.
#[test]
fn a_variable_alone_changes_one_key_over_code_made_before_the_load() {
    let rate = || Config::builder().failure_rate(50).build().unwrap();
    let family = registry()
        .family::<String>("layer-var-family", rate)
        .unwrap();
    let b = registry().get_or_create("layer-var-breaker", rate);
    load(
        "",
        &[
            ("BREAKERBOX__LAYER_VAR_FAMILY__OPEN_FOR", "2s"),
            ("BREAKERBOX__LAYER_VAR_BREAKER__OPEN_FOR", "3s"),
        ],
    )
    .unwrap();
    assert_eq!(family.config().failure_rate(), Some(50));
    assert_eq!(family.config().open_for(), Duration::from_secs(2));
    assert_eq!(b.config().failure_rate(), Some(50));
    assert_eq!(b.config().open_for(), Duration::from_secs(3));
    assert_eq!(
        source_of("layer-var-family", "open_for").to_string(),
        "open_for = 2s (BREAKERBOX__LAYER_VAR_FAMILY__OPEN_FOR)"
    );
}

/// A name `configure`d, then made a family by code: the configured config is its code's
/// layer, under the file's.
#[test]
fn a_configured_family_keeps_the_configured_keys_under_the_file() {
    use crate::config::sources::ConfigSource;
    let line = line!() + 1;
    assert!(registry().configure(
        "layer-conf-family",
        Config::builder().failure_rate(50).build().unwrap()
    ));
    let family = registry()
        .family::<String>("layer-conf-family", || {
            Config::builder().failures(9).build().unwrap()
        })
        .unwrap();
    assert_eq!(family.config().failure_rate(), Some(50));
    load("[breakers.layer-conf-family]\nopen_for = \"5s\"\n", &[]).unwrap();
    assert_eq!(family.config().failure_rate(), Some(50));
    assert_eq!(family.config().open_for(), Duration::from_secs(5));
    let rate = source_of("layer-conf-family", "failure_rate");
    assert!(
        matches!(rate.source, ConfigSource::Site(site @ Site::Configure { .. }) if site.line() == line),
        "{rate}"
    );
    // configure on a family that exists changes nothing.
    assert!(!registry().configure("layer-conf-family", Config::default()));
    assert_eq!(family.config().failure_rate(), Some(50));
}

/// A variable gone at the next load of the same file takes its key back to the layers under
/// it, as a table gone from the file does; the breaker keeps its state.
#[test]
fn a_variable_removed_between_two_loads_gives_the_key_back_to_the_attribute() {
    use crate::config::sources::ConfigSource;
    let file = Path::new("var-gone.toml");
    let var = [("BREAKERBOX__LAYER_VAR_GONE__OPEN_FOR", "5s")];
    registry().load_with_env(file, "", env_of(&var)).unwrap();
    let b = registry().get("layer-var-gone").unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    b.force_open();
    let names = registry().load_with_env(file, "", Vec::new()).unwrap();
    assert_eq!(names, ["layer-var-gone"]);
    assert_eq!(b.config().open_for(), Config::default().open_for());
    assert_eq!(b.config().failure_rate(), Some(50));
    assert_eq!(b.state(), crate::State::ForcedOpen);
    let open_for = source_of("layer-var-gone", "open_for");
    assert!(
        matches!(open_for.source, ConfigSource::Default),
        "{open_for}"
    );
    let rate = source_of("layer-var-gone", "failure_rate");
    assert!(
        matches!(rate.source, ConfigSource::Site(site) if site.line() == 130),
        "{rate}"
    );
}
