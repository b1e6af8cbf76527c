//! What every handler shares: the router's state, made once by
//! [`Admin::router`](crate::Admin::router).

#[cfg(feature = "metrics")]
use std::sync::Arc;

use crate::auth::Token;

/// How `GET /metrics` renders Prometheus text ([`Admin::prometheus`](crate::Admin::prometheus)).
#[cfg(feature = "metrics")]
pub(crate) type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// What every handler shares.
pub(crate) struct AdminState {
    pub(crate) token: Option<Token>,
    pub(crate) health_scope: crate::HealthScope,
    #[cfg(feature = "metrics")]
    pub(crate) prometheus: Option<Render>,
    #[cfg(feature = "fleet")]
    pub(crate) fleet: Option<breakerbox_fleet::FleetView>,
}
