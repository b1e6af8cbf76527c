//! Quorum trips and heartbeats (`quorum.lua`, `heartbeat.lua`).
//!
//! Every re-read pass, each instance beats for every breaker it shares: `heartbeat.lua` puts it in
//! the breaker's live set (the hash `{<prefix>:<name>}:live`, with the expiry of its beat, three
//! `resync_every`s from the server's now, and its local state of the breaker), drops those
//! whose beat has expired, and returns everyone's: the latest read is kept for
//! [`Fleet::instances`](crate::Fleet::instances), so that no admin request waits for the store.
//!
//! Under a quorum (`FleetTrip::Quorum`), a breaker that opens by itself over a closed record
//! reports it with `quorum.lua` instead of writing the record: its report lasts its open time,
//! and once the reports of live instances reach the quorum, the script opens the record (one
//! write, published as any). Until then the breaker is open here only.

use core::time::Duration;
use std::collections::BTreeMap;

use tokio::time::Instant;

use super::state::{Answer, Pushed, Task};
use crate::config::Quorum;
use crate::instances::{LiveInstance, Tally};
use crate::record::Record;
use crate::store::Script;
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
    /// Reports a local trip of `name` under `quorum`; `args` are `record.lua`'s for the trip
    /// (`cas`). The record opens if the quorum is reached; else the breaker stays open here
    /// alone.
    pub(super) async fn report(
        &mut self,
        name: &str,
        breaker: &Breaker,
        quorum: Quorum,
        args: &[&str; 10],
    ) -> Pushed {
        let [
            _,
            expected,
            _,
            open_ms,
            reopens,
            reason,
            last_failure,
            instance,
            channel,
            _,
        ] = *args;
        let keys = vec![
            self.key(name),
            self.key_of(name, "probes"),
            self.key_of(name, "live"),
            self.key_of(name, "opens"),
        ];
        let ttl = self.live_ttl().as_millis().max(1).to_string();
        let mut expected = expected.to_owned();
        for _ in 0..2 {
            let args = [
                &expected,
                open_ms,
                reopens,
                reason,
                last_failure,
                instance,
                channel,
                name,
                &quorum.arg(),
                &ttl,
            ]
            .map(|a| (*a).to_owned())
            .to_vec();
            let answer = self
                .ask::<Vec<String>>(Script::Quorum, keys.clone(), args)
                .await;
            let reply = match answer {
                Answer::Done(reply) => reply,
                Answer::Unreadable(why) => {
                    self.troubled(name, &why);
                    return Pushed::Kept;
                }
                Answer::Failed => return Pushed::Failed,
            };
            let tally: Vec<u32> = reply
                .get(10..13)
                .map(|t| t.iter().filter_map(|n| n.parse().ok()).collect())
                .unwrap_or_default();
            let (Some(record), &[open, needed, live]) = (
                Record::from_reply(reply.get(..9).unwrap_or_default()),
                &tally[..],
            ) else {
                self.troubled(name, "a reply of quorum.lua this instance cannot read");
                return Pushed::Kept;
            };
            self.readable(name);
            let reported = reply[9] == "1";
            if reported {
                self.shared
                    .tallies
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.to_owned(), Tally { open, needed, live });
            }
            if !record.changed && !reported && record.epoch == 0 && expected != "0" {
                // The record vanished (FLUSHALL, a restart): reported over "no record" instead.
                expected = "0".to_owned();
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

    /// The heartbeats of the breakers `names`, with their local states: `heartbeat.lua` as plain
    /// `EVALSHA` commands, for the re-read's pipeline (one round trip for a batch; in a
    /// Cluster, each goes to its key's node).
    pub(super) fn beat_commands(&self, names: &[String]) -> Vec<Vec<String>> {
        let ttl_ms = self.live_ttl().as_millis().max(1).to_string();
        names
            .iter()
            .map(|name| {
                let state = self
                    .tracked
                    .get(name)
                    .and_then(|t| t.breaker.upgrade())
                    .map_or(State::Closed, |b| b.state());
                vec![
                    "EVALSHA".to_owned(),
                    Script::Heartbeat.sha().to_owned(),
                    "1".to_owned(),
                    self.key_of(name, "live"),
                    self.shared.instance.clone(),
                    ttl_ms.clone(),
                    state.as_str().to_owned(),
                ]
            })
            .collect()
    }

    /// The heartbeats' replies (`beat_commands`, sent at `sent`): everyone's as read, kept for
    /// `Fleet::instances`. A script the server does not hold yet (`NOSCRIPT`: a restart, a
    /// `SCRIPT FLUSH`) is loaded by running one beat on its own; the others beat again at the
    /// next pass. Another error leaves that breaker's last view as it was: the records' replies
    /// say whether the store fails.
    pub(super) async fn took_beats(
        &mut self,
        names: &[String],
        replies: Vec<redis::RedisResult<redis::Value>>,
        sent: Instant,
    ) {
        let mut seen = BTreeMap::new();
        let mut load = None;
        for (name, reply) in names.iter().zip(replies) {
            match reply {
                Ok(value) => {
                    if let Ok(reply) = redis::from_redis_value::<Vec<String>>(value) {
                        seen.insert(name.clone(), self.live_of(&reply, sent));
                    }
                }
                Err(e) if e.code() == Some("NOSCRIPT") => {
                    load.get_or_insert_with(|| name.clone());
                }
                Err(_) => {}
            }
        }
        if let Some(name) = load {
            let args = self.beat_commands(core::slice::from_ref(&name))[0][4..].to_vec();
            let keys = vec![self.key_of(&name, "live")];
            if let Answer::Done(reply) =
                self.ask::<Vec<String>>(Script::Heartbeat, keys, args).await
            {
                seen.insert(name, self.live_of(&reply, sent));
            }
        }
        let mut kept = self.shared.live.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|name, _| self.tracked.contains_key(name));
        kept.extend(seen);
    }

    /// `heartbeat.lua`'s reply as the instances it lists, by name.
    fn live_of(&self, reply: &[String], read_at: Instant) -> Vec<LiveInstance> {
        let Some((now, rest)) = reply.split_first() else {
            return Vec::new();
        };
        let now: u64 = now.parse().unwrap_or(0);
        let mut live: Vec<LiveInstance> = rest
            .chunks_exact(3)
            .map(|f| {
                let expires: u64 = f[1].parse().unwrap_or(0);
                LiveInstance {
                    this: f[0] == self.shared.instance,
                    instance: f[0].clone(),
                    state: parse_state(&f[2]),
                    expires_in: Duration::from_millis(expires.saturating_sub(now)),
                    read_at,
                }
            })
            .collect();
        live.sort_by(|a, b| a.instance.cmp(&b.instance));
        live
    }
}
