//! Where each key of a config came from: [`Registry::config_sources`] and
//! [`Registry::key_config_sources`], read from what the config files' loads recorded
//! (`config::layers::FileBooks`) and from the code's layer.

use crate::config::Config;
use crate::config::layers::key_account;
use crate::config::sources::{ConfigSource, KeySource};
use crate::registration::{Site, value as key_value};
use crate::registry::Registry;

impl Registry {
    /// Every key of the config of the breaker or keyed family `name`, with its effective value
    /// and where that value came from: the built-in default, a config file's `[defaults]`,
    /// base, or table (with the file and line), an environment variable, the
    /// `#[circuit_breaker]` attribute or the `get_or_create` call that gave it (with its file
    /// and line), or a whole config set in code. In the order of the keys' list
    /// ([`config_keys::KEYS`](crate::config_keys::KEYS)). `None` if the registry knows no such
    /// name. Creates nothing.
    ///
    /// A key whose value changed since the last file was applied (by
    /// [`Breaker::reconfigure`](crate::Breaker::reconfigure)) is said to come from
    /// [`ConfigSource::Code`].
    ///
    /// ```
    /// use breakerbox_runtime::{registry, Config, ConfigSource};
    ///
    /// registry().load_toml_str("app.toml", "[breakers.doc-sources]\ndynamic = true\nopen_for = \"5s\"\n")?;
    /// let _ = registry().get_or_create("doc-sources", Config::default);
    /// let sources = registry().config_sources("doc-sources").unwrap();
    /// let open_for = sources.iter().find(|k| k.key == "open_for").unwrap();
    /// assert_eq!(open_for.value, "5s");
    /// assert_eq!(open_for.to_string(), "open_for = 5s ([breakers.doc-sources] at app.toml:3)");
    /// let failures = sources.iter().find(|k| k.key == "failures").unwrap();
    /// assert_eq!(failures.source, ConfigSource::Default);
    /// # Ok::<(), breakerbox_runtime::LoadError>(())
    /// ```
    pub fn config_sources(&self, name: &str) -> Option<Vec<KeySource>> {
        let current = match self.existing(name) {
            Some(b) => b.config().clone(),
            None => match self.family_config(name) {
                Some(config) => config,
                None => {
                    let preset = self.family_preset(name).config;
                    match preset {
                        Some(config) => config,
                        None => self.attribute(name)?.config(),
                    }
                }
            },
        };
        let recorded = self.files.account(name);
        // Without a file's account: the keys of a `configure`d config, else the attribute's,
        // else those of the code's config.
        let code = self.code_config(name);
        let own: Option<(crate::config::ConfigBuilder, Site)> = match (code, self.attribute(name)) {
            (Some((site @ Site::Configure { .. }, config)), _) | (Some((site, config)), None) => {
                Some((
                    crate::config::sources::code_keys(Config::builder(), &config),
                    site,
                ))
            }
            (None, Some(r)) | (Some(_), Some(r)) => {
                Some((r.configure_onto(Config::builder()), r.site()))
            }
            (None, None) => None,
        };
        let sources = crate::config_keys::KEYS
            .iter()
            .map(|key| {
                let value = key_value(&current, key);
                let source = match &recorded {
                    Some(recorded) => {
                        if key_value(&recorded.config, key) != value {
                            ConfigSource::Code
                        } else {
                            recorded.source(key)
                        }
                    }
                    _ => match &own {
                        Some((given, site)) if given.given().any(|k| k == *key) => {
                            ConfigSource::Site(*site)
                        }
                        _ if value != key_value(&Config::default(), key) => ConfigSource::Code,
                        _ => ConfigSource::Default,
                    },
                };
                KeySource { key, value, source }
            })
            .collect();
        Some(sources)
    }

    /// Where each key of the config a config file gave the single key `key` of the keyed
    /// family `family` came from (its `[breakers.<family>.keys."<key>"]` table over the
    /// family's layers), as that file built it; `None` if no file gave the key a table.
    pub fn key_config_sources(&self, family: &str, key: &str) -> Option<Vec<KeySource>> {
        let account = self.files.account(&key_account(family, key))?;
        Some(
            crate::registration::keys(&account.config)
                .into_iter()
                .filter(|(key, _)| crate::config_keys::KEYS.contains(key))
                .map(|(key, value)| KeySource {
                    key,
                    value,
                    source: account.source(key),
                })
                .collect(),
        )
    }

    /// Records where each key of `name`'s config came from, as a config file built it
    /// (`name` is `<family>.keys."<key>"` for a single key of a family).
    pub(crate) fn set_sources(&self, name: &str, config: &Config, sources: Vec<KeySource>) {
        self.files.set_account(name, config, sources);
    }
}
