//! How the store is reached: one node (`redis://`, `rediss://`), the master a Sentinel names
//! (`redis+sentinel://`, feature `sentinel`), or a Cluster (`redis+cluster://`, feature
//! `cluster`). Each gives the task one connection handle at a time; see [`Connector`].

use core::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, ErrorKind, Pipeline, PushInfo, RedisError, RedisFuture, RedisResult, Value};
use tokio::sync::mpsc;

use crate::error::{FleetError, redact};

/// Why a URL does not name a store this build can reach.
#[derive(Debug)]
pub(crate) struct BadUrl(pub(crate) String);

/// Where the store is, as parsed from the URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StoreTarget {
    pub(crate) kind: Kind,
    /// `rediss…`: TLS to every server.
    pub(crate) tls: bool,
    pub(crate) user: Option<String>,
    pub(crate) password: Option<String>,
    /// `host:port` each: the node, the sentinels or the cluster's seed nodes.
    pub(crate) hosts: Vec<String>,
    /// Sentinel: the master's name; otherwise unused.
    pub(crate) service: String,
    /// The rest of a one-node URL, as given (`redis://…/db?…`).
    pub(crate) url: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Node,
    Sentinel,
    Cluster,
}

/// `user:password@` of an URL's authority, percent-decoded.
fn userinfo(authority: &str) -> (Option<String>, Option<String>, &str) {
    let Some((info, hosts)) = authority.rsplit_once('@') else {
        return (None, None, authority);
    };
    let (user, password) = match info.split_once(':') {
        Some((u, p)) => (u, Some(p)),
        None => (info, None),
    };
    let user = (!user.is_empty()).then(|| decode(user));
    (user, password.map(decode), hosts)
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl StoreTarget {
    pub(crate) fn parse(url: &str) -> Result<StoreTarget, BadUrl> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(BadUrl(
                "want redis://, rediss://, redis+sentinel:// or redis+cluster://".to_owned(),
            ));
        };
        let (kind, tls) = match scheme {
            "redis" | "redis+unix" | "unix" => (Kind::Node, false),
            "rediss" => (Kind::Node, true),
            "redis+sentinel" => (Kind::Sentinel, false),
            "rediss+sentinel" => (Kind::Sentinel, true),
            "redis+cluster" => (Kind::Cluster, false),
            "rediss+cluster" => (Kind::Cluster, true),
            other => {
                return Err(BadUrl(format!(
                    "unknown scheme `{other}` (want redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster or rediss+cluster; or postgres, with the feature `postgres`)"
                )));
            }
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (user, password, hosts) = userinfo(authority);
        let hosts: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .collect();
        let service = path.split(['/', '?']).next().unwrap_or("").to_owned();
        match kind {
            Kind::Node => {}
            Kind::Sentinel | Kind::Cluster if hosts.is_empty() => {
                return Err(BadUrl("no host: want host:port[,host:port…]".to_owned()));
            }
            Kind::Sentinel if service.is_empty() => {
                return Err(BadUrl(
                    "no master name: want redis+sentinel://host:port[,host:port…]/<master name>"
                        .to_owned(),
                ));
            }
            _ => {}
        }
        if let Some(h) = hosts.iter().find(|h| {
            kind != Kind::Node
                && h.rsplit_once(':')
                    .is_none_or(|(_, p)| p.parse::<u16>().is_err())
        }) {
            return Err(BadUrl(format!("`{h}` is not host:port")));
        }
        Ok(StoreTarget {
            kind,
            tls,
            user,
            password,
            hosts,
            service,
            url: url.to_owned(),
        })
    }

    /// `redis[s]://host:port/` for one of `hosts` (the user and password are set apart).
    #[cfg(feature = "cluster")]
    fn node_url(&self, host: &str) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://{host}/?protocol=resp3")
    }
}

