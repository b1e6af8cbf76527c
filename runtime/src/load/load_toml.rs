//! `Registry::load_toml`: configures breakers from a TOML file and the environment.

use std::ffi::OsString;
use std::path::Path;

use super::file::read;
use super::load_error::LoadError;
use crate::registry::Registry;

impl Registry {
    /// Configures breakers from a TOML file and the `BREAKERBOX__<NAME>__<KEY>=value`
    /// environment variables; returns the names configured, sorted. See docs/configuration.md
    /// for the whole picture.
    ///
    /// Keys are the attribute's (`failures`, `failure_rate`, `window` as a count or `"10s"`,
    /// `min_calls`, `slow`, `slow_rate`, `open_for`, `max_open_for`, `backoff`, `jitter`,
    /// `half_open_calls`, `successes`, `probe_timeout`, `max_concurrent`, `probe_every` (the
    /// probe function stays the code's), `timeout` (for a function whose attribute names one;
    /// see docs/configuration.md), and for a keyed family `max_keys` and `idle_for`),
    /// and durations read as in the attribute, with the same messages. Other top-level tables
    /// than `breakers`, `defaults` and `configs` are ignored, so the file can be the
    /// application's own config; but one spelt one edit away from `breakers` (`[breaker.x]`,
    /// `[Breakers.x]`) is an error, as a typo that would configure nothing.
    ///
    /// **Layers, key by key.** A breaker's config is built from these layers, lowest first;
    /// each sets only the keys it names, and the keys no layer names keep the built-in
    /// defaults ([`Config::default`](crate::Config::default)):
    ///
    /// 1. the built-in defaults;
    /// 2. `[defaults]`, for every breaker the file reaches (every `#[circuit_breaker]`
    ///    function's breaker or keyed family, and every `[breakers.<name>]` table);
    /// 3. the named base a table picks with `base = "<name>"`, a `[configs.<name>]` table;
    /// 4. the `#[circuit_breaker]` attribute's keys; for a breaker made in code
    ///    (`get_or_create`), before or after the load, the keys of its code's config that are
    ///    not the defaults (should they not go with the file's, it gets the file's keys over
    ///    the defaults, and an `error` is logged); a keyed family made in code
    ///    ([`family`](Registry::family)) has no such layer: the code's config is replaced, as
    ///    [`configure`](Registry::configure) does;
    /// 5. `[breakers.<name>]`, and for one key of a keyed family
    ///    `[breakers.<name>.keys."<key>"]` over it;
    /// 6. the environment variables.
    ///
    /// ```toml
    /// [defaults]
    /// open_for = "30s"
    ///
    /// [configs.rate]
    /// failure_rate = 50
    /// window = "10s"
    /// min_calls = 20
    ///
    /// [breakers.payments]        # over its #[circuit_breaker] attribute's keys
    /// base = "rate"
    /// open_for = "5s"
    ///
    /// # Created at run time with `registry().get_or_create("tenant-a", …)`.
    /// [breakers.tenant-a]
    /// dynamic = true
    /// failures = 3
    /// ```
    ///
    /// The merged config is checked once. An error names the key, its value, and the layer
    /// each key involved came from, and is reported at the highest layer among them that the
    /// file or the environment holds:
    ///
    /// ```text
    /// breakers.toml:2: [breakers.users] `min_calls` requires `failure_rate` or `slow_rate`
    /// (min_calls = 20 from [defaults] at breakers.toml:2; `failure_rate` is not set;
    /// `slow_rate` is not set)
    /// ```
    ///
    /// `failures` (with `failures_within`) and `failure_rate` exclude each other: a layer that
    /// names one drops the other from the layers under it (a rate dropped takes its `window`
    /// and `min_calls` along, unless `slow_rate` uses them), so a table can switch an
    /// attribute's breaker from one way of tripping to the other.
    ///
    /// **Names are checked.** A table must name a breaker the registry knows: annotated
    /// (keyed or not), created, or configured before. A misspelt `[breakers.inventroy]` fails
    /// with "no breaker named `inventroy`; did you mean `inventory`?" rather than leaving
    /// `inventory` to its call site. A breaker that only exists once the program makes it
    /// (`get_or_create`, [`family`](Registry::family), [`Breaker::new`](crate::Breaker::new))
    /// opts out with `dynamic = true` in its table. A `base` must name a `[configs.<name>]`
    /// table of the file.
    ///
    /// **Keyed families.** A `[breakers.<name>]` table also configures the keyed family
    /// `name` ([`family`](Registry::family), or `#[circuit_breaker(key = …)]`): every key's
    /// breaker gets its config, and `max_keys` and `idle_for` bound the family. A
    /// `[breakers.<name>.keys."<key>"]` table gives one key (as it displays) its own keys over
    /// the family's layers. A keyed attribute's family is known from the start, like a plain
    /// attribute's breaker.
    ///
    /// ```toml
    /// [breakers.api]
    /// failures = 5
    /// max_keys = 1000
    ///
    /// [breakers.api.keys."slow-host.example"]
    /// open_for = "5m"
    /// ```
    ///
    /// **Environment.** `BREAKERBOX__PAYMENTS__OPEN_FOR=5s` sets one key of `payments`,
    /// over every layer of the file, whether the file has a table for it or not.
    /// `<NAME>` is the breaker's name with every ASCII letter in capitals and every character
    /// other than an ASCII letter or digit written `_`: `users-api` → `USERS_API`, the
    /// attribute's default name `my_app::client::fetch_user` → `MY_APP__CLIENT__FETCH_USER`
    /// (so `BREAKERBOX__MY_APP__CLIENT__FETCH_USER__FAILURES=3`). The key is what follows the
    /// last `__` (no key contains `__`), in any case, and so is the prefix
    /// (`breakerbox__users__open_for`); a variable written with single underscores that ends in
    /// a key (`BREAKERBOX_USERS_OPEN_FOR`, as Spring's relaxed binding writes its own) is an
    /// error that shows it written right. A value reads as a number if it is one,
    /// else as a string. Every variable must apply: one whose `<NAME>` is no breaker the
    /// registry knows nor a table of this file, one that is malformed or has an unknown key,
    /// and one whose name or value is not UTF-8 is an error, with "did you mean" for a name
    /// or key close to a real one. Two breakers with the same `<NAME>` are an error only when
    /// a variable addresses them.
    ///
    /// **Order does not matter.** A breaker that exists already (an annotated one is created
    /// by [`get`](Registry::get), [`breakers`](Registry::breakers) and metrics exporters)
    /// takes the file live, as [`reload_toml`](Registry::reload_toml) gives it,
    /// keeping its state; a change it cannot take live is a [`LoadError::NotReloadable`].
    ///
    /// Errors come in order: the file's syntax, its keys and values, its breaker and base
    /// names, then the environment, then the combinations of keys; so a variable never hides
    /// a mistake in the file. All or nothing: on any error, no breaker is configured and the
    /// error names the file, line and key (or the variable). The one exception is a race: a
    /// single key's table of a family another thread creates while the file loads is
    /// reported as [`LoadError::AlreadyCreated`], with the tables before it applied.
    pub fn load_toml(&self, path: impl AsRef<Path>) -> Result<Vec<String>, LoadError> {
        let path = path.as_ref();
        self.load_toml_str(path, &read(path)?)
    }

