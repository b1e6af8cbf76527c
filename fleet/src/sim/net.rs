//! The simulated network between the instances and the model store, and its faults.
//!
//! Each instance's fleet task gets a `SimStore`, the `Wire` whose production one is a Redis
//! connection. A request travels to the model (a delay), runs there atomically at the
//! model's time of arrival, and its reply travels back (another delay) or is lost. Published
//! messages go to every subscribed connection, each copy with its own delay (so they reorder),
//! and may be lost or duplicated. Faults are switched on and off by the world (`world.rs`):
//! a connection cut (a disconnection push, every command failing with an I/O error until it is
//! restored, its subscription restored with it, as the connection manager does), commands
//! refused (an ACL: `NOPERM`, published messages still delivered), the server stopped
//! (`SIGSTOP`: nothing is answered until it continues).

use core::time::Duration;
use std::sync::{Arc, Mutex};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use redis::{ErrorKind, PushInfo, PushKind, RedisError, RedisResult, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::model::{Model, error};
use crate::store::{Reply, Script, Wire};

/// The server's time at the simulation's start, in ms since the Unix epoch.
const BASE_MS: u64 = 1_800_000_000_000;

/// How the network misbehaves at the moment.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Weather {
    /// Each way's delay is uniform in 0..=this (ms).
    pub(super) delay_ms: u64,
    /// The chance that a reply is lost (the request did run).
    pub(super) lose_reply: f64,
    /// The chance that a published message is lost, or delivered twice, on one connection.
    pub(super) lose_message: f64,
    pub(super) repeat_message: f64,
}

impl Weather {
    /// Bad weather: a delay each way of up to one of `delays` (ms), and the chances of a lost
    /// reply and of a lost or repeated message, each drawn from `rng` in that order.
    pub(super) fn draw(rng: &mut ChaCha8Rng, delays: &[u64]) -> Weather {
        Weather {
            delay_ms: delays[rng.random_range(0..delays.len())],
            lose_reply: [0.0, 0.05, 0.3][rng.random_range(0..3)],
            lose_message: [0.0, 0.1, 0.5][rng.random_range(0..3)],
            repeat_message: [0.0, 0.1][rng.random_range(0..2)],
        }
    }
}

/// One instance's connection.
pub(super) struct Conn {
    pushes: mpsc::UnboundedSender<PushInfo>,
    /// The channels it subscribed to, kept across a cut (resubscribed when restored).
    channels: Vec<Vec<u8>>,
    pub(super) cut: bool,
    pub(super) refused: bool,
    /// The instance is gone: nothing reaches it any more.
    pub(super) dead: bool,
}

/// Everything the instances share: the model, the connections, the weather, the dice.
pub(super) struct Net {
    pub(super) model: Model,
    pub(super) conns: Vec<Conn>,
    pub(super) stopped: bool,
    pub(super) weather: Weather,
    pub(super) rng: ChaCha8Rng,
    start: Instant,
    pub(super) trace: Vec<String>,
    pub(super) tracing: bool,
    /// Under a quorum: the watch on the record's openings (`Oracle`).
    pub(super) oracle: Option<Oracle>,
    /// The scripts (by name) and plain commands run, for a test to count.
    pub(super) counted: std::collections::BTreeMap<String, u64>,
}

/// The record as a script found or left it: its epoch and state (`None`: no key), or `Err`
/// for a value of another type under its key.
type Found = Result<Option<(Option<String>, Option<String>)>, ()>;

/// **quorum**: under a quorum, a record goes from closed (or none) to open only by the fleet's
/// counts (`count.lua`), by a report that completes a quorum of open reports of live instances
/// (`quorum.lua`), by a write of a record that had vanished while open (`record.lua` over no
/// key), or by a trip by hand (`trip_for`, written as manual control is). The oracle keeps its own account of the heartbeats and open reports the store took
/// (from the scripts' arguments as they run), and checks each opening against it.
pub(super) struct Oracle {
    quorum: crate::Quorum,
    /// Instance -> the end of its last heartbeat, server ms.
    live: std::collections::BTreeMap<String, u64>,
    /// `(record key, epoch, instance)` -> the end of its open report, server ms.
    reports: std::collections::BTreeMap<(String, String, String), u64>,
    /// Each record's state after the last script that found it.
    last: std::collections::BTreeMap<String, String>,
    /// The host each instance runs on, by its name: the quorum is of hosts, and a process
    /// started again on its host is that host still.
    pub(super) hosts: std::collections::BTreeMap<String, String>,
    pub(super) violations: Vec<String>,
}

