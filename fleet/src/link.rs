//! [`StoreLink`]: a connection to a fleet's store for the other parts of breakerbox that keep
//! data there (the replay journal, `breakerbox-replay`'s `RedisJournal`), made by the fleet's
//! own connection code: the same URLs, TLS, Sentinel, Cluster and ACL support.

use core::time::Duration;
use std::path::Path;

use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, PushInfo, RedisError, RedisFuture, RedisResult, Value};
use tokio::sync::mpsc;

use crate::connect::{Connector, Handle};
use crate::{FleetConfig, FleetError};

/// Makes and keeps a connection to the store a fleet URL names: `redis://`, `rediss://` (feature
/// `tls`), `redis+sentinel://` (feature `sentinel`), `redis+cluster://` (feature `cluster`),
/// each with `user:password@` for an ACL user. Use it from one task; its connections are cheap
/// to clone and may be used from many.
pub struct StoreLink {
    connector: Connector,
    /// Push messages (disconnections) nobody reads: emptied at each connection.
    pushes: mpsc::UnboundedReceiver<PushInfo>,
    url: String,
}

impl StoreLink {
    /// A link to the store at `url`, trusting the CA in the PEM file `tls_ca` for TLS if given,
    /// each connect and each reply bounded by `timeout`. Nothing is connected yet. An error
    /// names a URL this build cannot reach (an unknown scheme, a malformed host list, a scheme
    /// that needs a feature this build lacks, or PostgreSQL's, which keeps only the breakers)
    /// or a CA file it cannot read.
    pub fn new(
        url: &str,
        tls_ca: Option<&Path>,
        timeout: Duration,
    ) -> Result<StoreLink, FleetError> {
        if crate::store::Backend::of(url) == crate::store::Backend::Postgres {
            return Err(FleetError::Url {
                url: crate::error::redact(url),
                reason: "this needs Redis: a fleet on PostgreSQL shares breakers, and keeps no \
                         other data (such as the replay journal's) in its store"
                    .to_owned(),
            });
        }
        let (connector, pushes) = crate::connect::connector(url, tls_ca, timeout)?;
        Ok(StoreLink {
            connector,
            pushes,
            url: crate::error::redact(url),
        })
    }

    /// A link to `config`'s store (its URL and [`tls_ca`](FleetConfig::tls_ca)), each connect
    /// and reply bounded by `timeout`.
    pub fn for_config(config: &FleetConfig, timeout: Duration) -> Result<StoreLink, FleetError> {
        StoreLink::new(&config.url, config.tls_ca.as_deref(), timeout)
    }

    /// The URL, its password shown as `***`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The connection to send on, connecting first if there is none: a one-node connection
    /// and a Cluster's reconnect by themselves; after [`failed`](StoreLink::failed), a
    /// Sentinel is asked for the master again.
    pub async fn connection(&mut self) -> RedisResult<StoreConnection> {
        while self.pushes.try_recv().is_ok() {}
        let handle = self.connector.handle().await;
        self.connector.done(handle.as_ref().err());
        handle.map(StoreConnection)
    }

    /// Tells the link a command on its connection failed: a failure of the store's (not a
    /// script's error about one key) makes the next [`connection`](StoreLink::connection) of
    /// a Sentinel link ask for the master again.
    pub fn failed(&mut self, error: &RedisError) {
        self.connector.done(Some(error));
    }
}

impl core::fmt::Debug for StoreLink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("StoreLink")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// A connection from a [`StoreLink`]: send commands and scripts on it
/// ([`redis::aio::ConnectionLike`]). Cheap to clone.
#[derive(Clone)]
pub struct StoreConnection(Handle);

impl ConnectionLike for StoreConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_to_a_postgres_fleet_says_it_needs_redis() {
        let Err(e) = StoreLink::new(
            "postgres://fleet:s3cret@127.0.0.1:1/db",
            None,
            Duration::from_secs(1),
        ) else {
            panic!("a link to PostgreSQL was made");
        };
        let shown = e.to_string();
        assert!(
            shown.contains("this needs Redis") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}
