//! What a fleet connects to and which breakers it shares: in code, or from a `[fleet]` table.

use core::fmt;
use core::time::Duration;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use breakerbox_runtime::__integrations::closest;

/// How a [`Fleet`](super::Fleet) connects and what it shares.
///
/// ```
/// use breakerbox_fleet::FleetConfig;
/// use std::time::Duration;
///
/// let config = FleetConfig::new("redis://127.0.0.1:6379/")
///     .prefix("shop")
///     .share("payments*")
///     .resync_every(Duration::from_secs(1));
/// assert!(config.shares("payments-eu"));
/// assert!(!config.shares("search"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct FleetConfig {
    pub(crate) url: String,
    pub(crate) prefix: String,
    pub(crate) share: Vec<String>,
    pub(crate) instance: Option<String>,
    pub(crate) resync_every: Duration,
    pub(crate) timeout: Duration,
    pub(crate) on_store_error: OnStoreError,
    pub(crate) tls_ca: Option<PathBuf>,
    pub(crate) trip: FleetTrip,
    /// Per breaker (a name or a glob), in the order given: the first match wins over `trip`.
    pub(crate) trip_for: Vec<(String, FleetTrip)>,
    /// How long a family key's record outlives its last change (see `FleetConfig::key_ttl`).
    pub(crate) key_ttl: Duration,
}

/// What a local trip of a shared breaker does to the fleet: open every instance at once
/// ([`Any`](FleetTrip::Any), the default), or only once a quorum of the live instances sharing
/// the breaker have tripped ([`Quorum`](FleetTrip::Quorum)). Set with
/// [`FleetConfig::fleet_trip`] and [`FleetConfig::fleet_trip_for`], or `[fleet] fleet_trip =
/// "any" | "quorum"` with `quorum = 2` or `quorum = "50%"` (and per breaker in a
/// `[fleet.breakers.<name or glob>]` table).
///
/// Under a quorum, a local trip opens its own instance at once, as always, and is reported to
/// the store; the fleet's record opens when the open reports of live instances (those whose
/// heartbeat has not expired, each open for its own open time) reach the quorum, or when the
/// fleet's counts cross the breaker's rate. A quorum larger than the live instances is the
/// number of live instances: a fleet shrunk to one behaves as [`Any`](FleetTrip::Any).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetTrip {
    /// One instance's trip opens the fleet (the default).
    #[default]
    Any,
    /// A quorum of the live instances must be open.
    Quorum(Quorum),
}

/// How many of the live instances sharing a breaker make a quorum ([`FleetTrip::Quorum`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Quorum {
    /// At least this many instances (at least 1), or every live instance if fewer are live.
    Instances(u32),
    /// At least this percentage (1 to 100) of the live instances, rounded up, and at least one.
    Percent(u8),
}

impl Default for Quorum {
    /// Two instances: the smallest quorum that keeps one instance's trip its own.
    fn default() -> Quorum {
        Quorum::Instances(2)
    }
}

impl Quorum {
    /// As `quorum.lua` and PostgreSQL's `breakerbox_fleet_report` read it: `2`, or `50%`. A
    /// number of instances is at most `i32::MAX` (PostgreSQL's `integer`): no fleet has as many
    /// live instances, and a quorum is never more than the live ones.
    pub(crate) fn arg(self) -> String {
        match self {
            Quorum::Instances(n) => n.clamp(1, i32::MAX.unsigned_abs()).to_string(),
            Quorum::Percent(p) => format!("{}%", p.clamp(1, 100)),
        }
    }

    /// The quorum among `live` instances (what `quorum.lua` computes).
    pub fn needed(self, live: u32) -> u32 {
        let live = live.max(1);
        match self {
            Quorum::Instances(n) => n.clamp(1, live),
            Quorum::Percent(p) => (u32::from(p.clamp(1, 100)) * live).div_ceil(100).max(1),
        }
    }
}

impl fmt::Display for Quorum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Quorum::Instances(n) => write!(f, "{n} instances"),
            Quorum::Percent(p) => write!(f, "{p}% of the live instances"),
        }
    }
}

/// The values of `fleet_trip`.
const FLEET_TRIP: [&str; 2] = ["any", "quorum"];

/// The longest [`resync_every`](FleetConfig::resync_every), [`timeout`](FleetConfig::timeout)
/// and [`key_ttl`](FleetConfig::key_ttl): a year. A longer one is taken as a year, so that the
/// fleet's task can add it, and multiples of it, to its clock.
pub(crate) const LONGEST: Duration = Duration::from_secs(365 * 24 * 3600);

