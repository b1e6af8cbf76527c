//! What the registry knows before any call: every `#[circuit_breaker]` function's name, config
//! and source location, gathered at link time; and the conflicts between config sources.
//!
//! # Why `linkme`
//!
//! Each attribute adds one [`Registration`] static to a distributed slice that the linker
//! gathers into one array, read in place by the registry on its first use. `inventory` was the
//! other candidate: it runs one constructor per entry before `main`. Measured on scratch
//! crates with 1000 entries of this shape (release, Linux x86-64, this 2-core machine under
//! load; medians of 3 to 5 rebuilds):
//!
//! | per 1000 entries | `linkme` 0.3.37 | `inventory` 0.3.25 |
//! |---|---:|---:|
//! | link (`-Z time-passes`, `link_binary`; none: 0.43 s) | 0.39 s | 0.72 s |
//! | CPU to rebuild the crate (none: 1.4 s) | 2.8 s | 3.7 s |
//! | stripped binary (none: 522 504 B) | +2.9 KB | +213 KB |
//! | instructions before `main` (`valgrind --tool=callgrind`) | 0 | ~69 000 |
//!
//! `linkme` supports Linux, Android, Fuchsia, macOS, iOS, tvOS, Windows, illumos, FreeBSD and
//! OpenBSD. Elsewhere (WebAssembly among them) breakerbox builds without the slice, and an
//! annotated breaker becomes known at its first call, as before.

use core::fmt;
use std::collections::BTreeSet;

use crate::breaker::Breaker;
use crate::config::{Config, ConfigBuilder, TwoFiles, Window};

pub use crate::site::Site;

/// One `#[circuit_breaker]` function, as the attribute registers it at link time. Not public
/// API: built only by the code the attribute generates.
#[doc(hidden)]
#[derive(Debug)]
pub struct Registration {
    name: &'static str,
    configure: fn(ConfigBuilder) -> ConfigBuilder,
    file: &'static str,
    line: u32,
    column: u32,
    /// `#[circuit_breaker(key = …)]`: the name is a keyed family's, not a breaker's.
    keyed: bool,
    /// `#[circuit_breaker(timeout = …)]` on an `async fn`: each call reads the breaker's
    /// `timeout`, so every layer of configuration may set it.
    timed: bool,
    /// `#[circuit_breaker(config = "<name>")]`: the `[configs.<name>]` table of a config file
    /// under the attribute's keys.
    base: Option<&'static str>,
    /// Whether `config` has logged that the runtime rejected the attribute's config. std's,
    /// not loom's: a flag, no protocol.
    reported: std::sync::atomic::AtomicBool,
}

