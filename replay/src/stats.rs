//! The journal's counts as metrics (feature `metrics`): `breakerbox_replay_total` by `event`
//! (queued, deduplicated, replayed, failed, dead_lettered, expired, dropped, refused), and the
//! gauges `breakerbox_replay_entries`, `breakerbox_replay_bytes` and
//! `breakerbox_replay_dead_letters`, each labelled `journal`. Reported after the journal's
//! lock is released: a recorder is user code.

use std::sync::Arc;

use crate::journal::JournalCounts;

pub(crate) struct Sink {
    name: Arc<str>,
}

impl Sink {
    pub(crate) fn new(name: &str) -> Self {
        Sink { name: name.into() }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    #[cfg(feature = "metrics")]
    pub(crate) fn count(&self, counts: &JournalCounts) {
        let events = [
            ("queued", counts.queued),
            ("deduplicated", counts.deduplicated),
            ("replayed", counts.replayed),
            ("failed", counts.failed),
            ("dead_lettered", counts.dead_lettered),
            ("expired", counts.expired),
            ("dropped", counts.dropped),
            ("refused", counts.refused),
        ];
        for (event, n) in events {
            if n > 0 {
                metrics::counter!("breakerbox_replay_total", "journal" => self.name.to_string(), "event" => event)
                    .increment(n);
            }
        }
    }

    #[cfg(not(feature = "metrics"))]
    pub(crate) fn count(&self, _counts: &JournalCounts) {}
}

/// Reports the gauges of a journal's status, outside its lock.
#[cfg(feature = "metrics")]
pub(crate) fn gauges(name: &str, status: &crate::journal::JournalStatus) {
    let label = name.to_string();
    metrics::gauge!("breakerbox_replay_entries", "journal" => label.clone())
        .set(status.entries as f64);
    metrics::gauge!("breakerbox_replay_bytes", "journal" => label.clone()).set(status.bytes as f64);
    metrics::gauge!("breakerbox_replay_dead_letters", "journal" => label)
        .set(status.dead_letters as f64);
}
