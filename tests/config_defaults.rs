//! The worked example of docs/configuration.md, loaded as the page gives it: a config file's
//! layers over the `#[circuit_breaker]` attributes, key by key — `[defaults]`, a named base, a
//! table, a single key's table and a variable, each changing only the keys it names.
//!
//! `[defaults]` reaches every annotated breaker of the program, and the load reads the real
//! environment: each test runs alone in a process of its own (`support::alone_with_env`), the
//! worked example's with the page's variable from the start.
#![cfg(feature = "serde")]

use std::time::Duration;

use breakerbox::{Breaker, Config, Rejected, circuit_breaker, registry};

#[allow(dead_code)]
#[path = "attribute/support.rs"]
mod support;

#[derive(Debug)]
struct Error;

impl From<Rejected> for Error {
    fn from(_: Rejected) -> Self {
        Error
    }
}

// The page's attributes.
#[circuit_breaker(name = "profile", failure_rate = 50, min_calls = 20)]
fn profile(id: u64) -> Result<u64, Error> {
    Ok(id)
}

#[circuit_breaker(name = "pricing", failures = 3)]
fn price(sku: &str) -> Result<usize, Error> {
    Ok(sku.len())
}

#[circuit_breaker(name = "hosts", key = host, failures = 2)]
fn fetch(host: &str) -> Result<usize, Error> {
    Ok(host.len())
}

const PAGE: &str = include_str!("../docs/configuration.md");
const SOURCE: &str = include_str!("config_defaults.rs");

/// The first fenced block of `lang` after the heading `heading`.
fn block(heading: &str, lang: &str) -> String {
    let section = &PAGE[PAGE.find(heading).expect("the heading")..];
    let fence = format!("```{lang}\n");
    let start = section.find(&fence).expect("the block") + fence.len();
    section[start..start + section[start..].find("```").unwrap()].to_owned()
}

/// The page's config file.
fn page_file() -> String {
    block("## A worked example", "toml")
}

/// The line of `file` with the first `text` at or after the table whose header starts with
/// `[{table}` (or from the top, without such a table).
fn line_of(file: &str, table: &str, text: &str) -> usize {
    let start = file.find(&format!("[{table}")).unwrap_or(0);
    file[..start + file[start..].find(text).unwrap()]
        .matches('\n')
        .count()
        + 1
}

/// How `config_sources` names the attribute of the single breaker `name` in this file.
fn attribute_of(name: &str) -> String {
    let at = SOURCE
        .lines()
        .position(|l| l.starts_with(&format!("#[circuit_breaker(name = \"{name}\"")))
        .unwrap()
        + 1;
    format!("#[circuit_breaker] at tests/config_defaults.rs:{at}")
}

/// The page's file with a table for `tenant-a`, a breaker made in code.
fn with_tenant(file: &str) -> String {
    format!("{file}\n[breakers.tenant-a]\ndynamic = true\nsuccesses = 2\n")
}

/// `tenant-a`, made in code with keys of its own.
fn tenant() -> Breaker {
    registry().get_or_create("tenant-a", || {
        Config::builder()
            .failures(3)
            .half_open_calls(4)
            .build()
            .unwrap()
    })
}

/// Every row of the page's table, values and sources, with the page's variable set.
#[test]
fn the_worked_example_gives_what_the_page_says() {
    support::alone_with_env(
        concat!(
            module_path!(),
            "::the_worked_example_gives_what_the_page_says"
        ),
        &[("BREAKERBOX__PRICING__OPEN_FOR", "90s")],
        the_worked_example_gives_what_the_page_says_alone,
    );
}

