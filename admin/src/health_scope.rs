//! [`HealthScope`]: how `GET /health` judges a breaker whose state another instance made. Apart
//! from `health.rs` so that the router's state can hold it without the two naming each other.

/// How `GET /health` judges a breaker whose state another instance made: a breaker shared
/// through fleet mode (or any breaker given a state with
/// [`Breaker::import_state`](breakerbox_runtime::Breaker::import_state)).
///
/// The default is [`Instance`](HealthScope::Instance). A readiness probe asks "should this
/// pod get traffic?", and the answer should differ between pods only by what differs between
/// them: when the fleet's record of a critical breaker opens, every instance takes it on at
/// once, and judging by it would take every pod out of the service together, a partial outage
/// made total (and with no traffic, no calls left to probe the dependency with). Judged by
/// what this instance saw, only the instances whose own calls tripped the breaker go
/// unready; the others answer `DEGRADED` (still `200`), rejecting the calls the fleet's
/// breaker rejects, as a non-critical breaker would.
///
/// Where an opening came from is learnt from the state changes the first router built sees:
/// build the router before starting the fleet, or an opening taken on before it counts as
/// this instance's own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum HealthScope {
    /// By what this instance saw (the default): a critical breaker is `DOWN` while it is open
    /// or forced open by this instance's own calls or hands; open by a record taken on from
    /// another instance it is `DEGRADED`. Half-open is `DEGRADED` either way, and an opening
    /// taken on from the fleet after this instance's own opening ended (the fleet's probe
    /// rounds) stays `DEGRADED`: readiness does not flap as the fleet probes.
    #[default]
    Instance,
    /// By the breaker's state whoever made it, as
    /// [`Registry::health`](breakerbox_runtime::Registry::health) judges: every instance
    /// answers alike, so a critical shared breaker open takes every instance `DOWN` together.
    Fleet,
}