/// A connection handle the task sends its commands on: cheap to clone.
#[derive(Clone)]
pub(crate) enum Handle {
    Manager(ConnectionManager),
    #[cfg(feature = "cluster")]
    Cluster(redis::cluster_async::ClusterConnection),
}

impl ConnectionLike for Handle {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Handle::Manager(c) => c.req_packed_command(cmd),
            #[cfg(feature = "cluster")]
            Handle::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Handle::Manager(c) => c.req_packed_commands(cmd, offset, count),
            #[cfg(feature = "cluster")]
            Handle::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Handle::Manager(c) => c.get_db(),
            #[cfg(feature = "cluster")]
            Handle::Cluster(c) => c.get_db(),
        }
    }
}

impl Handle {
    pub(crate) async fn subscribe(&mut self, channel: &str) -> RedisResult<()> {
        match self {
            Handle::Manager(c) => c.subscribe(channel).await,
            #[cfg(feature = "cluster")]
            Handle::Cluster(c) => c.subscribe(channel).await,
        }
    }

    /// Whether a pipeline must not span slots (a Cluster).
    #[cfg(feature = "cluster")]
    pub(crate) fn one_slot_pipelines(&self) -> bool {
        match self {
            Handle::Manager(_) => false,
            #[cfg(feature = "cluster")]
            Handle::Cluster(_) => true,
        }
    }
}

/// How new connections are made.
#[allow(clippy::large_enum_variant)] // one per fleet
enum How {
    /// One node: a connection manager, which reconnects by itself.
    Node(redis::Client),
    /// The master a Sentinel names, asked again after every store failure.
    #[cfg(feature = "sentinel")]
    Sentinel(Box<redis::sentinel::SentinelClient>),
    /// A Cluster: its connection follows the slots (`MOVED`, `ASK`) and reconnects by itself.
    #[cfg(feature = "cluster")]
    Cluster(Box<redis::cluster::ClusterClient>),
}

/// Makes and keeps the task's connection, and subscribes it.
pub(crate) struct Connector {
    how: How,
    config: ConnectionManagerConfig,
    push_tx: mpsc::UnboundedSender<PushInfo>,
    current: Option<Handle>,
    /// The channels subscribed: subscribed again on a new connection.
    channels: Vec<String>,
    /// Set while an operation runs: still set at the next one if that one never finished (its
    /// timeout dropped it), which counts as a failure.
    busy: bool,
}

/// The TLS roots: the given CA's PEM, or the system's.
#[cfg(feature = "tls")]
fn certificates(ca: Option<&[u8]>) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: ca.map(<[u8]>::to_vec),
    }
}

