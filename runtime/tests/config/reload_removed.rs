//! A reload of a file recomputes every breaker its last load reached: a table gone from it
//! gives its breaker the layers under it again, keeping the breaker's state.
#![cfg(feature = "serde")]

use std::time::Duration;

use breakerbox_runtime::{
    Breaker, BreakerMap, Config, ConfigBuilder, ConfigSource, LoadError, ManualClock, State,
    Window, registry,
};

fn live(name: &str, config: ConfigBuilder) -> Breaker {
    let config = config.clock(ManualClock::new()).build().unwrap();
    registry().get_or_create(name, || config)
}

fn source(name: &str, key: &str) -> ConfigSource {
    let sources = registry().config_sources(name).unwrap();
    sources.into_iter().find(|k| k.key == key).unwrap().source
}

#[test]
fn a_table_removed_from_the_file_gives_its_breaker_the_code_config_again() {
    let code = || {
        Config::builder()
            .failure_rate(50)
            .min_calls(2)
            .window(Window::Calls(4))
    };
    let b = live("removed.table", code());
    for _ in 0..2 {
        b.call(|| Err::<(), _>("down")).unwrap_err();
    }
    assert_eq!(b.state(), State::Open);
    let with = "[breakers.\"removed.table\"]\nopen_for = \"5s\"\n";
    registry()
        .reload_toml_str("removed-table.toml", with)
        .unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    assert!(matches!(
        source("removed.table", "open_for"),
        ConfigSource::Table { line: 2, .. }
    ));
    // Another file's load leaves what this one gave.
    registry()
        .reload_toml_str("removed-table-other.toml", "")
        .unwrap();
    assert_eq!(b.config().open_for(), Duration::from_secs(5));
    // The same file without the table: the code's config and the defaults again.
    let names = registry()
        .reload_toml_str("removed-table.toml", "")
        .unwrap();
    assert_eq!(names, ["removed.table"]);
    assert_eq!(b.config().open_for(), Config::default().open_for());
    assert_eq!(b.config().failure_rate(), Some(50));
    assert_eq!(b.state(), State::Open, "state kept");
    assert!(matches!(
        source("removed.table", "open_for"),
        ConfigSource::Default
    ));
    assert!(matches!(
        source("removed.table", "failure_rate"),
        ConfigSource::Site(_)
    ));
    // Once back, the next load of the file no longer names it.
    let names = registry()
        .reload_toml_str("removed-table.toml", "")
        .unwrap();
    assert_eq!(names, ["removed.table"]);
}

#[test]
fn a_key_table_removed_from_the_file_gives_the_key_the_family_config_again() {
    let config = Config::builder()
        .failures(3)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let f: BreakerMap<String> = registry().family("removed.key", || config).unwrap();
    for _ in 0..2 {
        let _ = f.call("slow", || Err::<(), _>("down"));
    }
    let with = "[breakers.\"removed.key\".keys.\"slow\"]\nopen_for = \"5m\"\n";
    registry()
        .reload_toml_str("removed-key.toml", with)
        .unwrap();
    let slow = f.get("slow").unwrap();
    assert_eq!(slow.config().open_for(), Duration::from_secs(300));
    assert!(
        registry()
            .key_config_sources("removed.key", "slow")
            .is_some()
    );
    registry().reload_toml_str("removed-key.toml", "").unwrap();
    assert_eq!(slow.config().open_for(), Config::default().open_for());
    assert_eq!(slow.config().failures(), Some(3));
    assert_eq!(slow.metrics().consecutive_failures, 2, "counts kept");
    // The key has no table of its own any more: the family's layers are its account.
    assert_eq!(registry().key_config_sources("removed.key", "slow"), None);
    assert!(matches!(
        source("removed.key", "open_for"),
        ConfigSource::Default
    ));
}

/// Going back to the layers under a removed table is a change like any other: one a live
/// breaker cannot take refuses the whole reload.
#[test]
fn a_removed_table_whose_revert_a_live_breaker_cannot_take_refuses_the_reload() {
    let with = "[breakers.\"removed.refused\"]\ndynamic = true\nfailure_rate = 50\n\n\
                [breakers.\"removed.kept\"]\ndynamic = true\nfailures = 5\n";
    registry()
        .reload_toml_str("removed-refused.toml", with)
        .unwrap();
    let refused = live("removed.refused", Config::builder().failures(3));
    let kept = live("removed.kept", Config::builder().failures(3));
    assert_eq!(refused.config().failure_rate(), Some(50));
    assert_eq!(kept.config().failures(), Some(5));
    // Without its table, `removed.refused` would switch back to consecutive failures.
    let without = "[breakers.\"removed.kept\"]\nfailures = 6\n";
    let e = registry()
        .reload_toml_str("removed-refused.toml", without)
        .unwrap_err();
    assert!(
        matches!(&e, LoadError::NotReloadable { breaker, key: Some(key), .. }
            if breaker == "removed.refused" && key == "failure_rate"),
        "{e}"
    );
    assert_eq!(kept.config().failures(), Some(5), "nothing applied");
    assert_eq!(refused.config().failure_rate(), Some(50));
}