/// The longest life the fleet gives anything it writes to the store (a family key's record, a
/// probe lease): a thousand years. Stores count a life in milliseconds added to their clock,
/// in 64 bits (Redis's `PEXPIRE`, PostgreSQL's `bigint`); a `probe_timeout` or open time near
/// `Duration::MAX` would overflow that and fail the write.
pub(crate) const LONGEST_LIFE: Duration = Duration::from_secs(1000 * 365 * 24 * 3600);

/// The keys of a `[fleet.breakers.<name>]` table.
const BREAKER_KEYS: [&str; 2] = ["fleet_trip", "quorum"];

/// What the shared breakers do while the store is unreachable: from the first store operation
/// that fails or times out (or the connection's loss) until one succeeds again. Set with
/// [`FleetConfig::on_store_error`] or `[fleet] on_store_error = "local" | "open" | "closed"`.
///
/// "Open" and "closed" are the breaker's states, not the traffic's: `Open` rejects every
/// call (in availability terms, it fails closed), `Closed` admits every call (fails open).
/// `docs/fleet.md` has the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnStoreError {
    /// Each instance decides alone with its local breaker, which trips and probes as without
    /// fleet mode; its changes are written when the store answers again. The default.
    #[default]
    Local,
    /// Every shared breaker is held forced open (reason `imported`: not written to the
    /// store): every call is rejected, as
    /// [`RejectReason::ForcedOpen`](breakerbox_runtime::RejectReason::ForcedOpen). For a dependency that
    /// must not be hit by a fleet that cannot coordinate.
    Open,
    /// Every shared breaker is held disabled (reason `imported`): every call is admitted and
    /// none is judged, so nothing trips. For a dependency whose calls matter more than its
    /// protection.
    Closed,
}

impl OnStoreError {
    /// Its name in TOML: `local`, `open`, `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnStoreError::Local => "local",
            OnStoreError::Open => "open",
            OnStoreError::Closed => "closed",
        }
    }
}

/// The values of `on_store_error`.
const ON_STORE_ERROR: [&str; 3] = ["local", "open", "closed"];

impl FleetConfig {
    /// A fleet on the store at `url`: a Redis server (`redis://host:port/db`), or with the
    /// feature `postgres` a PostgreSQL database (`postgres://user:password@host:port/db`); with
    /// prefix `breakerbox`, sharing nothing yet, re-reading every shared record each second, and giving up on a
    /// store operation after 250 ms.
    pub fn new(url: impl Into<String>) -> FleetConfig {
        FleetConfig {
            url: url.into(),
            prefix: "breakerbox".to_owned(),
            share: Vec::new(),
            instance: None,
            resync_every: Duration::from_secs(1),
            timeout: Duration::from_millis(250),
            on_store_error: OnStoreError::Local,
            tls_ca: None,
            trip: FleetTrip::Any,
            trip_for: Vec::new(),
            key_ttl: Duration::from_secs(30),
        }
    }

    /// What a local trip does to the fleet, for every shared breaker without a
    /// [`fleet_trip_for`](FleetConfig::fleet_trip_for) of its own ([`FleetTrip`]): by default
    /// [`FleetTrip::Any`].
    ///
    /// ```
    /// use breakerbox_fleet::{FleetConfig, FleetTrip, Quorum};
    ///
    /// let config = FleetConfig::new("redis://127.0.0.1:6379/")
    ///     .share("*")
    ///     .fleet_trip(FleetTrip::Quorum(Quorum::Instances(2)))
    ///     .fleet_trip_for("search", FleetTrip::Any);
    /// assert_eq!(config.trip_of("payments"), FleetTrip::Quorum(Quorum::Instances(2)));
    /// assert_eq!(config.trip_of("search"), FleetTrip::Any);
    /// ```
    pub fn fleet_trip(mut self, trip: FleetTrip) -> FleetConfig {
        self.trip = trip;
        self
    }

    /// What a local trip does to the fleet for the breakers whose names match `pattern` (a name
    /// or a glob, as [`share`](FleetConfig::share) takes); the first pattern given that matches
    /// wins over [`fleet_trip`](FleetConfig::fleet_trip). A pattern that matches none of the
    /// breakers and families `share` shares is warned of (target `breakerbox`) at
    /// [`Fleet::start`](crate::Fleet::start): not an error, since a breaker shared with
    /// [`Fleet::share`](crate::Fleet::share) alone is not in the registry.
    pub fn fleet_trip_for(mut self, pattern: impl Into<String>, trip: FleetTrip) -> FleetConfig {
        self.trip_for.push((pattern.into(), trip));
        self
    }

    /// What a local trip of the breaker `name` does to the fleet.
    pub fn trip_of(&self, name: &str) -> FleetTrip {
        self.trip_for
            .iter()
            .find(|(p, _)| glob(p, name))
            .map_or(self.trip, |(_, t)| *t)
    }

