//! [`FleetView`]: the fleet's instances, readable from anywhere (an admin endpoint) for as long
//! as the fleet runs.

use std::sync::Arc;

use crate::instances::FleetBreaker;
use crate::shared::Inner;

/// What [`Fleet::view`](crate::Fleet::view) gives: the fleet's view of its instances, readable
/// from anywhere while the fleet runs, and empty once it is dropped.
#[derive(Clone, Debug)]
pub struct FleetView {
    shared: std::sync::Weak<Inner>,
    instance: String,
}

impl FleetView {
    /// The view of the fleet that `shared` is the state of.
    pub(crate) fn of(shared: &Arc<Inner>) -> FleetView {
        FleetView {
            shared: Arc::downgrade(shared),
            instance: shared.instance.clone(),
        }
    }

    /// [`Fleet::instances`](crate::Fleet::instances), or nothing once the fleet is dropped.
    pub fn instances(&self) -> Vec<FleetBreaker> {
        self.shared
            .upgrade()
            .map_or_else(Vec::new, |s| s.instances())
    }

    /// [`Fleet::instance`](crate::Fleet::instance): this process's name in the fleet.
    pub fn instance(&self) -> &str {
        &self.instance
    }
}