impl Oracle {
    pub(super) fn new(quorum: crate::Quorum) -> Oracle {
        Oracle {
            quorum,
            live: Default::default(),
            reports: Default::default(),
            last: Default::default(),
            hosts: Default::default(),
            violations: Vec::new(),
        }
    }

    /// Everything was flushed: the reports with it (the records' last states stay, and the
    /// beats seen, against which a live set read before the flush is checked).
    pub(super) fn flushed(&mut self) {
        self.reports.clear();
    }

    fn saw(
        &mut self,
        script: Script,
        keys: &[String],
        args: &[String],
        (pre, post): (Found, Found),
        now: u64,
        ran: bool,
    ) {
        let num = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok()).unwrap_or(0);
        let record = match script {
            Script::Heartbeat => {
                if ran {
                    self.live.insert(args[0].clone(), now + num(1));
                }
                return;
            }
            _ => keys[0].clone(),
        };
        let (Ok(pre), Ok(post), true) = (pre, post, ran) else {
            return; // a foreign value under the key, or a script that failed: nothing taken
        };
        let (pre_epoch, pre_state) = match &pre {
            None => ("0".to_owned(), "closed".to_owned()),
            Some((e, s)) => (
                e.clone().unwrap_or_else(|| "0".to_owned()),
                s.clone().unwrap_or_else(|| "closed".to_owned()),
            ),
        };
        // Under a quorum the caller hands the script the live set its heartbeat read: each
        // instance in it must have beaten until at least the expiry it is given there.
        let mut claimed = std::collections::BTreeMap::new();
        if script == Script::Quorum {
            claimed.insert(args[5].clone(), u64::MAX);
            for i in 0..num(9) as usize {
                let (Some(inst), Some(until)) = (args.get(10 + 2 * i), args.get(11 + 2 * i)) else {
                    break;
                };
                let until: u64 = until.parse().unwrap_or(0);
                let beat = self.live.get(inst).copied().unwrap_or(0);
                if until > beat {
                    self.violations.push(format!(
                        "quorum: {record} reported with {inst} live until {until}, its last beat until {beat}"
                    ));
                }
                if until > now {
                    claimed.entry(inst.clone()).or_insert(until);
                }
            }
        }
        if script == Script::Quorum && pre_epoch == args[0] && pre_state == "closed" {
            self.reports.insert(
                (record.clone(), pre_epoch.clone(), args[5].clone()),
                now + num(1),
            );
        }
        let post_state = post.as_ref().and_then(|(_, s)| s.clone());
        if pre_state == "closed" && post_state.as_deref() == Some("open") {
            // Hosts, not processes: a live instance's host is live, and a host is open when a
            // live instance on it reported open under this record. Live: in the set the caller
            // read from the heartbeats (checked above against the beats), and the caller.
            let host = |inst: &String| self.hosts.get(inst).unwrap_or(inst).clone();
            let live_hosts: std::collections::BTreeSet<String> = claimed.keys().map(host).collect();
            let open_hosts: std::collections::BTreeSet<String> = self
                .reports
                .iter()
                .filter(|((rk, epoch, inst), until)| {
                    *rk == record
                        && *epoch == pre_epoch
                        && **until > now
                        && claimed.contains_key(inst)
                })
                .map(|((_, _, inst), _)| host(inst))
                .collect();
            let live = live_hosts.len() as u32;
            let open = open_hosts.len() as u32;
            let needed = self.quorum.needed(live);
            let ok = match script {
                Script::Count => true,
                Script::Quorum => open >= needed,
                // A trip by hand (`trip_for`) reaches the fleet as manual control does, quorum
                // or not; else a write opens only a record that vanished while not closed.
                Script::Record => {
                    args.get(5).is_some_and(|r| r.starts_with("tripped for "))
                        || (pre.is_none()
                            && self.last.get(&record).is_some_and(|s| {
                                matches!(s.as_str(), "open" | "forced_open" | "disabled")
                            }))
                }
                Script::Probe | Script::Heartbeat => false,
            };
            if !ok {
                self.violations.push(format!(
                    "quorum: {script:?} opened {record} over a closed record (epoch {pre_epoch}) at {now} with {open} hosts open of {live} live hosts, {needed} needed (quorum {}); live until: {:?}",
                    self.quorum,
                    claimed
                ));
            }
        }
        if let Some(s) = post_state {
            self.last.insert(record, s);
        }
    }
}

pub(super) type NetRef = Arc<Mutex<Net>>;

impl Net {
    pub(super) fn new(rng: ChaCha8Rng, tracing: bool) -> Net {
        Net {
            model: Model::new(),
            conns: Vec::new(),
            stopped: false,
            weather: Weather::default(),
            rng,
            start: Instant::now(),
            trace: Vec::new(),
            tracing,
            oracle: None,
            counted: Default::default(),
        }
    }

