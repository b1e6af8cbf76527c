//! The task's loop: one turn at a time, local changes from the listeners first, then the
//! published records, the probe leases, the count batches and the re-reads (each taken in
//! by the files below it: `intake.rs`, `lease.rs`, `counts.rs`, `resync.rs`).

use core::time::Duration;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use breakerbox_runtime::__integrations::BreakerExt;
use breakerbox_runtime::State;

use super::counts;
use super::state::Task;
use crate::shared::{Message, give_back};

/// The loop's timers: the next re-read, and the count batches.
pub(super) struct TaskTimers {
    pub(super) next: Instant,
    pub(super) batch: tokio::time::Interval,
}

impl Task {
    pub(crate) async fn run(mut self) {
        let mut timers = TaskTimers {
            next: Instant::now(),
            batch: tokio::time::interval(counts::BATCH),
        };
        timers
            .batch
            .set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        while self.step(&mut timers).await {}
    }

    /// One turn of the loop; `false` once the fleet is gone.
    ///
    /// Local changes come before published records: a change this instance made before the
    /// task looks at a record is written (or kept pending, if the store fails) first, so a
    /// record written before that change (by another instance, or by this one's count batch)
    /// is never taken on over it; `apply` then finds it older than the write, or a manual
    /// change pending.
    pub(super) async fn step(&mut self, timers: &mut TaskTimers) -> bool {
        let probe_at = self.next_probe();
        tokio::select! {
            biased;
            message = self.rx.recv() => match message {
                Some(Message::Changed { name, to, reason, breaker }) => {
                    self.on_change(name, to, reason, breaker);
                    // Everything queued goes in one flush.
                    while let Ok(more) = self.rx.try_recv() {
                        self.on_message(more).await;
                    }
                    self.flush().await;
                }
                Some(other) => self.on_message(other).await,
                None => return false,
            },
            event = self.pushes.recv(), if !self.feed_closed => match event {
                Some(event) => self.on_event(event),
                None => self.on_feed_closed(),
            },
            _ = tokio::time::sleep_until(probe_at.unwrap_or(timers.next)), if probe_at.is_some() => {
                self.probe_due().await;
            }
            _ = timers.batch.tick() => self.send_counts().await,
            _ = tokio::time::sleep_until(timers.next) => {
                self.tick().await;
                timers.next = Instant::now() + self.period();
            }
        }
        self.shared
            .pending
            .store(self.pending.len() as u64, Ordering::Relaxed);
        self.shared
            .shared
            .store(self.tracked.len() as u64, Ordering::Relaxed);
        // A failure or a disconnection in any branch owes a re-read within 100 ms (`period`):
        // the next one comes forward, never later.
        let soon = Instant::now() + self.period();
        if soon < timers.next {
            timers.next = soon;
        }
        true
    }

    /// While the store fails or a re-read is owed: a quarter of `resync_every`, at most 100 ms.
    pub(super) fn period(&self) -> Duration {
        let every = self.shared.config.resync_every;
        if self.owed || self.pending.keys().any(|name| !self.left_alone(name)) {
            (every / 4).min(Duration::from_millis(100))
        } else {
            every
        }
    }

    pub(super) async fn on_message(&mut self, message: Message) {
        if let Some(done) = self.note(message) {
            // Asked for by hand: every record, not only those a periodic pass reads.
            self.owed = true;
            let ok = self.tick().await;
            let _ = done.send(ok);
        }
    }
}

impl Drop for Task {
    /// The task is gone (its `Fleet` dropped, or its runtime shut down): no breaker stays held.
    fn drop(&mut self) {
        give_back(&self.shared);
        // The probe budgets lease.rs set are the fleet's: unshared, each decides alone.
        for (name, t) in &self.tracked {
            let Some(b) = t.breaker.upgrade() else {
                continue;
            };
            b.set_probe_budget(None);
            // Held open past the open time it reports, for a probe lease that no longer comes:
            // open for the time it reports, then it probes on its own.
            let shown = b.export_state();
            if shown.state == State::Open && shown.open_remaining < b.held_state().open_remaining {
                let (told, failure) = self.told(name, State::Open);
                b.import_reporting(&shown, None, told.as_deref(), failure.as_deref());
            }
        }
    }
}