    /// The first part of every key and channel (`{<prefix>:<name>}`, `<prefix>:changes`), so
    /// that several applications can share one Redis.
    pub fn prefix(mut self, prefix: impl Into<String>) -> FleetConfig {
        self.prefix = prefix.into();
        self
    }

    /// Shares the registry's single breakers and keyed families whose names match `pattern`: a
    /// name, or a glob where `*` stands for any run of characters and `?` for one
    /// (`payments*`). A shared family shares each key's state: a key that trips, is reset,
    /// forced open, disabled or tripped by hand on one instance does so on every instance that
    /// holds the key, and one that makes the key later takes the fleet's state at its first
    /// call. [`Fleet::start`](crate::Fleet::start) refuses a pattern that matches no single
    /// breaker and no family created, annotated or configured by then
    /// ([`FleetError::ShareMatchesNothing`](crate::FleetError::ShareMatchesNothing)). A name
    /// that begins with the NUL character is never shared: the fleet names family keys so.
    pub fn share(mut self, pattern: impl Into<String>) -> FleetConfig {
        self.share.push(pattern.into());
        self
    }

    /// Names this instance in the fleet: in the records it writes (their `origin`), its
    /// heartbeat and its open reports under a quorum. By default the host's name (`HOSTNAME`,
    /// else `/etc/hostname`), the same after every restart, so that a quorum counts hosts: a
    /// process that crashes and starts again on its host replaces its own report instead of
    /// adding one. Processes on one host that must count as instances of their own (several
    /// workers of a service) each need a name of their own that stays the same across their
    /// restarts (`web-3-worker-2`), never one that changes with each start (a pid). An empty
    /// or blank `id` names no instance: the host's name is used.
    pub fn instance(mut self, id: impl Into<String>) -> FleetConfig {
        self.instance = Some(id.into());
        self
    }

    /// How often every shared record is read again (pub/sub loses messages while a connection
    /// is down). While the store is failing, it is tried every quarter of this, at most every
    /// 100 ms. Taken as at least 10 ms and at most a year.
    pub fn resync_every(mut self, every: Duration) -> FleetConfig {
        self.resync_every = every.clamp(Duration::from_millis(10), LONGEST);
        self
    }

    /// How long the record of a shared family's key outlives its last change, so that keys
    /// leave nothing behind in the store: a closed key's record expires this long after it
    /// closed, an open one this long after its open time and its probe timeout have run; a key
    /// forced open or disabled keeps its record until it is reset. 30 s by default; never less
    /// than three [`resync_every`](FleetConfig::resync_every) (so that an instance holding the
    /// key open reads its close before the record expires, even if the message was lost).
    /// `[fleet] key_ttl = "30s"`. Taken as at least 10 ms and at most a year.
    pub fn key_ttl(mut self, ttl: Duration) -> FleetConfig {
        self.key_ttl = ttl.clamp(Duration::from_millis(10), LONGEST);
        self
    }

    /// How long a store operation may take before it counts as failed. It never delays a call:
    /// only the fleet's own task waits. Taken as at least 1 ms and at most a year.
    pub fn timeout(mut self, timeout: Duration) -> FleetConfig {
        self.timeout = timeout.clamp(Duration::from_millis(1), LONGEST);
        self
    }

    /// What the shared breakers do while the store is unreachable ([`OnStoreError`]): decide
    /// locally (the default), reject every call, or admit every call. The keys of a shared
    /// keyed family decide locally whatever this says. When the store answers
    /// again, each breaker held so gets back the state it had (its open time counted on),
    /// then takes on any newer record of the fleet's. A call never waits on the store either
    /// way.
    pub fn on_store_error(mut self, policy: OnStoreError) -> FleetConfig {
        self.on_store_error = policy;
        self
    }

    /// Trusts the certificate authority in the PEM file at `path` for TLS (`rediss://`,
    /// `rediss+sentinel://`, `rediss+cluster://`, and `postgres://…?sslmode=require`) instead
    /// of the system's roots: for a private CA. The file is read at start; TLS needs the
    /// feature `tls`.
    pub fn tls_ca(mut self, path: impl Into<PathBuf>) -> FleetConfig {
        self.tls_ca = Some(path.into());
        self
    }

    /// The store's URL, as given.
    pub fn get_url(&self) -> &str {
        &self.url
    }

    /// The keys' and channel's prefix.
    pub fn get_prefix(&self) -> &str {
        &self.prefix
    }

    /// The CA file trusted for TLS, if one was given.
    pub fn get_tls_ca(&self) -> Option<&Path> {
        self.tls_ca.as_deref()
    }

    /// Whether the registry's breaker or keyed family `name` is shared.
    pub fn shares(&self, name: &str) -> bool {
        !name.starts_with('\0') && self.share.iter().any(|p| glob(p, name))
    }