impl Connector {
    /// A connector for `target` (nothing is connected yet), and the receiver of its push
    /// messages: published records and disconnections.
    pub(crate) fn new(
        target: &StoreTarget,
        ca: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<(Connector, mpsc::UnboundedReceiver<PushInfo>), String> {
        #[cfg(not(feature = "tls"))]
        if target.tls || ca.is_some() {
            return Err("TLS needs the feature `tls` (breakerbox's `redis-tls`)".to_owned());
        }
        #[cfg(feature = "tls")]
        if target.tls && rustls::crypto::CryptoProvider::get_default().is_none() {
            // rustls picks a provider by itself only when one is built in; with ring and
            // aws-lc-rs both in the build (another crate's choice) it would panic. Another
            // thread installing one first is as good.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let (push_tx, pushes) = mpsc::unbounded_channel();
        let config = ConnectionManagerConfig::new()
            .set_push_sender(push_tx.clone())
            .set_automatic_resubscription()
            .set_response_timeout(Some(timeout))
            .set_connection_timeout(Some(timeout))
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(200))
            .set_number_of_retries(4);
        let how = match target.kind {
            Kind::Node => {
                let url = resp3(&target.url);
                #[cfg(feature = "tls")]
                let client = if target.tls {
                    redis::Client::build_with_tls(url, certificates(ca))
                } else {
                    redis::Client::open(url)
                };
                #[cfg(not(feature = "tls"))]
                let client = redis::Client::open(url);
                How::Node(client.map_err(|e| e.to_string())?)
            }
            #[cfg(feature = "sentinel")]
            Kind::Sentinel => {
                use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
                let addrs = target.hosts.iter().map(|h| {
                    let (host, port) = h.rsplit_once(':').expect("checked by parse");
                    redis::ConnectionAddr::Tcp(host.to_owned(), port.parse().expect("checked"))
                });
                let mut b =
                    SentinelClientBuilder::new(addrs, &target.service, SentinelServerType::Master)
                        .map_err(|e| e.to_string())?
                        .set_client_to_redis_protocol(redis::ProtocolVersion::RESP3);
                if let Some(user) = &target.user {
                    b = b.set_client_to_redis_username(user);
                }
                if let Some(password) = &target.password {
                    b = b.set_client_to_redis_password(password);
                }
                if target.tls {
                    b = b
                        .set_client_to_redis_tls_mode(redis::TlsMode::Secure)
                        .set_client_to_sentinel_tls_mode(redis::TlsMode::Secure);
                    #[cfg(feature = "tls")]
                    if ca.is_some() {
                        b = b
                            .set_client_to_redis_certificates(certificates(ca))
                            .set_client_to_sentinel_certificates(certificates(ca));
                    }
                }
                How::Sentinel(Box::new(b.build().map_err(|e| e.to_string())?))
            }
            #[cfg(feature = "cluster")]
            Kind::Cluster => {
                let nodes: Vec<String> = target.hosts.iter().map(|h| target.node_url(h)).collect();
                let mut b = redis::cluster::ClusterClientBuilder::new(nodes)
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(push_tx.clone())
                    .connection_timeout(timeout)
                    .response_timeout(timeout);
                if let Some(user) = &target.user {
                    b = b.username(user);
                }
                if let Some(password) = &target.password {
                    b = b.password(password);
                }
                #[cfg(feature = "tls")]
                if ca.is_some() {
                    b = b.certs(certificates(ca));
                }
                How::Cluster(Box::new(b.build().map_err(|e| e.to_string())?))
            }
            #[allow(unreachable_patterns)]
            kind => {
                let feature = if kind == Kind::Sentinel {
                    "sentinel"
                } else {
                    "cluster"
                };
                return Err(format!(
                    "this URL needs the feature `{feature}` (breakerbox's `redis-{feature}`)"
                ));
            }
        };
        let connector = Connector {
            how,
            config,
            push_tx,
            current: None,
            channels: Vec::new(),
            busy: false,
        };
        Ok((connector, pushes))
    }

    /// The connection to send on, connecting (and subscribing) first if there is none.
    pub(crate) async fn handle(&mut self) -> RedisResult<Handle> {
        if core::mem::replace(&mut self.busy, true) {
            // The last operation never finished: the server may be gone without a word.
            self.lost();
        }
        if let Some(handle) = &self.current {
            return Ok(handle.clone());
        }
        let mut handle = match &mut self.how {
            How::Node(client) => {
                // One plain attempt first: the manager retries every error, so a wrong password
                // or an untrusted certificate would only show as a timeout. A refused
                // connection (a server still starting) is left to the manager's retries.
                match client.get_multiplexed_async_connection().await {
                    Ok(con) => drop(con),
                    Err(e) if e.is_connection_refusal() => {}
                    Err(e) => return Err(e),
                }
                Handle::Manager(
                    ConnectionManager::new_with_config(client.clone(), self.config.clone()).await?,
                )
            }
            #[cfg(feature = "sentinel")]
            How::Sentinel(sentinel) => {
                let client = sentinel.async_get_client().await?;
                drop(client.get_multiplexed_async_connection().await?);
                Handle::Manager(
                    ConnectionManager::new_with_config(client, self.config.clone()).await?,
                )
            }
            #[cfg(feature = "cluster")]
            How::Cluster(client) => Handle::Cluster(client.get_async_connection().await?),
        };
        for channel in &self.channels {
            handle.subscribe(channel).await?;
        }
        self.current = Some(handle.clone());
        Ok(handle)
    }

    /// An operation's end: a failure of the store's (not of one record) makes the next
    /// operation ask a Sentinel for the master again.
    pub(crate) fn done(&mut self, error: Option<&RedisError>) {
        self.busy = false;
        if let Some(e) = error
            && !is_record_problem(e)
            && e.kind() != ErrorKind::Server(redis::ServerErrorKind::NoScript)
        {
            self.lost();
        }
    }

    /// Forgets a Sentinel's master, so that the next operation asks again (a one-node
    /// manager and a Cluster connection reconnect by themselves and are kept).
    fn lost(&mut self) {
        #[cfg(feature = "sentinel")]
        if matches!(self.how, How::Sentinel(_)) && self.current.take().is_some() {
            // The task reads every record again, as after any disconnection: a failover may
            // have lost what the old master had not passed on.
            let _ = self.push_tx.send(PushInfo {
                kind: redis::PushKind::Disconnection,
                data: Vec::new(),
            });
        }
        let _ = &self.push_tx;
    }

    /// Subscribes to `channel`, now and on every later connection.
    pub(crate) async fn subscribe(&mut self, channel: String) -> RedisResult<()> {
        let fresh = self.current.is_none();
        if !self.channels.contains(&channel) {
            self.channels.push(channel.clone());
        }
        let mut handle = self.handle().await?;
        if !fresh {
            handle.subscribe(&channel).await?;
        }
        Ok(())
    }
}

/// A connector to the store at `url` (not connected yet), and the receiver of its pushes.
pub(crate) fn connector(
    url: &str,
    tls_ca: Option<&std::path::Path>,
    timeout: Duration,
) -> Result<(Connector, mpsc::UnboundedReceiver<redis::PushInfo>), FleetError> {
    let bad = |reason: String| FleetError::Url {
        url: redact(url),
        reason,
    };
    let target = StoreTarget::parse(url).map_err(|e| bad(e.0))?;
    let ca = match tls_ca {
        Some(path) => Some(std::fs::read(path).map_err(|source| FleetError::TlsCa {
            path: path.to_owned(),
            source,
        })?),
        None => None,
    };
    Connector::new(&target, ca.as_deref(), timeout).map_err(bad)
}

/// The URL with RESP3 asked for: push messages (pub/sub on the command connection) need it.
pub(crate) fn resp3(url: &str) -> String {
    if url.contains("protocol=") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&protocol=resp3")
    } else {
        format!("{url}?protocol=resp3")
    }
}

/// Whether a failed store operation is a problem of the one record it touched rather than of
/// the store: a script's run-time error (`ERR user_script:…`, a value of another type under the
/// key: `WRONGTYPE`), which a store that answers everything else gives for that key only. Every
/// other error (I/O, a timeout, a refused command, a server loading or read-only) is the store
/// failing.
pub(crate) fn is_record_problem(e: &RedisError) -> bool {
    match e.kind() {
        ErrorKind::Server(redis::ServerErrorKind::ResponseError) => {
            // `ERR` is also how a server says some things unrelated to one key (an unknown
            // command, a script killed): only an error raised while the script ran is the
            // record's.
            let detail = e.detail().unwrap_or_default();
            detail.contains("user_script") || detail.contains("script:")
        }
        ErrorKind::Extension => e.code() == Some("WRONGTYPE"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp3_is_asked_for_once() {
        assert_eq!(resp3("redis://h:1/"), "redis://h:1/?protocol=resp3");
        assert_eq!(
            resp3("redis://h:1/?db=2"),
            "redis://h:1/?db=2&protocol=resp3"
        );
        assert_eq!(
            resp3("redis://h:1/?protocol=resp3"),
            "redis://h:1/?protocol=resp3"
        );
    }
}
