//! The fleet's view of its instances, as the task's heartbeats read them: each shared breaker
//! ([`FleetBreaker`]) with the instances sharing it ([`LiveInstance`]) and its last quorum
//! tally.

use core::time::Duration;

use breakerbox_runtime::State;

use crate::config::FleetTrip;

/// One instance sharing a breaker, as the fleet's last heartbeat read it: from
/// [`Fleet::instances`](crate::Fleet::instances).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveInstance {
    /// Its name ([`FleetConfig::instance`](crate::FleetConfig::instance)).
    pub instance: String,
    /// Its local state of the breaker when it last beat (`None`: a state this version does not
    /// know).
    pub state: Option<State>,
    /// How long its heartbeat had to live when it was read (three
    /// [`resync_every`](crate::FleetConfig::resync_every)s when it beats).
    pub expires_in: Duration,
    /// When it was read, on this process's clock.
    pub read_at: tokio::time::Instant,
    /// Whether it is this process.
    pub this: bool,
}

/// A shared breaker as the fleet sees it: from [`Fleet::instances`](crate::Fleet::instances).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetBreaker {
    /// The breaker's name.
    pub name: String,
    /// What a local trip of it does to the fleet.
    pub trip: FleetTrip,
    /// The instances sharing it whose heartbeat was live when last read, this one included,
    /// each with its local state, by name: the fleet's hosts reporting.
    pub instances: Vec<LiveInstance>,
    /// Under a quorum, the last tally this instance's report of a trip got back: `(open,
    /// needed, live)`, the open reports of live instances, the quorum among them, and how many
    /// were live.
    pub last_tally: Option<(u32, u32, u32)>,
}

/// The last tally of a breaker's quorum this instance saw: open reports of live instances,
/// the quorum among them, and how many are live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) open: u32,
    pub(crate) needed: u32,
    pub(crate) live: u32,
}