impl Registration {
    /// The attribute's name, its policy keys as builder calls, and where it is written.
    pub const fn new(
        name: &'static str,
        configure: fn(ConfigBuilder) -> ConfigBuilder,
        file: &'static str,
        line: u32,
        column: u32,
    ) -> Registration {
        Registration {
            name,
            configure,
            file,
            line,
            column,
            keyed: false,
            timed: false,
            base: None,
            reported: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The same registration for a `#[circuit_breaker(key = …)]` function: its name is a keyed
    /// family's.
    pub const fn keyed(self) -> Registration {
        Registration {
            keyed: true,
            ..self
        }
    }

    /// The same registration for a function whose attribute names `timeout`: its calls are
    /// timed out after the breaker's current `timeout`, read at each call.
    pub const fn timed(self) -> Registration {
        Registration {
            timed: true,
            ..self
        }
    }

    /// The same registration for a function whose attribute names a base with
    /// `config = "<name>"`: a config file's `[configs.<name>]` table under its keys.
    pub const fn base(self, name: &'static str) -> Registration {
        Registration {
            base: Some(name),
            ..self
        }
    }

    /// The `[configs.<name>]` table the attribute takes as its base (`config = "<name>"`).
    pub fn base_name(&self) -> Option<&'static str> {
        self.base
    }

    /// Whether the function's calls read the breaker's `timeout` (its attribute names one).
    pub fn is_timed(&self) -> bool {
        self.timed
    }

    /// Whether the function is keyed (`key = …`).
    pub fn is_keyed(&self) -> bool {
        self.keyed
    }

    /// The breaker's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The attribute's config. It was validated when the attribute expanded, so `build` does
    /// not fail; should the runtime's rules ever be stricter than the macro's, the default
    /// config is used rather than panicking in a user's call path, and the mismatch — a bug
    /// in breakerbox — is logged at `error` (target `breakerbox`) the first time.
    pub fn config(&self) -> Config {
        match (self.configure)(Config::builder()).build() {
            Ok(config) => config,
            Err(error) => {
                let first = !self
                    .reported
                    .swap(true, std::sync::atomic::Ordering::Relaxed);
                if first {
                    tracing::error!(
                        target: "breakerbox",
                        name = self.name,
                        error = %error,
                        "#[circuit_breaker] at {}:{}:{} was accepted when it expanded, but the \
                         runtime rejects its config ({error}); breaker '{}' runs with the \
                         default config instead. This is a bug in breakerbox: please report it.",
                        self.file,
                        self.line,
                        self.column,
                        self.name
                    );
                }
                Config::default()
            }
        }
    }

    /// The attribute's keys set on `builder`, over what it holds: the attribute's layer of a
    /// config that a file adds layers to.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn configure_onto(&self, builder: ConfigBuilder) -> ConfigBuilder {
        (self.configure)(builder)
    }

    /// Where the attribute is written.
    pub fn site(&self) -> Site {
        let (file, line, column) = (self.file, self.line, self.column);
        if self.keyed {
            Site::KeyedAttribute { file, line, column }
        } else {
            Site::Attribute { file, line, column }
        }
    }
}

/// Every annotated function of the program, gathered by the linker. `breakerbox_linkme` is set
/// by build.rs on the platforms `linkme` supports.
#[cfg(breakerbox_linkme)]
#[linkme::distributed_slice]
#[doc(hidden)]
pub static REGISTRATIONS: [Registration];

/// The registrations the linker gathered.
#[cfg(breakerbox_linkme)]
pub(crate) fn registrations() -> &'static [Registration] {
    &REGISTRATIONS
}

/// No registrations where `linkme` does not work: an annotated breaker is known from its
/// first call.
#[cfg(not(breakerbox_linkme))]
pub(crate) fn registrations() -> &'static [Registration] {
    &[]
}

/// Adds the `static` item it wraps to the registrations. Not public API.
#[cfg(breakerbox_linkme)]
#[doc(hidden)]
#[macro_export]
macro_rules! __breakerbox_register {
    ($item:item) => {
        #[$crate::__private::linkme::distributed_slice($crate::__private::REGISTRATIONS)]
        #[linkme(crate = $crate::__private::linkme)]
        $item
    };
}

/// Where `linkme` does not work, the static stays an ordinary one, used at the first call.
#[cfg(not(breakerbox_linkme))]
#[doc(hidden)]
#[macro_export]
macro_rules! __breakerbox_register {
    ($item:item) => {
        $item
    };
}

/// Calls `$then!` with `Config`'s policy fields (every field but the clock) in the attribute's
/// order: the one list for the code that must name each field. [`same_policy`] destructures
/// `Config` by it, so a new field fails to compile until it is listed here.
macro_rules! policy_fields {
    ($then:ident) => {
        $then!(
            failures failures_within failure_rate window min_calls slow slow_rate open_for
            max_open_for backoff jitter half_open_calls successes probe_timeout max_concurrent
            probe probe_every max_keys idle_for latency health critical timeout
        )
    };
}