    /// The simulation's time since its start.
    pub(super) fn elapsed(&self) -> Duration {
        Instant::now() - self.start
    }

    /// The server's time: ms since the Unix epoch, and the µs within that ms.
    pub(super) fn server_time(&self) -> (u64, u64) {
        let us = self.elapsed().as_micros() as u64;
        (BASE_MS + us / 1000, us % 1000)
    }

    pub(super) fn note(&mut self, what: impl FnOnce() -> String) {
        if self.tracing {
            let at = self.elapsed();
            self.trace
                .push(format!("{:>9.3}s {}", at.as_secs_f64(), what()));
        }
    }

    fn delay(&mut self) -> Duration {
        let max = self.weather.delay_ms;
        Duration::from_millis(if max == 0 {
            0
        } else {
            self.rng.random_range(0..=max)
        })
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random_bool(p.min(1.0))
    }

    /// A new connection; its pushes arrive on the receiver.
    pub(super) fn connect(&mut self) -> (usize, mpsc::UnboundedReceiver<PushInfo>) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.conns.push(Conn {
            pushes: tx,
            channels: Vec::new(),
            cut: false,
            refused: false,
            dead: false,
        });
        (self.conns.len() - 1, rx)
    }

    /// Cuts connection `id`: it is told so, and every command fails until it is restored.
    pub(super) fn cut(&mut self, id: usize) {
        let c = &mut self.conns[id];
        if !c.cut && !c.dead {
            c.cut = true;
            let _ = c.pushes.send(PushInfo {
                kind: PushKind::Disconnection,
                data: Vec::new(),
            });
        }
    }

    /// Why connection `id` cannot run a command now, if it cannot.
    fn refusal(&self, id: usize) -> Option<RedisResult<Value>> {
        let c = &self.conns[id];
        if c.cut || c.dead {
            Some(Err(RedisError::from((
                ErrorKind::Io,
                "simulated: connection cut",
            ))))
        } else if c.refused {
            Some(error(
                "NOPERM User fleet has no permissions to run the 'evalsha' command",
            ))
        } else {
            None
        }
    }

    /// Runs `script` on the model now and sends what it published on its way.
    fn run(
        &mut self,
        id: usize,
        script: Script,
        keys: &[String],
        args: &[String],
    ) -> RedisResult<Value> {
        let (ms, us) = self.server_time();
        *self.counted.entry(format!("{script:?}")).or_default() += 1;
        let watch = self.oracle.is_some() && script != Script::Probe;
        let pre = if watch {
            self.found(&keys[0], ms)
        } else {
            Ok(None)
        };
        let (reply, published) = self.model.eval(script, keys, args, ms, us);
        if watch {
            let post = self.found(&keys[0], ms);
            if let Some(oracle) = self.oracle.as_mut() {
                oracle.saw(script, keys, args, (pre, post), ms, reply.is_ok());
            }
            let bad = self.oracle.as_ref().map_or(0, |o| o.violations.len());
            if bad > 0 {
                self.note(|| "VIOLATION quorum (see the report)".to_owned());
            }
        }
        self.note(|| format!("conn {id}: {script:?} {args:?} -> {reply:?}"));
        for (channel, payload) in published {
            self.publish(&channel, &payload);
        }
        reply
    }

    /// The record under `key` as the oracle reads it at `now_ms` (server ms): `None` if there
    /// is no hash there. A key whose expiry has passed is none, as the scripts see it: the
    /// model removes it only when a script next touches it, and read as it was, an expired
    /// open record would hide the reports made over the vanished record after it (a report
    /// over no record is counted by `quorum.lua` under no record, epoch 0, as here).
    fn found(&self, key: &str, now_ms: u64) -> Found {
        let space = self.model.space.lock().unwrap();
        match space.keys.get(key.as_bytes()) {
            Some((_, Some(expiry))) if *expiry <= now_ms => Ok(None),
            Some((super::model::Val::Hash(h), _)) => {
                let field = |f: &str| {
                    h.get(f.as_bytes())
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                };
                Ok(Some((field("epoch"), field("state"))))
            }
            Some(_) => Err(()),
            None => Ok(None),
        }
    }

    /// Delivers `payload` to every connection subscribed to `channel`, each copy delayed on
    /// its own, maybe lost, maybe twice.
    pub(super) fn publish(&mut self, channel: &[u8], payload: &[u8]) {
        for id in 0..self.conns.len() {
            let c = &self.conns[id];
            if c.cut || c.dead || !c.channels.iter().any(|ch| ch == channel) {
                continue;
            }
            if self.chance(self.weather.lose_message) {
                self.note(|| format!("conn {id}: a message lost"));
                continue;
            }
            let copies = if self.chance(self.weather.repeat_message) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let after = self.delay();
                let push = PushInfo {
                    kind: PushKind::Message,
                    data: vec![
                        Value::BulkString(channel.to_vec()),
                        Value::BulkString(payload.to_vec()),
                    ],
                };
                let tx = self.conns[id].pushes.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let _ = tx.send(push);
                });
            }
        }
    }

    /// Every fault ends: calm weather, the server running, every connection restored and its
    /// commands allowed.
    pub(super) fn heal(&mut self) {
        self.weather = Weather::default();
        self.stopped = false;
        for c in 0..self.conns.len() {
            self.conns[c].refused = false;
            self.restore(c);
        }
    }

    /// Restores connection `id` after a cut, with its subscriptions.
    pub(super) fn restore(&mut self, id: usize) {
        self.conns[id].cut = false;
    }
}