    /// The `[fleet]` table of a TOML file, if it has one. Other tables are not read, so this is
    /// the same file as [`Registry::load_toml`](breakerbox_runtime::Registry::load_toml)'s.
    ///
    /// ```toml
    /// [fleet]
    /// url = "redis://127.0.0.1:6379/"
    /// prefix = "shop"            # optional, "breakerbox" by default
    /// share = ["payments*", "inventory"]
    /// instance = "web-3"         # optional
    /// resync_every = "1s"        # optional
    /// key_ttl = "30s"            # optional: how long a family key's record outlives it
    /// timeout = "250ms"          # optional
    /// on_store_error = "local"   # optional: "local", "open" or "closed" (OnStoreError)
    /// tls_ca = "ca.pem"          # optional: the CA of a TLS server (feature `tls`)
    /// fleet_trip = "quorum"      # optional: "any" (the default) or "quorum" (FleetTrip)
    /// quorum = 2                 # optional, with "quorum": 2 instances (the default), or "50%"
    ///
    /// [fleet.breakers."search*"] # optional: per breaker, a name or a glob
    /// fleet_trip = "any"
    /// ```
    pub fn from_toml(path: impl AsRef<Path>) -> Result<Option<FleetConfig>, FleetConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| FleetConfigError {
            path: path.to_owned(),
            line: None,
            message: format!("cannot read it: {e}"),
        })?;
        FleetConfig::from_toml_str(path, &text)
    }

    /// [`from_toml`](FleetConfig::from_toml) from a string; `origin` names it in errors.
    pub fn from_toml_str(
        origin: impl AsRef<Path>,
        text: &str,
    ) -> Result<Option<FleetConfig>, FleetConfigError> {
        let path = origin.as_ref();
        let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
        let err = |offset: Option<usize>, message: String| FleetConfigError {
            path: path.to_owned(),
            line: offset.map(line_of),
            message,
        };
        let doc = DeTable::parse(text)
            .map_err(|e| err(e.span().map(|s| s.start), e.message().trim_end().to_owned()))?;
        let Some((key, table)) = doc.get_ref().get_key_value("fleet") else {
            return Ok(None);
        };
        let DeValue::Table(table) = table.get_ref() else {
            return Err(err(
                Some(key.span().start),
                "`fleet` must be a table, like `[fleet]` followed by `url = \"redis://127.0.0.1:6379/\"`".to_owned(),
            ));
        };
        let mut url = None;
        let mut config = FleetConfig::new("");
        let mut trip = TripKeys::default();
        let mut per_breaker = Vec::new();
        for (k, v) in table.iter() {
            let at = Some(k.span().start);
            let string = |what: &str| match v.get_ref() {
                DeValue::String(s) => Ok(s.to_string()),
                _ => Err(err(at, format!("[fleet] `{}` must be {what}", k.get_ref()))),
            };
            let duration = |what: &str| {
                let text = string(what)?;
                breakerbox_runtime::__integrations::parse_any_duration(&text)
                    .map_err(|m| err(at, format!("[fleet] `{}`: {m}", k.get_ref())))
            };
            match k.get_ref().as_ref() {
                "url" => url = Some(string("a string, like \"redis://127.0.0.1:6379/\"")?),
                "prefix" => config.prefix = string("a string, like \"shop\"")?,
                "tls_ca" => {
                    // Relative to the file's own directory.
                    let ca = PathBuf::from(string("a path, like \"ca.pem\"")?);
                    config.tls_ca = Some(match path.parent() {
                        Some(dir) if ca.is_relative() => dir.join(ca),
                        _ => ca,
                    });
                }
                "instance" => {
                    let id = string("a string, like \"web-3\"")?;
                    if id.trim().is_empty() {
                        return Err(err(
                            Some(v.span().start),
                            "[fleet] `instance` cannot be empty: name this instance, like \"web-3\", or leave the key out for the host's name".to_owned(),
                        ));
                    }
                    config.instance = Some(id);
                }
                "resync_every" | "timeout" => {
                    let every = duration(if k.get_ref() == "timeout" {
                        "a duration, like \"250ms\""
                    } else {
                        "a duration, like \"1s\""
                    })?;
                    if every.is_zero() {
                        return Err(err(
                            Some(v.span().start),
                            format!("[fleet] `{}` must be more than 0s", k.get_ref()),
                        ));
                    }
                    // The builder's floors: 10 ms for `resync_every`, 1 ms for `timeout`.
                    config = if k.get_ref() == "timeout" {
                        config.timeout(every)
                    } else {
                        config.resync_every(every)
                    };
                }
                "key_ttl" => {
                    config = config.key_ttl(duration("a duration, like \"30s\"")?);
                }
                "on_store_error" => {
                    let value = string("one of \"local\", \"open\", \"closed\"")?;
                    config.on_store_error = match value.as_str() {
                        "local" => OnStoreError::Local,
                        "open" => OnStoreError::Open,
                        "closed" => OnStoreError::Closed,
                        other => {
                            let hint = closest(other, ON_STORE_ERROR.iter().copied())
                                .map_or_else(String::new, |s| format!("; did you mean `{s}`?"));
                            return Err(err(
                                Some(v.span().start),
                                format!(
                                    "[fleet] `on_store_error` cannot be `{}`{hint} (one of: {})",
                                    breakerbox_runtime::__integrations::excerpt(other),
                                    ON_STORE_ERROR.join(", ")
                                ),
                            ));
                        }
                    };
                }
                "fleet_trip" | "quorum" => trip.read(k.get_ref(), v, "[fleet]", &err)?,
                "breakers" => {
                    let DeValue::Table(breakers) = v.get_ref() else {
                        return Err(err(
                            at,
                            "[fleet] `breakers` must be a table of tables, like `[fleet.breakers.payments]` followed by `fleet_trip = \"quorum\"`".to_owned(),
                        ));
                    };
                    for (pattern, table) in breakers.iter() {
                        let within = format!("[fleet.breakers.{}]", pattern.get_ref());
                        let DeValue::Table(table) = table.get_ref() else {
                            return Err(err(
                                Some(pattern.span().start),
                                format!("{within} must be a table, like `fleet_trip = \"quorum\"`"),
                            ));
                        };
                        let mut own = TripKeys::default();
                        for (k, v) in table.iter() {
                            match k.get_ref().as_ref() {
                                "fleet_trip" | "quorum" => {
                                    own.read(k.get_ref(), v, &within, &err)?
                                }
                                other => {
                                    let hint = closest(other, BREAKER_KEYS.iter().copied())
                                        .map_or_else(String::new, |s| {
                                            format!("; did you mean `{s}`?")
                                        });
                                    return Err(err(
                                        Some(k.span().start),
                                        format!(
                                            "{within} unknown key `{}`{hint} (keys: {})",
                                            breakerbox_runtime::__integrations::excerpt(other),
                                            BREAKER_KEYS.join(", ")
                                        ),
                                    ));
                                }
                            }
                        }
                        per_breaker.push((pattern.get_ref().to_string(), within, own));
                    }
                }
                "share" => {
                    let DeValue::Array(items) = v.get_ref() else {
                        return Err(err(
                            at,
                            "[fleet] `share` must be an array of names or patterns, like [\"payments*\"]".to_owned(),
                        ));
                    };
                    for item in items.iter() {
                        let DeValue::String(s) = item.get_ref() else {
                            return Err(err(
                                at,
                                "[fleet] `share` must hold strings: names or patterns like \"payments*\"".to_owned(),
                            ));
                        };
                        config.share.push(s.to_string());
                    }
                }
                other => {
                    let hint = closest(other, KEYS.iter().copied())
                        .map_or_else(String::new, |s| format!("; did you mean `{s}`?"));
                    return Err(err(
                        at,
                        format!(
                            "[fleet] unknown key `{}`{hint} (keys: {})",
                            breakerbox_runtime::__integrations::excerpt(other),
                            KEYS.join(", ")
                        ),
                    ));
                }
            }
        }
        config.trip = trip.resolve(None, "[fleet]", &err)?;
        for (pattern, within, own) in per_breaker {
            let resolved = own.resolve(Some(&trip), &within, &err)?;
            config.trip_for.push((pattern, resolved));
        }
        config.url = url.ok_or_else(|| {
            err(
                Some(key.span().start),
                "[fleet] needs `url`, like `url = \"redis://127.0.0.1:6379/\"`".to_owned(),
            )
        })?;
        Ok(Some(config))
    }
}