/// A config's policy keys, named as in the attribute and the TOML file, with their values.
pub(crate) fn keys(config: &Config) -> [(&'static str, String); 23] {
    macro_rules! names {
        ($($field:ident)*) => { [$(stringify!($field)),*] };
    }
    policy_fields!(names).map(|key| (key, value(config, key)))
}

/// The value of one policy key of `config`, as [`keys`] writes it (`unset` for an option not
/// set, durations as `Debug` shows them); empty for a name that is no key.
pub(crate) fn value(config: &Config, key: &str) -> String {
    fn count(v: Option<u32>) -> String {
        v.map_or_else(|| "unset".to_owned(), |v| v.to_string())
    }
    fn span(v: Option<core::time::Duration>) -> String {
        v.map_or_else(|| "unset".to_owned(), |v| format!("{v:?}"))
    }
    let c = config;
    match key {
        "failures" => c.failures.to_string(),
        "failures_within" => span(c.failures_within),
        "failure_rate" => count(c.failure_rate.map(u32::from)),
        "window" => match c.window {
            Window::Calls(n) => format!("{n} calls"),
            Window::Time(d) => format!("{d:?}"),
        },
        "min_calls" => c.min_calls.to_string(),
        "slow" => span(c.slow),
        "slow_rate" => count(c.slow_rate.map(u32::from)),
        "open_for" => format!("{:?}", c.open_for),
        "max_open_for" => format!("{:?}", c.max_open_for),
        "backoff" => c.backoff.to_string(),
        "jitter" => c.jitter.to_string(),
        "half_open_calls" => c.half_open_calls.to_string(),
        "successes" => c.successes.to_string(),
        "probe_timeout" => format!("{:?}", c.probe_timeout),
        "max_concurrent" => count(c.max_concurrent),
        "probe" => c.probe.as_ref().map_or("unset", |p| p.name()).to_owned(),
        "probe_every" => format!("{:?}", c.probe_every),
        "max_keys" => c.max_keys.to_string(),
        "idle_for" => format!("{:?}", c.idle_for),
        "latency" => c.latency.to_string(),
        "health" => c.health.to_string(),
        "critical" => c.critical.to_string(),
        "timeout" => span(c.timeout),
        _ => String::new(),
    }
}

/// Whether two configs have the same policy. The clock is not part of it: a clock set with
/// [`Registry::set_clock`](crate::Registry::set_clock) does not make configs differ. Field by
/// field, no clone: `get_or_create` compares on every call.
pub(crate) fn same_policy(a: &Config, b: &Config) -> bool {
    macro_rules! same {
        ($($field:ident)*) => {{
            let Config { $($field: _,)* clock: _ } = a;
            true $(&& a.$field == b.$field)*
        }};
    }
    policy_fields!(same)
}

/// The keys whose values differ among `configs`, in the attribute's order.
fn differing<'a>(configs: impl IntoIterator<Item = &'a Config>) -> Vec<&'static str> {
    let all: Vec<[(&'static str, String); 23]> = configs.into_iter().map(keys).collect();
    let Some(first) = all.first() else {
        return Vec::new();
    };
    (0..first.len())
        .filter(|&i| all.iter().any(|k| k[i].1 != first[i].1))
        .map(|i| first[i].0)
        .collect()
}

/// `failures = 3, open_for = 2s`: the values of `config` for `which` keys.
fn values(config: &Config, which: &[&'static str]) -> String {
    keys(config)
        .into_iter()
        .filter(|(key, _)| which.contains(key))
        .map(|(key, value)| format!("{key} = {value}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`Registry::try_get_or_create`](crate::Registry::try_get_or_create) asked for a config that
/// differs from the one the breaker has (or, for an annotated breaker not created yet, from
/// its attribute's).
///
/// The breaker the name has is still there: [`breaker`](ConfigConflict::breaker) gives it, for
/// a caller that goes on with it. The message names both sites and the keys that differ:
///
/// ```text
/// circuit breaker 'users' already has another config, from #[circuit_breaker] at
/// src/api.rs:12 (failures = 3); get_or_create at src/main.rs:40 asked for failures = 5
/// ```
#[derive(Clone)]
pub struct ConfigConflict(Box<ConflictInner>);

#[derive(Clone)]
struct ConflictInner {
    breaker: Breaker,
    existing_site: Option<Site>,
    wanted: Config,
    site: Site,
}

impl ConfigConflict {
    pub(crate) fn new(
        breaker: Breaker,
        existing_site: Option<Site>,
        wanted: Config,
        site: Site,
    ) -> ConfigConflict {
        ConfigConflict(Box::new(ConflictInner {
            breaker,
            existing_site,
            wanted,
            site,
        }))
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        self.0.breaker.name()
    }

    /// The breaker the name has, with its own config.
    pub fn breaker(&self) -> &Breaker {
        &self.0.breaker
    }

    /// The breaker the name has, for a caller that goes on with it.
    pub fn into_breaker(self) -> Breaker {
        self.0.breaker
    }

    /// The config the breaker has.
    pub fn existing(&self) -> &Config {
        self.0.breaker.config()
    }

    /// Where the breaker's config came from, if known (an attribute or the call that created
    /// it).
    pub fn existing_site(&self) -> Option<Site> {
        self.0.existing_site
    }

    /// The config that was asked for.
    pub fn wanted(&self) -> &Config {
        &self.0.wanted
    }

    /// Where it was asked for.
    pub fn site(&self) -> Site {
        self.0.site
    }

    /// The keys whose values differ, named as in the attribute (`failures`, `open_for`, …).
    pub fn differences(&self) -> Vec<&'static str> {
        differing([self.existing(), self.wanted()])
    }
}

impl fmt::Display for ConfigConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = self.differences();
        write!(
            f,
            "circuit breaker '{}' already has another config",
            self.name()
        )?;
        if let Some(site) = self.existing_site() {
            write!(f, ", from {site}")?;
        }
        write!(
            f,
            " ({}); {} asked for {}",
            values(self.existing(), &keys),
            self.site(),
            values(self.wanted(), &keys)
        )
    }
}

impl fmt::Debug for ConfigConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigConflict")
            .field("name", &self.name())
            .field("existing_site", &self.existing_site())
            .field("site", &self.site())
            .field("differences", &self.differences())
            .finish()
    }
}

