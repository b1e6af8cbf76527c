//! Where each key of a breaker's config came from: `GET /breakers/{name}/config` and, for one
//! key of a keyed family, `GET /breakers/{family}/keys/{key}/config`
//! ([`Registry::config_sources`](breakerbox_runtime::Registry::config_sources)).

use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::breakers::{bad_path, unknown};
use crate::respond::{Problem, json};
use breakerbox_runtime::{ConfigSource, KeySource, Site, registry};

/// One key: its effective value and its layer, as data and as the sentence the docs use.
#[derive(Serialize)]
struct KeyView {
    key: &'static str,
    value: String,
    source: SourceView,
}

/// A [`ConfigSource`] as JSON: `layer` names it (`default`, `defaults`, `base`, `attribute`,
/// `code`, `table`, `env`), `text` says it as messages do, and the fields say where.
#[derive(Serialize)]
struct SourceView {
    layer: &'static str,
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    /// A base's name, or a table's (after `breakers.`).
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    var: Option<String>,
}

impl From<&ConfigSource> for SourceView {
    fn from(source: &ConfigSource) -> SourceView {
        let mut view = SourceView {
            layer: "default",
            text: source.to_string(),
            file: None,
            line: None,
            table: None,
            var: None,
        };
        let place = |v: &mut SourceView, file: &std::path::Path, line: usize| {
            v.file = Some(file.display().to_string());
            v.line = Some(line);
        };
        match source {
            ConfigSource::Default => {}
            ConfigSource::Defaults { file, line } => {
                view.layer = "defaults";
                place(&mut view, file, *line);
            }
            ConfigSource::Base { name, file, line } => {
                view.layer = "base";
                view.table = Some(name.clone());
                place(&mut view, file, *line);
            }
            ConfigSource::Site(site) => {
                view.layer = match site {
                    Site::Attribute { .. } | Site::KeyedAttribute { .. } => "attribute",
                    _ => "code",
                };
                view.file = Some(site.file().to_owned());
                view.line = usize::try_from(site.line()).ok();
            }
            ConfigSource::Table { table, file, line } => {
                view.layer = "table";
                view.table = Some(table.clone());
                place(&mut view, file, *line);
            }
            ConfigSource::Env { var } => {
                view.layer = "env";
                view.var = Some(var.clone());
            }
            ConfigSource::Code => view.layer = "code",
            // `ConfigSource` is non-exhaustive: a layer added later is told by its text.
            _ => view.layer = "other",
        }
        view
    }
}

#[derive(Serialize)]
struct Sources {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    keys: Vec<KeyView>,
}

fn answer(name: String, key: Option<String>, sources: Vec<KeySource>) -> Response {
    json(&Sources {
        name,
        key,
        keys: sources
            .iter()
            .map(|k| KeyView {
                key: k.key,
                value: k.value.clone(),
                source: (&k.source).into(),
            })
            .collect(),
    })
}

/// `GET /breakers/{name}/config`: each key of the breaker's (or keyed family's) config, its
/// value and where it came from; `404` naming an unknown breaker.
pub(crate) async fn breaker(name: Result<Path<String>, PathRejection>) -> Response {
    let name = match name {
        Ok(Path(name)) => name,
        Err(e) => return bad_path(e).into_response(),
    };
    match registry().config_sources(&name) {
        Some(sources) => answer(name, None, sources),
        None => unknown(&name).into_response(),
    }
}

/// `GET /breakers/{family}/keys/{key}/config`: a key with its own table in a config file
/// (`[breakers.<family>.keys."<key>"]`) has that account; any other key of the family has the
/// family's. `404` naming an unknown family or key.
pub(crate) async fn key(path: Result<Path<(String, String)>, PathRejection>) -> Response {
    let (family, key) = match path {
        Ok(Path(pair)) => pair,
        Err(e) => return bad_path(e).into_response(),
    };
    if let Some(sources) = registry().key_config_sources(&family, &key) {
        return answer(family, Some(key), sources);
    }
    if let Err(problem) = crate::family_keys::find(&family, &key) {
        return problem.into_response();
    }
    match registry().config_sources(&family) {
        Some(sources) => answer(family, Some(key), sources),
        None => Problem::new(
            StatusCode::NOT_FOUND,
            format!(
                "no config is known for the keyed family '{}'",
                breakerbox_runtime::__integrations::excerpt(&family)
            ),
        )
        .into_response(),
    }
}