/// The keys of a `[fleet]` table.
const KEYS: [&str; 12] = [
    "url",
    "prefix",
    "share",
    "instance",
    "resync_every",
    "timeout",
    "key_ttl",
    "on_store_error",
    "tls_ca",
    "fleet_trip",
    "quorum",
    "breakers",
];

/// `fleet_trip` and `quorum` of one table (`[fleet]` or `[fleet.breakers.<name>]`), with where
/// each was written.
#[derive(Default)]
struct TripKeys {
    /// `true` for `"quorum"`.
    quorum_mode: Option<(bool, usize)>,
    quorum: Option<(Quorum, usize)>,
}

impl TripKeys {
    /// Reads `key = value` of the table `within`.
    fn read(
        &mut self,
        key: &str,
        value: &toml::Spanned<DeValue<'_>>,
        within: &str,
        err: &dyn Fn(Option<usize>, String) -> FleetConfigError,
    ) -> Result<(), FleetConfigError> {
        let at = value.span().start;
        if key == "fleet_trip" {
            let DeValue::String(text) = value.get_ref() else {
                return Err(err(
                    Some(at),
                    format!("{within} `fleet_trip` must be one of \"any\", \"quorum\""),
                ));
            };
            let quorum = match text.as_ref() {
                "any" => false,
                "quorum" => true,
                other => {
                    let hint = closest(other, FLEET_TRIP.iter().copied())
                        .map_or_else(String::new, |s| format!("; did you mean `{s}`?"));
                    return Err(err(
                        Some(at),
                        format!(
                            "{within} `fleet_trip` cannot be `{}`{hint} (one of: {})",
                            breakerbox_runtime::__integrations::excerpt(other),
                            FLEET_TRIP.join(", ")
                        ),
                    ));
                }
            };
            self.quorum_mode = Some((quorum, at));
            return Ok(());
        }
        let wrong = |why: &str| {
            err(
                Some(at),
                format!(
                    "{within} `quorum` {why}: a number of instances, like 2, or a percentage of the live instances, like \"50%\""
                ),
            )
        };
        let quorum = match value.get_ref() {
            DeValue::Integer(n) => {
                let n = i64::from_str_radix(n.as_str(), n.radix())
                    .map_err(|_| wrong("is out of range"))?;
                if n < 1 {
                    return Err(wrong("must be at least 1"));
                }
                Quorum::Instances(u32::try_from(n).map_err(|_| wrong("is out of range"))?)
            }
            DeValue::String(text) => {
                let Some(p) = text.strip_suffix('%') else {
                    return Err(wrong(&format!(
                        "cannot be `{}`",
                        breakerbox_runtime::__integrations::excerpt(text)
                    )));
                };
                match p.trim().parse::<u8>() {
                    Ok(p @ 1..=100) => Quorum::Percent(p),
                    _ => return Err(wrong("must be a percentage from 1% to 100%")),
                }
            }
            _ => return Err(wrong("must be")),
        };
        self.quorum = Some((quorum, at));
        Ok(())
    }