/// One instance's store: requests over the simulated network to the model.
pub(super) struct SimStore {
    pub(super) id: usize,
    pub(super) net: NetRef,
}

impl SimStore {
    /// Waits out a stopped server, then runs `op` on the network at arrival, then the reply's
    /// way back (or for ever, if it is lost).
    fn exchange<T: Send + 'static>(
        &mut self,
        op: impl FnOnce(&mut Net, usize) -> RedisResult<T> + Send + 'static,
    ) -> Reply<'_, T> {
        let net = self.net.clone();
        let id = self.id;
        Box::pin(async move {
            let (there, back, lost) = {
                let mut n = net.lock().unwrap();
                if let Some(Err(e)) = n.refusal(id) {
                    // Refused or cut at once: the client knows without a round trip.
                    return Err(e);
                }
                let lose = n.weather.lose_reply;
                (n.delay(), n.delay(), n.chance(lose))
            };
            tokio::time::sleep(there).await;
            while net.lock().unwrap().stopped {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let reply = {
                let mut n = net.lock().unwrap();
                match n.refusal(id) {
                    Some(Err(e)) => return Err(e),
                    Some(Ok(_)) => unreachable!("a refusal is an error"),
                    None => op(&mut n, id),
                }
            };
            if lost {
                net.lock()
                    .unwrap()
                    .note(|| format!("conn {id}: a reply lost"));
                core::future::pending::<()>().await;
            }
            tokio::time::sleep(back).await;
            if net.lock().unwrap().conns[id].cut {
                return Err(RedisError::from((
                    ErrorKind::Io,
                    "simulated: connection cut",
                )));
            }
            reply
        })
    }
}

impl Wire for SimStore {
    fn eval(&mut self, script: Script, keys: Vec<String>, args: Vec<String>) -> Reply<'_, Value> {
        self.exchange(move |n, id| n.run(id, script, &keys, &args))
    }

    fn pipeline(&mut self, commands: Vec<Vec<String>>) -> Reply<'_, Vec<RedisResult<Value>>> {
        // One round trip; the commands run one after another at its arrival, an `EVALSHA` of
        // one of the fleet's scripts as `eval` runs it.
        self.exchange(move |n, id| {
            n.note(|| format!("conn {id}: pipeline of {} commands", commands.len()));
            let mut replies = Vec::with_capacity(commands.len());
            for command in &commands {
                let script = (command[0] == "EVALSHA")
                    .then(|| Script::ALL.into_iter().find(|s| s.sha() == command[1]))
                    .flatten();
                if let Some(script) = script {
                    let keys: usize = command[2].parse().unwrap_or(0);
                    let (keys, args) = command[3..].split_at(keys);
                    replies.push(n.run(id, script, keys, args));
                } else {
                    *n.counted.entry(command[0].clone()).or_default() += 1;
                    let (ms, us) = n.server_time();
                    replies.extend(n.model.command(core::slice::from_ref(command), ms, us));
                }
            }
            Ok(replies)
        })
    }

    fn ping(&mut self) -> Reply<'_, ()> {
        self.exchange(|n, id| {
            n.note(|| format!("conn {id}: PING"));
            Ok(())
        })
    }

    fn subscribe(&mut self, channel: String) -> Reply<'_, ()> {
        self.exchange(move |n, id| {
            n.note(|| format!("conn {id}: SUBSCRIBE {channel}"));
            let ch = channel.into_bytes();
            let c = &mut n.conns[id];
            if !c.channels.contains(&ch) {
                c.channels.push(ch);
            }
            Ok(())
        })
    }
}
