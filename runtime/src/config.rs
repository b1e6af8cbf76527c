//! What a breaker does, validated once: [`Config`] and [`Window`] (in `settings`),
//! [`ConfigBuilder`] (in `builder`), [`ConfigError`] (in `config_error`); `pool` shares one
//! allocation between equal configs, `sources` tells where each key's value came from;
//! `layers` says which config a registry breaker gets from the layers of code, config files
//! and environment ([`resolve`](layers::resolve)), and keeps what the config files loaded
//! gave each name.

mod builder;
mod config_error;
pub(crate) mod layers;
pub(crate) mod pool;
mod settings;
pub mod sources;

pub use builder::ConfigBuilder;
pub use config_error::ConfigError;
pub use layers::TwoFiles;
pub(crate) use pool::intern;
pub(crate) use settings::TIME_BUCKETS;
pub use settings::{Config, Window};
