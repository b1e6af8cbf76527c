//! One instance of a fleet, driven line by line on stdin: what the fleet tests start 3 to 5
//! times as real processes, and what `docs/fleet.md`'s demo runs.
//!
//! ```text
//! fleet_node <config.toml>
//! ```
//!
//! The file has a `[breakers.payments]` table and a `[fleet]` table (see `docs/fleet.md`);
//! its `url` is Redis's, or PostgreSQL's (`postgres://…`) in a build with the feature
//! `postgres`.
//! Commands (one per line; each answers one line):
//!
//! - `fail`, `succeed` — one call through `payments`; answers `ok <state>` or `rejected <state>`
//! - `hold` — asks for a permit and keeps it (a call in flight); answers `ok <state>` or
//!   `rejected <state>`
//! - `release` — records a success for every held permit; `ok <state>`
//! - `state` — `state <state>`
//! - `force_open`, `disable`, `reset`, `trip <ms>` — manual control; `ok`
//! - `traffic on|off` — a thread making an ignored call every 200 µs, timing each
//! - `traffic fast` — a thread making successful calls at about 1 M a second (1 000 each
//!   millisecond), untimed: the load at which the fleet's per-instance commands are measured
//! - `lat` — `lat <p50 ns> <p99 ns> <max ns> <calls>` of that traffic since the last `lat`
//! - `resync` — `resync true|false`: re-read every record now
//! - `status` — `status <connected> <pushed> <applied> <store errors> <resyncs>`
//! - `instances` — the fleet view of `payments` as last read: `instances <trip> <tally>
//!   <instance>=<state> …`, the live instances by name, `<trip>` `any` or `quorum`, `<tally>`
//!   `<open>/<needed>/<live>` of this instance's last report under a quorum, or `-`
//! - `quit`
//!
//! And for the keyed family `hosts` (keys are strings; a trip at the first failure, open a
//! minute, unless the file's `[breakers.hosts]` says otherwise):
//!
//! - `kfail <key>`, `ksucceed <key>` — one call of that key (a failure is `HTTP 503`);
//!   `ok <state>` or `rejected <state>`
//! - `kstate <key>` — `state <state>`, or `state none` if the family does not hold the key
//! - `klast <key>` — `last <last failure>` (`last -` for none)
//! - `kexplain <key>` — `explain <the key's explanation, on one line>`
//! - `kreset <key>`, `kforce <key>`, `kdisable <key>`, `ktrip <key> <ms>` — the registry's
//!   per-key controls, as the admin's use them; `ok`, or `error <why>`
//! - `kmany <n> fail|succeed|reset` — the same for the keys `k0` to `k<n-1>`; `ok <open keys>`
//!
//! Every state change of `payments` is also printed as it happens, from whichever thread made
//! it: `event <from> <to> <wall-clock ns> <reason>`; and every one of a `hosts` key as
//! `keyevent <key> <from> <to> <reason>|<failure>`.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use breakerbox_fleet::{Fleet, FleetConfig, FleetTrip};
use breakerbox_runtime::{Breaker, BreakerMap, Config, Outcome, registry};

fn say(line: &str) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: fleet_node <config.toml>");
    run(&path);
}

