//! What the admin remembers of each registry breaker and family key, from the registry-wide
//! listener: whether its current opening was taken on from another instance (fleet mode's
//! imported records), which `GET /health` reads to judge a shared breaker by what this
//! instance saw.
//!
//! Kept in one process-wide table behind a std mutex, fed by the listener the first router
//! installs. The listener only updates the table: no user code runs under its lock.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

use breakerbox_runtime::{Event, Reason, State};

/// What is kept of one breaker or key.
#[derive(Default)]
struct Track {
    /// Its current opening (open or forced open) was taken on from another instance
    /// ([`Reason::Imported`]), not made by this instance's own calls or hands.
    by_fleet: bool,
}

impl Track {
    fn record(&mut self, event: &Event) {
        let opened = matches!(event.to, State::Open | State::ForcedOpen);
        let was_open = matches!(event.from, State::Open | State::ForcedOpen);
        if !opened || event.reason != Reason::Imported {
            self.by_fleet = false;
        } else if !was_open {
            // An opening that came from the fleet; an import over an opening of this
            // instance's own (the fleet's record of its own trip) leaves it this instance's.
            self.by_fleet = true;
        }
    }
}

/// The table: registry breakers by name, family keys by family and key.
#[derive(Default)]
struct Table {
    breakers: HashMap<String, Track>,
    keys: HashMap<String, HashMap<String, Track>>,
}

fn table() -> MutexGuard<'static, Table> {
    static TABLE: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);
    // A poisoned lock still holds a usable table: every update leaves it whole.
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records one state change (the registry-wide listener calls it).
pub(crate) fn record(event: &Event) {
    let mut t = table();
    match &event.key {
        None => t
            .breakers
            .entry(event.name.clone())
            .or_default()
            .record(event),
        Some(key) => {
            // Only keys open by the fleet are kept: a key closed, or open by its own calls, is
            // judged by its state alone, so the table grows with the keys the fleet opened.
            let keys = t.keys.entry(event.name.clone()).or_default();
            let mut track = keys.remove(key).unwrap_or_default();
            track.record(event);
            if track.by_fleet {
                keys.insert(key.clone(), track);
            }
        }
    }
}

/// Whether breaker `name` (or key `key` of family `name`) is open by a record taken on from
/// another instance rather than by this instance's own calls or hands.
pub(crate) fn open_by_fleet(name: &str, key: Option<&str>) -> bool {
    let t = table();
    match key {
        None => t.breakers.get(name).is_some_and(|b| b.by_fleet),
        Some(key) => t
            .keys
            .get(name)
            .and_then(|keys| keys.get(key))
            .is_some_and(|k| k.by_fleet),
    }
}
