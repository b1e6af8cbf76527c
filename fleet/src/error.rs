//! Why a fleet could not start ([`FleetError`]), and store URLs as errors show them: without
//! their password.

/// Why a fleet could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// The URL is not a store URL the client accepts (Redis's, or PostgreSQL's), or needs a
    /// feature this build lacks.
    #[error("fleet: bad store URL `{url}`: {reason}")]
    Url {
        /// The URL, its password shown as `***`.
        url: String,
        /// Why.
        reason: String,
    },
    /// The [`tls_ca`](crate::FleetConfig::tls_ca) file could not be read.
    #[error("fleet: cannot read the TLS CA file `{}`: {source}", path.display())]
    TlsCa {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// [`Fleet::connect`](crate::Fleet::connect) could not reach the store, log in or agree on TLS: a wrong password
    /// or user, a certificate it does not trust, nothing listening.
    #[error("fleet: cannot connect to `{url}`: {source}")]
    Connect {
        /// The URL, its password shown as `***`.
        url: String,
        /// Why, as the client says it.
        source: redis::RedisError,
    },
    /// [`Fleet::connect`](crate::Fleet::connect) could not use its PostgreSQL store: nothing
    /// listening, a refused login, or the fleet's tables in the database with another shape or
    /// schema version (the reason names the table and what is wrong); or
    /// [`Fleet::connect_with_store`](crate::Fleet::connect_with_store) its store, which failed
    /// or did not answer its ping (the reason as the store gave it).
    #[error("fleet: cannot use the store at `{url}`: {reason}")]
    Store {
        /// The URL, its password shown as `***`.
        url: String,
        /// Why.
        reason: String,
    },
    /// A [`share`](crate::FleetConfig::share) pattern names nothing the fleet can share: no
    /// single breaker and no keyed family created, annotated (`#[circuit_breaker]`) or
    /// configured (`load_toml`, `configure`) when the fleet started.
    #[error(
        "fleet: `share` entry `{pattern}` matches no breaker and no keyed family: create or \
         configure them (`load_toml`, `configure`, `get_or_create`, `family`) before the fleet \
         starts, or fix the name"
    )]
    ShareMatchesNothing {
        /// The pattern, as given.
        pattern: String,
    },
    /// [`Fleet::start`](crate::Fleet::start) was called outside a tokio runtime.
    #[error("fleet: Fleet::start must be called inside a tokio runtime (it spawns its task there)")]
    NoRuntime,
    /// The tokio runtime [`Fleet::start`](crate::Fleet::start) was called in lacks a driver
    /// the fleet needs: it was built without `enable_time` (every fleet's task), or without
    /// `enable_io` (a fleet on Redis or PostgreSQL).
    #[error(
        "fleet: the tokio runtime has {what} disabled, which the fleet's task needs: build it \
         with `enable_all()`"
    )]
    RuntimeWithout {
        /// `"timers"` or `"I/O"`.
        what: &'static str,
    },
}

/// `url` with its password, if any, shown as `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((info, hosts)) => {
            let user = info.split_once(':').map_or(info, |(u, _)| u);
            let shown = if info.contains(':') {
                format!("{user}:***")
            } else {
                "***".to_owned()
            };
            format!("{scheme}://{shown}@{hosts}{}", &rest[end..])
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(
            redact("rediss://fleet:s3cret@h:1/"),
            "rediss://fleet:***@h:1/"
        );
        assert_eq!(redact("redis://:s3cret@h:1/0"), "redis://:***@h:1/0");
        assert_eq!(redact("redis://token@h:1/"), "redis://***@h:1/");
        assert_eq!(redact("redis://h:1/"), "redis://h:1/");
        assert_eq!(
            redact("redis+sentinel://u:p@a:1,b:2/m"),
            "redis+sentinel://u:***@a:1,b:2/m"
        );
    }
}