impl std::error::Error for ConfigConflict {}

/// One name given different configs: every site that gave it one, with its config.
#[derive(Clone, Debug)]
pub struct Conflict {
    pub(crate) name: String,
    pub(crate) sites: Vec<(Site, Config)>,
}

impl Conflict {
    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every site that gives the name a config, with that config, sorted by site.
    pub fn sites(&self) -> &[(Site, Config)] {
        &self.sites
    }

    /// Whether some sites make the name a keyed family and others a single breaker. Their
    /// rejections, metrics and registry entries would share the name.
    pub fn keyed_and_unkeyed(&self) -> bool {
        mixed(&self.sites)
    }

    /// The keys whose values differ among the sites, named as in the attribute.
    pub fn differences(&self) -> Vec<&'static str> {
        differing(self.sites.iter().map(|(_, config)| config))
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = self.differences();
        if self.keyed_and_unkeyed() {
            write!(
                f,
                "circuit breaker '{}' is both a keyed family and a single breaker; give one of \
                 them another name:",
                self.name
            )?;
        } else {
            write!(
                f,
                "circuit breaker '{}' is given different configs:",
                self.name
            )?;
        }
        for (site, config) in &self.sites {
            write!(f, "\n  {site}")?;
            if !keys.is_empty() {
                write!(f, ": {}", values(config, &keys))?;
            }
        }
        Ok(())
    }
}

