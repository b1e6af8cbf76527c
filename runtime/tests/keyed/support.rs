//! What the keyed tests share: one test at a time, and a family's config.

use std::sync::Mutex;
use std::time::Duration;

use breakerbox_runtime::{Config, ManualClock};

/// The tests that read `live_breakers` (a process-wide count) run one at a time, and every
/// other test of the binary takes the lock too, so none creates breakers meanwhile.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// One failure opens a key for 60 s; the family holds `max_keys` and evicts keys idle for
/// `idle` seconds, on `clock`.
pub fn config(clock: &ManualClock, max_keys: u32, idle: u64) -> Config {
    Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(60))
        .max_keys(max_keys)
        .idle_for(Duration::from_secs(idle))
        .clock(clock.clone())
        .build()
        .unwrap()
}
