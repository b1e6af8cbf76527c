//! Quorum trips and heartbeats (`quorum.lua`, `heartbeat.lua`).
//!
//! An instance that shares a breaker under a quorum beats once every re-read pass, for the
//! instance and not per breaker: `heartbeat.lua` puts it in the fleet's live set (the hash
//! `{<prefix>:}:live`, with the expiry of its beat, three `resync_every`s from the server's now,
//! and the breakers it holds other than closed), drops those whose beat has expired, and
//! returns everyone's: the latest read is kept for [`Fleet::instances`](crate::Fleet::instances),
//! so that no admin request waits for the store, and for the quorum. A fleet without a breaker
//! under a quorum sends no heartbeat.
//!
//! Under a quorum (`FleetTrip::Quorum`), a breaker that opens by itself over a closed record
//! reports it with `quorum.lua` instead of writing the record, right after a heartbeat of its
//! own, and hands the script the live instances that beat read (the live set is a key on
//! another Cluster slot than the breaker's, so the script cannot read it itself). Its report
//! lasts its open time, and once the reports of live instances reach the quorum, the script
//! opens the record (one write, published as any). Until then the breaker is open here only.

use core::time::Duration;
use std::collections::BTreeMap;

use tokio::time::Instant;

use super::state::{Answer, Pushed, Task};
use crate::config::Quorum;
use crate::instances::{LiveInstance, Tally};
use crate::keys::split_key;
use crate::store::{Beat, Change, Live, Report, Reported, StoreError};
use breakerbox_runtime::{Breaker, State};

/// A state as an instance reports it: `State::as_str`.
pub(crate) fn parse_state(text: &str) -> Option<State> {
    [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ]
    .into_iter()
    .find(|s| s.as_str() == text)
}