/// The node: reads its config from `path`, then commands from stdin until `quit` or its end.
pub fn run(path: &str) {
    let text = std::fs::read_to_string(path).expect("read the config");
    if let Err(e) = registry().load_toml_str(path, &text) {
        eprintln!("{e}");
        std::process::exit(2);
    }
    let config = match FleetConfig::from_toml_str(path, &text) {
        Ok(Some(config)) => config,
        Ok(None) => {
            eprintln!("{path}: no [fleet] table");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    // The fleet's task runs on a thread of its own that drives the runtime until the process
    // exits, while this thread reads stdin (a `block_on` here, for `resync`, waits alongside).
    let runtime = std::sync::Arc::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime"),
    );
    let driver = runtime.clone();
    std::thread::spawn(move || driver.block_on(std::future::pending::<()>()));
    let breaker = registry().get_or_create("payments", Config::default);
    breaker.on_state_change(|e| {
        let wall = e.wall.duration_since(UNIX_EPOCH).unwrap_or_default();
        say(&format!(
            "event {} {} {} {}",
            e.from,
            e.to,
            wall.as_nanos(),
            e.reason
        ));
    });
    let hosts = registry()
        .family::<String>("hosts", || {
            Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(60))
                .build()
                .expect("a valid config")
        })
        .expect("the family `hosts`");
    registry().on_state_change(|e| {
        if let (true, Some(key)) = (e.name == "hosts", &e.key) {
            let failure = e.failure.as_deref().unwrap_or("");
            say(&format!(
                "keyevent {key} {} {} {}|{failure}",
                e.from, e.to, e.reason
            ));
        }
    });
    let fleet = {
        let _guard = runtime.enter();
        Fleet::start(config).expect("start the fleet")
    };
    let traffic = Traffic::default();
    let mut held = Vec::new();
    say(&format!("ready {}", fleet.instance()));
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let mut words = line.split_whitespace();
        let answer = match (words.next(), words.next()) {
            (Some("fail"), _) => call(&breaker, Err("refused")),
            (Some("succeed"), _) => call(&breaker, Ok(())),
            (Some("hold"), _) => match breaker.try_acquire_owned() {
                Ok(permit) => {
                    held.push(permit);
                    format!("ok {}", breaker.state())
                }
                Err(_) => format!("rejected {}", breaker.state()),
            },
            (Some("release"), _) => {
                for permit in held.drain(..) {
                    permit.record(Outcome::Success);
                }
                format!("ok {}", breaker.state())
            }
            (Some("state"), _) => format!("state {}", breaker.state()),
            (Some("force_open"), _) => ok(|| breaker.force_open()),
            (Some("disable"), _) => ok(|| breaker.disable()),
            (Some("reset"), _) => ok(|| breaker.reset()),
            (Some("trip"), Some(ms)) => match ms.parse() {
                Ok(ms) => ok(|| breaker.trip_for(Duration::from_millis(ms))),
                Err(_) => "error: trip <ms>".to_owned(),
            },
            (Some("traffic"), Some("fast")) => {
                traffic.fast(&breaker);
                "ok".to_owned()
            }
            (Some("traffic"), Some(on)) => {
                traffic.set(&breaker, on == "on");
                "ok".to_owned()
            }
            (Some("lat"), _) => traffic.report(),
            (Some("resync"), _) => format!("resync {}", runtime.block_on(fleet.resync())),
            (Some("status"), _) => {
                let s = fleet.status();
                format!(
                    "status {} {} {} {} {}",
                    s.connected, s.pushed, s.applied, s.store_errors, s.resyncs
                )
            }
            (Some("instances"), _) => instances(&fleet),
            (Some(command), Some(key)) if command.starts_with('k') => {
                keyed(&hosts, command, key, words.next())
            }
            (Some("quit"), _) => break,
            _ => format!("error: unknown command {line:?}"),
        };
        say(&answer);
    }
    traffic.set(&breaker, false);
    drop(fleet);
}

fn instances(fleet: &Fleet) -> String {
    let view = fleet.instances();
    let Some(payments) = view.iter().find(|b| b.name == "payments") else {
        return "instances - - ".to_owned();
    };
    let trip = match payments.trip {
        FleetTrip::Any => "any",
        _ => "quorum",
    };
    let tally = payments
        .last_tally
        .map_or_else(|| "-".to_owned(), |(o, n, l)| format!("{o}/{n}/{l}"));
    let live: Vec<String> = payments
        .instances
        .iter()
        .map(|i| {
            let state = i.state.map_or("?", |s| s.as_str());
            format!("{}={state}", i.instance)
        })
        .collect();
    format!("instances {trip} {tally} {}", live.join(" "))
}