    /// What the table says, inheriting from `outer` (the `[fleet]` table's keys, for a
    /// breaker's own table).
    fn resolve(
        &self,
        outer: Option<&TripKeys>,
        within: &str,
        err: &dyn Fn(Option<usize>, String) -> FleetConfigError,
    ) -> Result<FleetTrip, FleetConfigError> {
        let mode = self
            .quorum_mode
            .or_else(|| outer.and_then(|o| o.quorum_mode))
            .is_some_and(|(q, _)| q);
        if !mode {
            if let Some((_, at)) = self.quorum {
                return Err(err(
                    Some(at),
                    format!(
                        "{within} `quorum` has no effect with `fleet_trip = \"any\"` (the default): set `fleet_trip = \"quorum\"` too"
                    ),
                ));
            }
            return Ok(FleetTrip::Any);
        }
        let quorum = self
            .quorum
            .or_else(|| outer.and_then(|o| o.quorum))
            .map_or_else(Quorum::default, |(q, _)| q);
        Ok(FleetTrip::Quorum(quorum))
    }
}

/// Why a `[fleet]` table could not be read: the file, the line and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetConfigError {
    /// The file (or the origin given to [`FleetConfig::from_toml_str`]).
    pub path: PathBuf,
    /// The line, from 1, when the error is about one.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FleetConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for FleetConfigError {}