impl Task {
    /// Reports a local trip of `name` under `quorum`; `trip` is the trip's compare-and-set
    /// (`change_of`). The record opens if the quorum is reached; else the breaker stays open
    /// here alone.
    pub(super) async fn report(
        &mut self,
        name: &str,
        breaker: &Breaker,
        quorum: Quorum,
        mut trip: Change,
    ) -> Pushed {
        // A fresh look at the live set, this instance's own beat with it.
        match self.beat_once().await {
            Answer::Done(()) => {}
            Answer::Unreadable(why) => {
                self.troubled(name, &why);
                return Pushed::Kept;
            }
            Answer::Failed => return Pushed::Failed,
        }
        for _ in 0..2 {
            let report = Report {
                trip: trip.clone(),
                quorum,
                live: self.beat.clone(),
            };
            let limit = self.shared.config.timeout * 2;
            let reply =
                tokio::time::timeout(limit, self.store.report(name.to_owned(), report)).await;
            let answer = self.answered(reply);
            let Reported {
                record,
                taken: reported,
                open,
                needed,
                live,
            } = match answer {
                Answer::Done(reply) => reply,
                Answer::Unreadable(why) => {
                    self.troubled(name, &why);
                    return Pushed::Kept;
                }
                Answer::Failed => return Pushed::Failed,
            };
            self.readable(name);
            // Kept for the fleet view, which lists single breakers: a family's keys, made
            // and evicted without end, would leave a tally each.
            if reported && split_key(name).is_none() {
                self.shared
                    .tallies
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.to_owned(), Tally { open, needed, live });
            }
            if !record.changed && !reported && record.epoch == 0 && trip.seen != 0 {
                // The record vanished (FLUSHALL, a restart): reported over "no record" instead.
                trip.seen = 0;
                continue;
            }
            if record.changed || !reported {
                // The quorum opened the record here, or the record is not the closed one this
                // instance saw (another trip, a reset): as any write's answer.
                self.took(name, breaker, &record, false);
            }
            return Pushed::Done;
        }
        Pushed::Done
    }

    /// This instance's heartbeat, with the breakers it holds other than closed.
    pub(super) fn beat_of(&self) -> Beat {
        let mut states = String::new();
        for (name, t) in &self.tracked {
            let state = t.breaker.upgrade().map_or(State::Closed, |b| b.state());
            if state != State::Closed {
                let state = state.as_str();
                states.push_str(&format!("{}:{name}{}:{state}", name.len(), state.len()));
            }
        }
        Beat {
            instance: self.shared.instance.clone(),
            life: self.live_ttl(),
            states,
        }
    }

    /// The heartbeat's answer from a pass's re-reads (sent at `sent`): everyone's as read,
    /// kept for `Fleet::instances` and the quorum. The store failing counts as for any
    /// operation; an error of the beat alone leaves the last view as it was (the records'
    /// answers say whether the store fails).
    pub(super) fn took_beat(&mut self, beat: Result<Live, StoreError>, sent: Instant) {
        match beat {
            Ok(reply) => self.keep_beat(&reply, sent),
            Err(StoreError::Failed(why)) => self.failed(&why),
            Err(StoreError::Record(_)) => {}
        }
    }

    /// Beats on its own (`ask`: loading the script if the server lacks it); `false` if the
    /// store failed.
    pub(super) async fn beat_now(&mut self) -> bool {
        !matches!(self.beat_once().await, Answer::Failed)
    }

    async fn beat_once(&mut self) -> Answer<()> {
        let sent = Instant::now();
        let limit = self.shared.config.timeout * 2;
        let reply = tokio::time::timeout(limit, self.store.beat(self.beat_of())).await;
        match self.answered(reply) {
            Answer::Done(reply) => {
                self.keep_beat(&reply, sent);
                Answer::Done(())
            }
            Answer::Unreadable(why) => Answer::Unreadable(why),
            Answer::Failed => Answer::Failed,
        }
    }

    /// A heartbeat's answer kept: the live set for the quorum, and each shared breaker's
    /// view, every live instance with its state of it (closed unless it listed another).
    fn keep_beat(&mut self, reply: &Live, read_at: Instant) {
        let now = reply.now_ms;
        self.beat = reply
            .instances
            .iter()
            .map(|a| (a.instance.clone(), a.expires_ms))
            .collect();
        let listed: Vec<(String, u64, BTreeMap<String, State>)> = reply
            .instances
            .iter()
            .map(|a| (a.instance.clone(), a.expires_ms, parse_states(&a.states)))
            .collect();
        let mut kept = self.shared.live.lock().unwrap_or_else(|e| e.into_inner());
        kept.clear();
        // The view lists single breakers (`Fleet::instances`).
        for name in self.tracked.keys().filter(|n| split_key(n).is_none()) {
            let mut live: Vec<LiveInstance> = listed
                .iter()
                .map(|(instance, expires, states)| LiveInstance {
                    this: *instance == self.shared.instance,
                    instance: instance.clone(),
                    state: Some(states.get(name).copied().unwrap_or(State::Closed)),
                    expires_in: Duration::from_millis(expires.saturating_sub(now)),
                    read_at,
                })
                .collect();
            live.sort_by(|a, b| a.instance.cmp(&b.instance));
            kept.insert(name.clone(), live);
        }
    }

    /// Without heartbeats (no breaker under a quorum), each shared breaker's view is this
    /// instance alone, with its local state.
    pub(super) fn view_alone(&mut self) {
        self.beat.clear();
        let read_at = Instant::now();
        let mut kept = self.shared.live.lock().unwrap_or_else(|e| e.into_inner());
        kept.clear();
        for (name, t) in self.tracked.iter().filter(|(n, _)| split_key(n).is_none()) {
            let state = t.breaker.upgrade().map_or(State::Closed, |b| b.state());
            kept.insert(
                name.clone(),
                vec![LiveInstance {
                    instance: self.shared.instance.clone(),
                    state: Some(state),
                    expires_in: Duration::ZERO,
                    read_at,
                    this: true,
                }],
            );
        }
    }
}

/// A heartbeat's states, `<len>:<breaker><len>:<state>` repeated, as a map; a part this
/// version cannot read ends it.
fn parse_states(text: &str) -> BTreeMap<String, State> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    let field = |rest: &mut &str| -> Option<String> {
        let (len, after) = rest.split_once(':')?;
        let len: usize = len.parse().ok()?;
        let value = after.get(..len)?.to_owned();
        *rest = &after[len..];
        Some(value)
    };
    while !rest.is_empty() {
        let (Some(name), Some(state)) = (field(&mut rest), field(&mut rest)) else {
            break;
        };
        if let Some(state) = parse_state(&state) {
            out.insert(name, state);
        }
    }
    out
}
