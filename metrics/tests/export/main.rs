//! The `metrics` export (`breakerbox-metrics`): what each metric says, for single breakers and
//! keyed families, read back from `metrics-util`'s debugging recorder.

use std::sync::{Mutex, MutexGuard};

use breakerbox_metrics as export;

mod breakers;
mod key_events;
mod keyed;
mod latency;
mod rebuilt;

/// Held by the tests that export families or change the export's settings: those are
/// process-wide (the top-N and per-key switches, and each family name's last exported
/// counters), and tests in one binary run in parallel.
fn settings() -> MutexGuard<'static, ()> {
    static SETTINGS: Mutex<()> = Mutex::new(());
    SETTINGS.lock().unwrap_or_else(|e| e.into_inner())
}