fn the_worked_example_gives_what_the_page_says_alone() {
    // The page's attributes are this file's.
    let attributes = block("## A worked example", "rust");
    for line in attributes.lines().filter(|l| l.starts_with("#[")) {
        assert!(SOURCE.lines().any(|l| l == line), "{line}");
    }

    // Validation runs on the merged config: a default that does not go with an attribute's
    // keys is an error naming both, and the load applies nothing.
    let e = registry()
        .load_toml_str("app.toml", "[defaults]\nmin_calls = 20\n")
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "app.toml:2: [breakers.hosts] `min_calls` requires `failure_rate` or `slow_rate` \
         (min_calls = 20 from [defaults] at app.toml:2; `failure_rate` is not set; \
         `slow_rate` is not set)"
    );
    assert_eq!(
        registry().get("pricing").unwrap().config().failures(),
        Some(3)
    );

    let file = page_file();
    let names = registry().load_toml_str("app.toml", &file).unwrap();
    assert_eq!(names, ["hosts", "pricing", "profile"]);

    profile(1).unwrap();
    let c = registry().get("profile").unwrap().config().clone();
    assert_eq!(c.failure_rate(), Some(50));
    assert_eq!(c.min_calls(), 20);
    assert_eq!(c.open_for(), Duration::from_secs(5));
    assert_eq!(c.half_open_calls(), 2);
    assert_eq!(c.successes(), 1);

    // `pricing` existed before the load (`get` above): it took the file live.
    price("a").unwrap();
    let c = registry().get("pricing").unwrap().config().clone();
    assert_eq!(c.failures(), Some(3));
    assert_eq!(c.open_for(), Duration::from_secs(90));
    assert_eq!(c.successes(), 2);
    assert_eq!(c.half_open_calls(), 2);

    // The keyed attribute's family, created after the load, takes the same layers.
    fetch("fast.example").unwrap();
    let family = registry()
        .family::<String>("hosts", Config::default)
        .unwrap();
    let c = family.breaker("fast.example").config().clone();
    assert_eq!(c.failures(), Some(2));
    assert_eq!(c.open_for(), Duration::from_secs(20));
    assert_eq!(c.half_open_calls(), 2);
    let c = family.breaker("slow.example").config().clone();
    assert_eq!(c.failures(), Some(2));
    assert_eq!(c.open_for(), Duration::from_secs(300));

    // `config_sources` says where each value came from, as the page's table does.
    let line = |table: &str, text: &str| line_of(&file, table, text);
    let keyed_attribute = SOURCE
        .lines()
        .position(|l| l.starts_with("#[circuit_breaker(name = \"hosts\""))
        .unwrap()
        + 1;
    let rows: Vec<(&str, &str, &str, String)> = vec![
        ("profile", "failure_rate", "50", attribute_of("profile")),
        ("profile", "min_calls", "20", attribute_of("profile")),
        (
            "profile",
            "open_for",
            "5s",
            format!(
                "[breakers.profile] at app.toml:{}",
                line("breakers.profile", "open_for")
            ),
        ),
        (
            "profile",
            "half_open_calls",
            "2",
            format!(
                "[defaults] at app.toml:{}",
                line("defaults", "half_open_calls")
            ),
        ),
        (
            "profile",
            "successes",
            "1",
            "the built-in default".to_owned(),
        ),
        ("pricing", "failures", "3", attribute_of("pricing")),
        (
            "pricing",
            "open_for",
            "90s",
            "BREAKERBOX__PRICING__OPEN_FOR".to_owned(),
        ),
        (
            "pricing",
            "successes",
            "2",
            format!(
                "[configs.patient] at app.toml:{}",
                line("configs.patient", "successes")
            ),
        ),
        (
            "pricing",
            "half_open_calls",
            "2",
            format!(
                "[defaults] at app.toml:{}",
                line("defaults", "half_open_calls")
            ),
        ),
        (
            "hosts",
            "failures",
            "2",
            format!("#[circuit_breaker(key = …)] at tests/config_defaults.rs:{keyed_attribute}"),
        ),
        (
            "hosts",
            "open_for",
            "20s",
            format!("[defaults] at app.toml:{}", line("defaults", "open_for")),
        ),
    ];
    for (name, key, value, source) in rows {
        let sources = registry().config_sources(name).unwrap();
        let k = sources.iter().find(|k| k.key == key).unwrap();
        assert_eq!(
            k.to_string(),
            format!("{key} = {value} ({source})"),
            "{name}"
        );
    }
    // `[defaults]` reaches a table's breaker made in code too, under the code's keys.
    registry()
        .load_toml_str("app.toml", &with_tenant(&file))
        .unwrap();
    let tenant = tenant();
    let c = tenant.config();
    assert_eq!(c.failures(), Some(3));
    assert_eq!(c.half_open_calls(), 4);
    assert_eq!(c.open_for(), Duration::from_secs(20));
    assert_eq!(c.successes(), 2);

    let slow = registry()
        .key_config_sources("hosts", "slow.example")
        .unwrap();
    let k = slow.iter().find(|k| k.key == "open_for").unwrap();
    assert_eq!(
        k.to_string(),
        format!(
            "open_for = 300s ([breakers.hosts.keys.\"slow.example\"] at app.toml:{})",
            line("breakers.hosts.keys", "open_for")
        )
    );
}