/// What [`Registry::check`](crate::Registry::check) found: names given different configs by
/// two or more sites, and keys set by the tables of two config files. Displays every name,
/// each site with its file and line, and the values of the keys that differ:
///
/// ```text
/// circuit breaker 'users' is given different configs:
///   #[circuit_breaker] at src/api.rs:12: failures = 3
///   #[circuit_breaker] at src/admin.rs:40: failures = 5
/// ```
#[derive(Clone, Debug)]
pub struct Conflicts(pub(crate) Vec<Conflict>, pub(crate) Vec<TwoFiles>);

impl Conflicts {
    /// Each conflicting name, sorted by name.
    pub fn conflicts(&self) -> &[Conflict] {
        &self.0
    }

    /// Each breaker whose keys two config files' tables set (the last such pair of files for
    /// each), sorted by name.
    pub fn two_files(&self) -> &[TwoFiles] {
        &self.1
    }
}

impl fmt::Display for Conflicts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines = self
            .0
            .iter()
            .map(|c| c as &dyn fmt::Display)
            .chain(self.1.iter().map(|t| t as &dyn fmt::Display));
        for (i, line) in lines.enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            line.fmt(f)?;
        }
        Ok(())
    }
}

impl std::error::Error for Conflicts {}

/// Whether `sites` name both a keyed family and a single breaker.
fn mixed(sites: &[(Site, Config)]) -> bool {
    sites.iter().any(|(s, _)| s.is_keyed()) && sites.iter().any(|(s, _)| !s.is_keyed())
}

/// Groups `(site, config)` pairs into a conflict if their policies are not all the same, or
/// if some name a keyed family and others a single breaker.
pub(crate) fn conflict(name: &str, mut sites: Vec<(Site, Config)>) -> Option<Conflict> {
    sites.sort_by_key(|(site, _)| *site);
    let mut seen = BTreeSet::new();
    sites.retain(|(site, _)| seen.insert(*site));
    let first = &sites.first()?.1;
    let mixed = mixed(&sites);
    if !mixed && sites.iter().all(|(_, config)| same_policy(first, config)) {
        return None;
    }
    Some(Conflict {
        name: name.to_owned(),
        sites,
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    /// Counts the `error` events of target `breakerbox` and keeps their messages.
    #[derive(Default)]
    struct Errors {
        count: AtomicUsize,
        last: std::sync::Mutex<String>,
    }

    struct Message<'a>(&'a mut String);

    impl tracing::field::Visit for Message<'_> {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
            if field.name() == "message" {
                *self.0 = format!("{value:?}");
            }
        }
    }

    impl Subscriber for &'static Errors {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let meta = event.metadata();
            if *meta.level() == Level::ERROR && meta.target() == "breakerbox" {
                self.count.fetch_add(1, Ordering::Relaxed);
                event.record(&mut Message(&mut self.last.lock().unwrap()));
            }
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// The attribute and the runtime validate configs apart (`macros/src/valid.rs`, whose
    /// `mirror` test holds them together). Should the runtime ever reject a config the
    /// attribute accepted, the breaker runs with the default config, and the mismatch is
    /// logged at `error`, once, naming the attribute's site.
    #[test]
    fn a_config_the_runtime_rejects_is_logged_once_and_the_default_used() {
        static REJECTED: Registration =
            Registration::new("mirror-bug", |b| b.failures(0), "src/lib.rs", 7, 1);
        static ERRORS: std::sync::LazyLock<Errors> = std::sync::LazyLock::new(Errors::default);
        let errors: &'static Errors = &ERRORS;
        tracing::subscriber::with_default(errors, || {
            assert_eq!(REJECTED.config(), Config::default());
            assert_eq!(REJECTED.config(), Config::default());
        });
        assert_eq!(errors.count.load(Ordering::Relaxed), 1, "logged once");
        let message = errors.last.lock().unwrap().clone();
        assert!(message.contains("src/lib.rs:7:1"), "{message}");
        assert!(message.contains("breaker 'mirror-bug'"), "{message}");
        assert!(message.contains("`failures`"), "{message}");
    }
}