    /// [`load_toml`](Registry::load_toml) from a string, such as a config service's answer.
    /// Environment overrides apply too.
    ///
    /// `origin` stands for the file's path: it names the text in errors, and a later load
    /// under the same `origin` replaces this one. A breaker this text configured and the later
    /// one no longer does takes the layers under it again (its attribute's or its code's
    /// config, the defaults), as [`reload_toml`](Registry::reload_toml) says under "What was
    /// removed is gone"; a load under another `origin` leaves it. Give each source of config
    /// its own `origin`.
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config};
    ///
    /// let code = || Config::builder().failures(5).build().unwrap();
    /// let a = registry().get_or_create("doc-origin-a", code);
    /// let b = registry().get_or_create("doc-origin-b", code);
    /// let both = "[breakers.doc-origin-a]\nfailures = 2\n[breakers.doc-origin-b]\nfailures = 2\n";
    /// registry().load_toml_str("service", both).unwrap();
    /// assert_eq!((a.config().failures(), b.config().failures()), (Some(2), Some(2)));
    ///
    /// // Another origin adds its layer and leaves the first one's.
    /// registry().load_toml_str("other", "[breakers.doc-origin-a]\nopen_for = \"9s\"\n").unwrap();
    /// assert_eq!(b.config().failures(), Some(2));
    ///
    /// // The same origin again, without `doc-origin-b`: it takes its code's config again.
    /// registry().load_toml_str("service", "[breakers.doc-origin-a]\nfailures = 2\n").unwrap();
    /// assert_eq!((a.config().failures(), b.config().failures()), (Some(2), Some(5)));
    /// ```
    pub fn load_toml_str(
        &self,
        origin: impl AsRef<Path>,
        text: &str,
    ) -> Result<Vec<String>, LoadError> {
        self.load_with_env(origin.as_ref(), text, std::env::vars_os())
    }

    pub(crate) fn load_with_env(
        &self,
        path: &Path,
        text: &str,
        env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Vec<String>, LoadError> {
        // A breaker that exists takes the file live, as a reload gives it.
        self.reload_with_env(path, text, env)
    }
}
