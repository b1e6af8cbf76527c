//! The registry's health, for a readiness probe: [`Registry::health`].

use core::fmt;

use crate::breaker::Breaker;
use crate::registry::Registry;
use crate::state::State;

/// A health status, as Spring Boot's actuator names them (`UP`, `DOWN`) with one between.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "UPPERCASE"))]
#[non_exhaustive]
pub enum HealthStatus {
    /// Every counted breaker is closed (or disabled, which lets every call through).
    Up,
    /// Some counted breaker is open, forced open or half-open, or some key of a counted
    /// family is; none of them critical.
    Degraded,
    /// A counted breaker marked [`critical`](crate::ConfigBuilder::critical) is open or forced
    /// open, or a key of a critical family is.
    Down,
}

impl HealthStatus {
    /// `UP`, `DEGRADED` or `DOWN`.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Up => "UP",
            HealthStatus::Degraded => "DEGRADED",
            HealthStatus::Down => "DOWN",
        }
    }
}

impl fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One breaker or keyed family in [`Health::components`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ComponentHealth {
    /// The breaker's or the family's name.
    pub name: String,
    /// What it makes of the whole.
    pub status: HealthStatus,
    /// A breaker's state; `None` for a family.
    pub state: Option<State>,
    /// Whether it is [`critical`](crate::ConfigBuilder::critical) (a family: its own config's
    /// value; a key's table may say otherwise for that key).
    pub critical: bool,
    /// A family: its keys held now.
    pub keys: Option<usize>,
    /// A family: its keys open, half-open or forced open now (counted ones only).
    pub open_keys: Option<usize>,
}

/// The registry's health: the worst status of the breakers and families it counts, and each
/// of them. See [`Registry::health`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// The worst of the components' statuses; `UP` with none.
    pub status: HealthStatus,
    /// Every counted breaker and family, sorted by name.
    pub components: Vec<ComponentHealth>,
}

/// What one breaker makes of the health, if it is counted.
fn status_of(b: &Breaker) -> Option<HealthStatus> {
    let config = b.config();
    if !config.health() {
        return None;
    }
    Some(match b.state() {
        State::Closed | State::Disabled => HealthStatus::Up,
        State::Open | State::ForcedOpen if config.critical() => HealthStatus::Down,
        State::Open | State::ForcedOpen | State::HalfOpen => HealthStatus::Degraded,
    })
}

impl Registry {
    /// The health of the service as its breakers see it, for a readiness probe (the admin
    /// router's `GET /health`):
    ///
    /// - `DOWN` when a breaker marked [`critical`](crate::ConfigBuilder::critical) is open or
    ///   forced open, or a key of a critical family is;
    /// - `DEGRADED` when any other counted breaker or key is open, forced open or half-open
    ///   (a critical one half-open too: it is letting probes through);
    /// - `UP` otherwise.
    ///
    /// Every breaker and family counts unless its config says
    /// [`health = false`](crate::ConfigBuilder::health), a key that layers like any other
    /// (`[defaults]` in a file can leave everything out and a table bring one breaker back).
    /// These are Spring Boot's `registerHealthIndicator` and `allowHealthIndicatorToFail`.
    /// A family's key counts by its own config, so a key's table can mark one key critical;
    /// a family with open keys is `DEGRADED` unless those keys are critical: one host of many
    /// tripping is what a per-key breaker is for.
    ///
    /// ```
    /// use breakerbox_runtime::{Config, HealthStatus, registry};
    ///
    /// let db = registry().get_or_create("doc.health.db", || Config::builder().failures(1).critical(true).build().unwrap());
    /// let _ = db.call(|| Err::<(), _>("down"));
    /// let health = registry().health();
    /// assert_eq!(health.status, HealthStatus::Down);
    /// let c = health.components.iter().find(|c| c.name == "doc.health.db").unwrap();
    /// assert_eq!((c.status, c.critical), (HealthStatus::Down, true));
    /// # db.reset();
    /// ```
    pub fn health(&self) -> Health {
        let mut components = Vec::new();
        for b in self.breakers() {
            if let Some(status) = status_of(&b) {
                components.push(ComponentHealth {
                    name: b.name().to_owned(),
                    status,
                    state: Some(b.state()),
                    critical: b.config().critical(),
                    keys: None,
                    open_keys: None,
                });
            }
        }
        for (name, view) in crate::keyed::family_views() {
            let (mut keys, mut open, mut counted, mut worst) = (0, 0, 0, HealthStatus::Up);
            view.each_breaker(&mut |b| {
                keys += 1;
                if let Some(status) = status_of(b) {
                    counted += 1;
                    open += usize::from(status != HealthStatus::Up);
                    worst = worst.max(status);
                }
            });
            let config = view.family_config();
            if counted == 0 && !config.health() {
                continue;
            }
            components.push(ComponentHealth {
                name: name.into(),
                status: worst,
                state: None,
                critical: config.critical(),
                keys: Some(keys),
                open_keys: Some(open),
            });
        }
        components.sort_by(|a, b| a.name.cmp(&b.name));
        let status = components
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(HealthStatus::Up);
        Health { status, components }
    }
}
