//! What every handler shares: the router's state, made once by
//! [`Admin::router`](crate::Admin::router).

#[cfg(feature = "metrics")]
use std::sync::Arc;

use crate::auth::Tokens;

/// How `GET /metrics` renders Prometheus text ([`Admin::prometheus`](crate::Admin::prometheus)).
#[cfg(feature = "metrics")]
pub(crate) type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// What every handler shares.
pub(crate) struct AdminState {
    pub(crate) tokens: Tokens,
    pub(crate) health_scope: crate::health_scope::HealthScope,
    #[cfg(feature = "metrics")]
    pub(crate) prometheus: Option<Render>,
    #[cfg(feature = "fleet")]
    pub(crate) fleet: Option<breakerbox_fleet::FleetView>,
    /// Ends every `GET /events` stream once it completes ([`Admin::end_streams_on`](crate::Admin::end_streams_on)).
    pub(crate) streams_end: Option<StreamsEnd>,
}

/// The signal given to [`Admin::end_streams_on`](crate::Admin::end_streams_on), awaited by
/// every stream at once.
pub(crate) type StreamsEnd =
    futures_util::future::Shared<core::pin::Pin<Box<dyn core::future::Future<Output = ()> + Send>>>;

impl AdminState {
    /// This process's name in the fleet, when the router was given a fleet view.
    pub(crate) fn instance(&self) -> Option<String> {
        #[cfg(feature = "fleet")]
        if let Some(view) = &self.fleet {
            return Some(view.instance().to_owned());
        }
        None
    }
}