/// A command about keys of the family `hosts`.
fn keyed(hosts: &BreakerMap<String>, command: &str, key: &str, more: Option<&str>) -> String {
    let state = |key: &str| hosts.get(key).map_or("none", |b| b.state().as_str());
    let call = |key: &str, result: Result<(), &'static str>| match hosts.call(key, || result) {
        Err(breakerbox_runtime::Error::Rejected(_)) => format!("rejected {}", state(key)),
        _ => format!("ok {}", state(key)),
    };
    let control = |done: Result<Breaker, breakerbox_runtime::KeyError>| match done {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("error {e}"),
    };
    match (command, more) {
        ("kfail", _) => call(key, Err("HTTP 503")),
        ("ksucceed", _) => call(key, Ok(())),
        ("kstate", _) => format!("state {}", state(key)),
        ("klast", _) => {
            let last = hosts.get(key).and_then(|b| b.last_failure());
            format!("last {}", last.as_deref().unwrap_or("-"))
        }
        ("kexplain", _) => match hosts.get(key) {
            Some(b) => format!("explain {}", b.explain().to_string().replace('\n', " ")),
            None => "explain -".to_owned(),
        },
        ("kreset", _) => control(registry().reset_key("hosts", key)),
        ("kforce", _) => control(registry().force_open_key("hosts", key)),
        ("kdisable", _) => control(registry().disable_key("hosts", key)),
        ("ktrip", Some(ms)) => match ms.parse() {
            Ok(ms) => control(registry().trip_key_for("hosts", key, Duration::from_millis(ms))),
            Err(_) => "error: ktrip <key> <ms>".to_owned(),
        },
        ("kmany", Some(what)) => {
            let Ok(n) = key.parse::<usize>() else {
                return "error: kmany <n> fail|succeed|reset".to_owned();
            };
            for i in 0..n {
                let key = format!("k{i}");
                let _ = match what {
                    "fail" => hosts
                        .call(key.as_str(), || Err::<(), _>("HTTP 503"))
                        .is_ok(),
                    "succeed" => hosts.call(key.as_str(), || Ok::<(), &str>(())).is_ok(),
                    _ => registry().reset_key("hosts", &key).is_ok(),
                };
            }
            let open = (0..n).filter(|i| state(&format!("k{i}")) == "open").count();
            format!("ok {open}")
        }
        _ => format!("error: unknown command {command:?}"),
    }
}

fn call(breaker: &Breaker, result: Result<(), &'static str>) -> String {
    match breaker.call(|| result) {
        Err(breakerbox_runtime::Error::Rejected(_)) => format!("rejected {}", breaker.state()),
        _ => format!("ok {}", breaker.state()),
    }
}

fn ok(f: impl FnOnce()) -> String {
    f();
    "ok".to_owned()
}

/// Background calls, each timed: what a call costs while the store is failing.
#[derive(Default)]
struct Traffic {
    running: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<u64>>>,
    /// Calls made by `traffic fast` (untimed).
    fast: Arc<std::sync::atomic::AtomicU64>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Traffic {
    fn set(&self, breaker: &Breaker, on: bool) {
        let mut thread = self.thread.lock().unwrap();
        if on && thread.is_none() {
            self.running.store(true, Ordering::SeqCst);
            let (running, samples, breaker) =
                (self.running.clone(), self.samples.clone(), breaker.clone());
            *thread = Some(std::thread::spawn(move || {
                let mut batch = Vec::with_capacity(256);
                while running.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    // Ignored: the traffic neither trips the breaker nor resets a streak.
                    let _ = breaker.call_with(|| (), |_| Outcome::Ignored);
                    batch.push(start.elapsed().as_nanos() as u64);
                    if batch.len() == 32 {
                        samples.lock().unwrap().append(&mut batch);
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                samples.lock().unwrap().append(&mut batch);
            }));
        } else if !on {
            self.running.store(false, Ordering::SeqCst);
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }

    /// Successful calls at about 1 M a second until `traffic off`: 1 000 calls, then a wait for
    /// the next millisecond.
    fn fast(&self, breaker: &Breaker) {
        let mut thread = self.thread.lock().unwrap();
        if thread.is_some() {
            return;
        }
        self.running.store(true, Ordering::SeqCst);
        let (running, fast, breaker) = (self.running.clone(), self.fast.clone(), breaker.clone());
        *thread = Some(std::thread::spawn(move || {
            let start = Instant::now();
            let mut ms = 0u64;
            while running.load(Ordering::Relaxed) {
                for _ in 0..1_000 {
                    let _ = breaker.call(|| Ok::<(), &str>(()));
                }
                fast.fetch_add(1_000, Ordering::Relaxed);
                ms += 1;
                let next = start + Duration::from_millis(ms);
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
        }));
    }

    fn report(&self) -> String {
        let mut samples = std::mem::take(&mut *self.samples.lock().unwrap());
        let fast = self.fast.swap(0, Ordering::Relaxed);
        if samples.is_empty() {
            return format!("lat 0 0 0 {fast}");
        }
        samples.sort_unstable();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
        format!(
            "lat {} {} {} {}",
            at(0.5),
            at(0.99),
            samples[samples.len() - 1],
            samples.len() as u64 + fast
        )
    }
}
