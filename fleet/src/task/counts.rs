//! Fleet-count trips (`count.lua`): a failure-rate breaker over a time window also trips when
//! the fleet's summed counts reach its rate, for services where no instance alone sees
//! `min_calls`.
//!
//! Every 100 ms the task reads each such shared breaker's `metrics()` totals and sends what was
//! judged since its last batch (successes and failures while closed) to the script, which adds
//! them to the current bucket of the fleet's window, sums the window, and trips the record (only
//! over a closed one) when the fleet's rate reaches the limit with at least `min_calls`. A
//! batch the store fails to take is dropped. Nothing is sent while nothing was called: the
//! cost is at most 10 script calls a second per shared breaker and instance, whatever the call
//! rate, and Redis counts 4 commands in each (the call, `TIME`, `HGETALL` and `HSET` of the
//! record, where the counts live), plus an `HDEL` when a bucket leaves the window.
//!
//! **Counts belong to one record.** Each batch carries the epoch of the record the instance
//! had taken on; the script drops a batch judged under another record than the current one,
//! and starts the window empty whenever the record has changed since the window's counts were
//! added. Here, every change of the breaker's state, made here or taken on, starts the next
//! batch from the totals of that moment (`Tracked::recount`). So a
//! reset (on any instance, or from `redis-cli`) clears the fleet's counts: the failures that
//! tripped the breaker before it never re-trip it after.

use core::time::Duration;

use super::state::{Answer, Intent, Task};
use crate::keys::split_key;
use crate::store::{CountBatch, Counted};
use breakerbox_runtime::__integrations::BreakerExt;
use breakerbox_runtime::{State, Window};

/// How often counts are sent.
pub(super) const BATCH: Duration = Duration::from_millis(100);

impl Task {
    /// A hand on the breaker that changed no state (a `reset` of a closed breaker, a
    /// `force_open` of a forced-open one) tells no event: found here, every batch, and written
    /// as any manual change, so that a reset still empties the fleet's counts.
    fn hand_without_event(&mut self, name: &str) {
        let Some(t) = self.tracked.get_mut(name) else {
            return;
        };
        let Some(breaker) = t.breaker.upgrade() else {
            return;
        };
        let now = breaker.manual_changes();
        if now == t.manual {
            return;
        }
        t.manual = now;
        if self.holding() {
            return; // a hold's give-back finds it (hold.rs)
        }
        let (to, reason) = match breaker.state() {
            State::ForcedOpen => (State::ForcedOpen, breakerbox_runtime::Reason::ForcedOpen),
            State::Disabled => (State::Disabled, breakerbox_runtime::Reason::Disabled),
            State::Closed => (State::Closed, breakerbox_runtime::Reason::Reset),
            State::Open => {
                // A `trip_for` of an open breaker: written as any trip, for its open time.
                let left = breaker.held_state().open_remaining.unwrap_or_default();
                let pending = self.pending.entry(name.to_owned()).or_default();
                pending.auto = Some((Intent::Trip, breakerbox_runtime::Reason::TripFor(left)));
                return;
            }
            // Half-open: the hand's own transition told an event. (`State` is
            // non-exhaustive: a state added later is no hand's either.)
            _ => return,
        };
        let pending = self.pending.entry(name.to_owned()).or_default();
        pending.manual = Some((to, reason));
        pending.auto = None;
    }

    /// Sends every failure-rate breaker's counts since its last batch.
    pub(super) async fn send_counts(&mut self) {
        let names: Vec<String> = self.tracked.keys().cloned().collect();
        for name in names {
            self.hand_without_event(&name);
            // A family key's calls are judged by its own breaker: no fleet counts (keys.rs).
            if self.left_alone(&name) || split_key(&name).is_some() {
                continue;
            }
            let Some(breaker) = self.tracked.get(&name).and_then(|t| t.breaker.upgrade()) else {
                continue;
            };
            let config = breaker.config();
            let (Some(rate), Window::Time(window)) = (config.failure_rate(), config.window())
            else {
                continue;
            };
            let m = breaker.metrics();
            let totals = (m.successes + m.failures, m.failures);
            let Some(t) = self.tracked.get_mut(&name) else {
                continue;
            };
            let last = t.counted.replace(totals);
            // The record these calls were judged under: the script drops the batch if the
            // fleet has written another since (a reset, a trip, a close).
            let epoch = t.applied;
            let Some((calls, failures)) = last else {
                continue;
            };
            let delta = (totals.0 - calls, totals.1 - failures);
            if delta.0 == 0 || m.state != State::Closed {
                continue;
            }
            let window_ms = window.as_millis().max(1) as u64;
            let bucket_ms = (window_ms / 10).max(BATCH.as_millis() as u64);
            let batch = CountBatch {
                calls: delta.0,
                failures: delta.1,
                window_ms,
                bucket_ms,
                min_calls: config.min_calls(),
                rate,
                open_ms: config.open_for().as_millis().max(1) as u64,
                instance: self.shared.instance.clone(),
                epoch,
            };
            let limit = self.shared.config.timeout * 2;
            let reply = tokio::time::timeout(limit, self.store.count(name.clone(), batch)).await;
            let reply = self.answered(reply);
            match reply {
                Answer::Done(Counted { tripped: true, .. }) => {
                    self.shared
                        .pushed
                        .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                }
                Answer::Done(_) | Answer::Failed => {}
                Answer::Unreadable(why) => self.troubled(&name, &why),
            }
        }
    }
}