/// Whether `name` matches `pattern`, where `*` is any run of characters and `?` one. Linear
/// backtracking on the last `*`: `O(pattern × name)` at worst.
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names_and_patterns() {
        assert!(glob("payments", "payments"));
        assert!(!glob("payments", "payments-eu"));
        assert!(glob("payments*", "payments-eu"));
        assert!(glob("payments*", "payments"));
        assert!(glob("*-eu", "payments-eu"));
        assert!(glob("p?y*s", "payments"));
        assert!(glob("*", ""));
        assert!(!glob("a*b", "acbd"));
        assert!(glob("a*b*c", "aXbYbZc"));
    }

    #[test]
    fn a_fleet_table_reads_every_key() {
        let text = "[breakers.payments]\nfailures = 3\n\n[fleet]\nurl = \"redis://127.0.0.1:7000/\"\nprefix = \"shop\"\nshare = [\"payments*\", \"inventory\"]\ninstance = \"web-3\"\nresync_every = \"2s\"\ntimeout = \"100ms\"\non_store_error = \"open\"\n";
        let config = FleetConfig::from_toml_str("app.toml", text)
            .unwrap()
            .unwrap();
        assert_eq!(config.url, "redis://127.0.0.1:7000/");
        assert_eq!(config.prefix, "shop");
        assert_eq!(config.share, ["payments*", "inventory"]);
        assert_eq!(config.instance.as_deref(), Some("web-3"));
        assert_eq!(config.resync_every, Duration::from_secs(2));
        assert_eq!(config.timeout, Duration::from_millis(100));
        assert_eq!(config.on_store_error, OnStoreError::Open);
        assert!(config.shares("payments-eu") && config.shares("inventory"));
    }

    /// A table's durations get the same floors as the builder's (`resync_every` at least
    /// 10 ms, `timeout` at least 1 ms): a re-read period or a store timeout of nearly nothing
    /// is never taken as written.
    #[test]
    fn a_tables_short_durations_get_the_builders_floors() {
        let text = "[fleet]\nurl = \"r\"\nresync_every = \"1ns\"\ntimeout = \"1ns\"\n";
        let config = FleetConfig::from_toml_str("f.toml", text).unwrap().unwrap();
        assert_eq!(config.resync_every, Duration::from_millis(10));
        assert_eq!(config.timeout, Duration::from_millis(1));
    }

    #[test]
    fn no_fleet_table_is_no_fleet() {
        let text = "[breakers.payments]\nfailures = 3\n";
        assert_eq!(FleetConfig::from_toml_str("app.toml", text).unwrap(), None);
    }

    #[test]
    fn a_misspelt_key_gets_did_you_mean_and_its_line() {
        let text = "[fleet]\nurl = \"redis://127.0.0.1/\"\nshares = [\"payments*\"]\n";
        let e = FleetConfig::from_toml_str("app.toml", text).unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(
            e.to_string()
                .starts_with("app.toml:3: [fleet] unknown key `shares`; did you mean `share`?"),
            "{e}"
        );
    }

    #[test]
    fn on_store_error_reads_its_three_values_and_names_a_wrong_one() {
        let read = |v: &str| {
            FleetConfig::from_toml_str(
                "f.toml",
                &format!("[fleet]\nurl = \"r\"\non_store_error = {v}\n"),
            )
        };
        assert_eq!(
            FleetConfig::new("r").on_store_error,
            OnStoreError::Local,
            "the default"
        );
        for policy in [
            OnStoreError::Local,
            OnStoreError::Open,
            OnStoreError::Closed,
        ] {
            let got = read(&format!("\"{}\"", policy.as_str())).unwrap().unwrap();
            assert_eq!(got.on_store_error, policy);
        }
        let e = read("\"closd\"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "f.toml:3: [fleet] `on_store_error` cannot be `closd`; did you mean `closed`? (one of: local, open, closed)"
        );
        let e = read("\"fail-open\"").unwrap_err();
        assert!(
            e.to_string().ends_with("(one of: local, open, closed)"),
            "{e}"
        );
        let e = read("true").unwrap_err();
        assert!(
            e.to_string().contains(
                "[fleet] `on_store_error` must be one of \"local\", \"open\", \"closed\""
            ),
            "{e}"
        );
        let e = FleetConfig::from_toml_str(
            "f.toml",
            "[fleet]\nurl = \"r\"\non_store_eror = \"open\"\n",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("did you mean `on_store_error`?"),
            "{e}"
        );
    }

    #[test]
    fn wrong_values_are_named() {
        let cases = [
            ("[fleet]\nprefix = \"x\"\n", "[fleet] needs `url`"),
            ("[fleet]\nurl = 5\n", "[fleet] `url` must be a string"),
            (
                "[fleet]\nurl = \"r\"\nshare = \"payments\"\n",
                "[fleet] `share` must be an array",
            ),
            ("[fleet]\nurl = \"r\"\nshare = [1]\n", "must hold strings"),
            (
                "[fleet]\nurl = \"r\"\ntimeout = \"fast\"\n",
                "[fleet] `timeout`:",
            ),
            ("fleet = 3\n", "`fleet` must be a table"),
            (
                "[fleet]\nurl = \"r\"\ninstance = \"\"\n",
                "f.toml:3: [fleet] `instance` cannot be empty",
            ),
            (
                "[fleet]\nurl = \"r\"\nresync_every = \"0s\"\n",
                "f.toml:3: [fleet] `resync_every` must be more than 0s",
            ),
            (
                "[fleet]\nurl = \"r\"\ntimeout = \"0ms\"\n",
                "f.toml:3: [fleet] `timeout` must be more than 0s",
            ),
        ];
        for (text, wanted) in cases {
            let e = FleetConfig::from_toml_str("f.toml", text).unwrap_err();
            assert!(e.to_string().contains(wanted), "{text:?}: {e}");
        }
    }
}

#[cfg(test)]
mod trip_tests {
    use super::*;

    fn read(text: &str) -> Result<FleetConfig, FleetConfigError> {
        FleetConfig::from_toml_str("f.toml", &format!("[fleet]\nurl = \"r\"\n{text}"))
            .map(|c| c.expect("a [fleet] table"))
    }