/// The page's file loaded again without its `[defaults]`, tables and bases: every breaker its
/// last load reached takes the layers under them again, keeping its state. A variable gone at
/// the next load does the same: the runtime's unit tests check that with an environment given
/// to each load, as a test process's own environment does not change while it runs.
#[test]
fn the_file_again_without_its_layers_gives_each_breaker_the_layers_under_them() {
    support::alone_with_env::<&str>(
        concat!(
            module_path!(),
            "::the_file_again_without_its_layers_gives_each_breaker_the_layers_under_them"
        ),
        &[],
        the_file_again_without_its_layers_gives_each_breaker_the_layers_under_them_alone,
    );
}

fn the_file_again_without_its_layers_gives_each_breaker_the_layers_under_them_alone() {
    // The breakers as the worked example leaves them: `pricing` made before the file, a call
    // of each function, the family's two keys and `tenant-a`, made in code.
    let pricing = registry().get("pricing").unwrap();
    let file = page_file();
    registry()
        .load_toml_str("app.toml", &with_tenant(&file))
        .unwrap();
    profile(1).unwrap();
    price("a").unwrap();
    fetch("fast.example").unwrap();
    let family = registry()
        .family::<String>("hosts", Config::default)
        .unwrap();
    let tenant = tenant();
    assert_eq!(pricing.config().open_for(), Duration::from_secs(120));
    assert_eq!(tenant.config().successes(), 2);
    assert_eq!(
        family.breaker("slow.example").config().open_for(),
        Duration::from_secs(300)
    );
    assert!(
        registry()
            .key_config_sources("hosts", "slow.example")
            .is_some()
    );

    pricing.force_open();
    let names = registry().load_toml_str("app.toml", "").unwrap();
    assert_eq!(names, ["hosts", "pricing", "profile", "tenant-a"]);
    let default = Config::default();
    let c = registry().get("profile").unwrap().config().clone();
    assert_eq!(c.failure_rate(), Some(50));
    assert_eq!(c.min_calls(), 20);
    assert_eq!(c.open_for(), default.open_for());
    assert_eq!(c.half_open_calls(), default.half_open_calls());
    let c = pricing.config();
    assert_eq!(c.failures(), Some(3));
    assert_eq!(c.open_for(), default.open_for());
    assert_eq!(c.successes(), default.successes());
    assert_eq!(pricing.state(), breakerbox::State::ForcedOpen);
    let c = tenant.config();
    assert_eq!((c.failures(), c.half_open_calls()), (Some(3), 4));
    assert_eq!(c.successes(), default.successes());
    let c = family.breaker("slow.example").config().clone();
    assert_eq!(c.failures(), Some(2));
    assert_eq!(c.open_for(), default.open_for());
    assert_eq!(registry().key_config_sources("hosts", "slow.example"), None);
    for (name, key, source) in [
        (
            "profile",
            "half_open_calls",
            "the built-in default".to_owned(),
        ),
        ("pricing", "open_for", "the built-in default".to_owned()),
        ("pricing", "failures", attribute_of("pricing")),
    ] {
        let sources = registry().config_sources(name).unwrap();
        let k = sources.iter().find(|k| k.key == key).unwrap();
        assert!(
            k.to_string().ends_with(&format!("({source})")),
            "{name}: {k}"
        );
    }
}
