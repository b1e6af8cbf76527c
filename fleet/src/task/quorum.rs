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
use crate::keys::{open_set_key, split_key};
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
        // A fresh look at the live set, this instance's own beat with it.
        match self.beat_once().await {
            Answer::Done(()) => {}
            Answer::Unreadable(why) => {
                self.troubled(name, &why);
                return Pushed::Kept;
            }
            Answer::Failed => return Pushed::Failed,
        }
        let mut keys = vec![
            self.key(name),
            self.key_of(name, "probes"),
            self.key_of(name, "opens"),
        ];
        // A family key's record, once opened, expires and is listed open (keys.rs).
        let key = split_key(name).map(|(family, key)| {
            keys.push(open_set_key(&self.shared.config.prefix, family));
            let ttl = self.key_ttl(name, "open", open_ms);
            (ttl.as_millis().to_string(), key.to_owned())
        });
        let mut expected = expected.to_owned();
        for _ in 0..2 {
            let mut args = [
                &expected,
                open_ms,
                reopens,
                reason,
                last_failure,
                instance,
                channel,
                name,
                &quorum.arg(),
                &self.beat.len().to_string(),
            ]
            .map(|a| (*a).to_owned())
            .to_vec();
            for (instance, expiry) in &self.beat {
                args.push(instance.clone());
                args.push(expiry.clone());
            }
            if let Some((ttl, key)) = &key {
                args.push(ttl.clone());
                args.push(key.clone());
            }
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

    /// This instance's heartbeat: `heartbeat.lua` as a plain `EVALSHA` command, for the
    /// re-read's pipeline, with the breakers it holds other than closed.
    pub(super) fn beat_command(&self) -> Vec<String> {
        let mut command = vec![
            "EVALSHA".to_owned(),
            Script::Heartbeat.sha().to_owned(),
            "1".to_owned(),
        ];
        command.extend(self.beat_keys_args().0);
        command.extend(self.beat_keys_args().1);
        command
    }

    /// `heartbeat.lua`'s keys and arguments: the live set, this instance, a beat's life, and
    /// `<len>:<breaker><len>:<state>` for each breaker it holds other than closed.
    fn beat_keys_args(&self) -> (Vec<String>, Vec<String>) {
        let mut states = String::new();
        for (name, t) in &self.tracked {
            let state = t.breaker.upgrade().map_or(State::Closed, |b| b.state());
            if state != State::Closed {
                let state = state.as_str();
                states.push_str(&format!("{}:{name}{}:{state}", name.len(), state.len()));
            }
        }
        let ttl_ms = self.live_ttl().as_millis().max(1).to_string();
        (
            vec![self.live_key()],
            vec![self.shared.instance.clone(), ttl_ms, states],
        )
    }

    /// The heartbeat's reply from a pass's pipeline (sent at `sent`): everyone's as read,
    /// kept for `Fleet::instances` and the quorum. A script the server does not hold yet
    /// (`NOSCRIPT`: a restart, a `SCRIPT FLUSH`) is loaded by beating again on its own.
    /// Another error leaves the last view as it was: the records' replies say whether the
    /// store fails.
    pub(super) async fn took_beat(
        &mut self,
        reply: redis::RedisResult<redis::Value>,
        sent: Instant,
    ) {
        match reply {
            Ok(value) => {
                if let Ok(reply) = redis::from_redis_value::<Vec<String>>(value) {
                    self.keep_beat(&reply, sent);
                }
            }
            Err(e) if e.code() == Some("NOSCRIPT") => {
                let _ = self.beat_once().await;
            }
            Err(_) => {}
        }
    }

    /// Beats on its own (`ask`: loading the script if the server lacks it); `false` if the
    /// store failed.
    pub(super) async fn beat_now(&mut self) -> bool {
        !matches!(self.beat_once().await, Answer::Failed)
    }

    async fn beat_once(&mut self) -> Answer<()> {
        let sent = Instant::now();
        let (keys, args) = self.beat_keys_args();
        match self.ask::<Vec<String>>(Script::Heartbeat, keys, args).await {
            Answer::Done(reply) => {
                self.keep_beat(&reply, sent);
                Answer::Done(())
            }
            Answer::Unreadable(why) => Answer::Unreadable(why),
            Answer::Failed => Answer::Failed,
        }
    }

    /// `heartbeat.lua`'s reply kept: the live set for the quorum, and each shared breaker's
    /// view, every live instance with its state of it (closed unless it listed another).
    fn keep_beat(&mut self, reply: &[String], read_at: Instant) {
        let Some((now, rest)) = reply.split_first() else {
            return;
        };
        let now: u64 = now.parse().unwrap_or(0);
        self.beat = rest
            .chunks_exact(3)
            .map(|f| (f[0].clone(), f[1].clone()))
            .collect();
        let listed: Vec<(String, u64, BTreeMap<String, State>)> = rest
            .chunks_exact(3)
            .map(|f| {
                let expires: u64 = f[1].parse().unwrap_or(0);
                (f[0].clone(), expires, parse_states(&f[2]))
            })
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