    #[test]
    fn fleet_trip_and_quorum_read_as_numbers_and_percentages() {
        assert_eq!(
            read("").unwrap().trip_of("x"),
            FleetTrip::Any,
            "the default"
        );
        assert_eq!(
            read("fleet_trip = \"quorum\"\n").unwrap().trip_of("x"),
            FleetTrip::Quorum(Quorum::Instances(2)),
            "a quorum of two by default"
        );
        assert_eq!(
            read("fleet_trip = \"quorum\"\nquorum = 3\n")
                .unwrap()
                .trip_of("x"),
            FleetTrip::Quorum(Quorum::Instances(3))
        );
        assert_eq!(
            read("fleet_trip = \"quorum\"\nquorum = \"50%\"\n")
                .unwrap()
                .trip_of("x"),
            FleetTrip::Quorum(Quorum::Percent(50))
        );
    }

    #[test]
    fn a_breakers_own_table_wins_and_inherits_the_quorum() {
        let config = read(
            "fleet_trip = \"quorum\"\nquorum = 3\n[fleet.breakers.\"search*\"]\nfleet_trip = \"any\"\n[fleet.breakers.payments]\nquorum = \"60%\"\n[fleet.breakers.inventory]\nfleet_trip = \"quorum\"\n",
        )
        .unwrap();
        assert_eq!(config.trip_of("search-eu"), FleetTrip::Any);
        assert_eq!(
            config.trip_of("payments"),
            FleetTrip::Quorum(Quorum::Percent(60))
        );
        assert_eq!(
            config.trip_of("inventory"),
            FleetTrip::Quorum(Quorum::Instances(3)),
            "the [fleet] quorum"
        );
        assert_eq!(
            config.trip_of("other"),
            FleetTrip::Quorum(Quorum::Instances(3))
        );
    }

    #[test]
    fn wrong_trips_and_quorums_are_named_with_their_line() {
        let cases = [
            (
                "fleet_trip = \"quorom\"\n",
                "f.toml:3: [fleet] `fleet_trip` cannot be `quorom`; did you mean `quorum`? (one of: any, quorum)",
            ),
            (
                "fleet_trip = 2\n",
                "f.toml:3: [fleet] `fleet_trip` must be one of \"any\", \"quorum\"",
            ),
            (
                "fleet_trip = \"quorum\"\nquorum = 0\n",
                "f.toml:4: [fleet] `quorum` must be at least 1: a number of instances, like 2, or a percentage of the live instances, like \"50%\"",
            ),
            (
                "fleet_trip = \"quorum\"\nquorum = \"150%\"\n",
                "f.toml:4: [fleet] `quorum` must be a percentage from 1% to 100%: a number of instances, like 2, or a percentage of the live instances, like \"50%\"",
            ),
            (
                "fleet_trip = \"quorum\"\nquorum = \"half\"\n",
                "f.toml:4: [fleet] `quorum` cannot be `half`: a number of instances, like 2, or a percentage of the live instances, like \"50%\"",
            ),
            (
                "quorum = 2\n",
                "f.toml:3: [fleet] `quorum` has no effect with `fleet_trip = \"any\"` (the default): set `fleet_trip = \"quorum\"` too",
            ),
            (
                "[fleet.breakers.payments]\nfleet_tirp = \"any\"\n",
                "f.toml:4: [fleet.breakers.payments] unknown key `fleet_tirp`; did you mean `fleet_trip`? (keys: fleet_trip, quorum)",
            ),
            (
                "[fleet.breakers.payments]\nquorum = 2\n",
                "f.toml:4: [fleet.breakers.payments] `quorum` has no effect with `fleet_trip = \"any\"` (the default): set `fleet_trip = \"quorum\"` too",
            ),
            (
                "fleet_trp = \"quorum\"\n",
                "f.toml:3: [fleet] unknown key `fleet_trp`; did you mean `fleet_trip`?",
            ),
        ];
        for (text, wanted) in cases {
            let e = read(text).unwrap_err().to_string();
            assert!(
                e.starts_with(wanted),
                "{text:?}:\n  got  {e}\n  want {wanted}"
            );
        }
    }

    #[test]
    fn a_quorum_is_never_more_than_the_live_instances_nor_less_than_one() {
        let two = Quorum::Instances(2);
        assert_eq!([1, 2, 3].map(|n| two.needed(n)), [1, 2, 2]);
        let half = Quorum::Percent(50);
        assert_eq!([1, 2, 3, 4, 5].map(|n| half.needed(n)), [1, 1, 2, 2, 3]);
        assert_eq!(Quorum::Percent(100).needed(4), 4);
        assert_eq!(Quorum::Instances(5).needed(0), 1);
    }
}
