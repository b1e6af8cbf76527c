//! What the fleet tests share: a real `redis-server` on a free loopback port, `fleet_node`
//! processes driven over stdin, a loopback TCP proxy that can stall or cut connections, and
//! polling with a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// Where `redis-server` is: `$BREAKERBOX_REDIS_SERVER`, else on the `PATH`. Without one, a
/// test fails under CI (`CI=true`: `scripts/test` installs it) and is skipped elsewhere, saying so.
pub fn redis_server() -> Option<PathBuf> {
    let found = std::env::var_os("BREAKERBOX_REDIS_SERVER")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|dir| dir.join("redis-server"))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        let message = "the fleet tests need a real redis-server (the Debian package `redis-server`; \
                       scripts/test installs it) on the PATH or in $BREAKERBOX_REDIS_SERVER";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{message}: none found, and CI=true");
        }
        eprintln!("SKIPPED: {message}");
    }
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The server `scripts/test` started (`$BREAKERBOX_TEST_REDIS_URL`), or one of the test's own,
/// with no key under `prefix` (`{prefix:…`). Tests that share it use key prefixes of their own;
/// the keys a run before left there (scripts/test runs this binary once per feature set against
/// the same server) are deleted first.
pub fn shared_redis(prefix: &str) -> Option<Redis> {
    let redis = shared_server()?;
    // A single breaker's keys, and a keyed family's (`{prefix/…`).
    for pattern in [format!("{{{prefix}:*"), format!("{{{prefix}/*")] {
        let keys = redis.cli(&["--scan", "--pattern", &pattern]);
        for key in keys.lines().filter(|k| !k.is_empty()) {
            redis.cli(&["DEL", key]);
        }
        assert_eq!(
            redis.cli(&["--scan", "--pattern", &pattern]),
            "",
            "{pattern} left"
        );
    }
    Some(redis)
}

fn shared_server() -> Option<Redis> {
    if let Ok(url) = std::env::var("BREAKERBOX_TEST_REDIS_URL") {
        let port = url
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                panic!("BREAKERBOX_TEST_REDIS_URL={url}: want redis://127.0.0.1:<port>/")
            });
        return Some(Redis {
            bin: PathBuf::new(),
            port,
            child: None,
            extra: Vec::new(),
        });
    }
    Some(Redis::start(&redis_server()?, &[]))
}

/// A `redis-server` of the test's own, persistence off, killed on drop.
pub struct Redis {
    bin: PathBuf,
    pub port: u16,
    child: Option<Child>,
    extra: Vec<String>,
}

impl Redis {
    pub fn start(bin: &Path, extra: &[&str]) -> Redis {
        let mut redis = Redis {
            bin: bin.to_owned(),
            port: free_port(),
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        redis.spawn();
        redis
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(cmd.spawn().expect("start redis-server"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.cli(&["PING"]) != "PONG" {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `redis-cli` against this server; its output, trimmed.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    pub fn hget(&self, key: &str, field: &str) -> String {
        self.cli(&["HGET", key, field])
    }

    /// SIGKILL, and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (empty: no persistence); returns once it answers.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.signal("-CONT");
        }
        self.kill();
    }
}

/// One state change a node printed.
#[derive(Clone, Debug)]
pub struct Ev {
    #[expect(dead_code, reason = "shown only by `Debug`, in failure messages")]
    pub from: String,
    pub to: String,
    pub wall_ns: u128,
    pub reason: String,
}

/// One state change of a `hosts` key a node printed.
#[derive(Clone, Debug)]
pub struct KeyEv {
    pub key: String,
    pub to: String,
    pub reason: String,
    /// The failure behind an opening ('' for none).
    pub failure: String,
}

/// A `fleet_node` process.
pub struct Node {
    pub name: String,
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<String>,
    pub events: Arc<Mutex<Vec<Ev>>>,
    pub key_events: Arc<Mutex<Vec<KeyEv>>>,
}

/// The node's config: `payments` trips at the first failure and stays open a minute.
pub fn config(dir: &Path, url: &str, prefix: &str, instance: &str) -> PathBuf {
    config_with(
        dir,
        url,
        prefix,
        instance,
        "failures = 1\nopen_for = \"60s\"\n",
    )
}

/// A node's config with `keys` in its `[breakers.payments]` table.
pub fn config_with(dir: &Path, url: &str, prefix: &str, instance: &str, keys: &str) -> PathBuf {
    config_fleet(dir, url, prefix, instance, keys, "")
}

/// A node's config with `keys` in its `[breakers.payments]` table and `fleet_keys` in its
/// `[fleet]` table.
pub fn config_fleet(
    dir: &Path,
    url: &str,
    prefix: &str,
    instance: &str,
    keys: &str,
    fleet_keys: &str,
) -> PathBuf {
    config_sharing(dir, url, prefix, instance, keys, fleet_keys, "\"pay*\"")
}

/// A node's config sharing `share` (a TOML array's items).
pub fn config_sharing(
    dir: &Path,
    url: &str,
    prefix: &str,
    instance: &str,
    keys: &str,
    fleet_keys: &str,
    share: &str,
) -> PathBuf {
    let path = dir.join(format!("{prefix}-{instance}.toml"));
    let text = format!(
        "[breakers.payments]\ndynamic = true\n{keys}\n\
         [fleet]\nurl = \"{url}\"\nprefix = \"{prefix}\"\nshare = [{share}]\ninstance = \"{instance}\"\n{fleet_keys}"
    );
    std::fs::write(&path, text).unwrap();
    path
}

pub fn tempdir() -> PathBuf {
    // One directory per call: the tests of this binary run in parallel, and two of them may
    // write a config of the same prefix and instance name. Nodes read their config when they
    // start and some tests start a node again from it, so a directory lives as long as its
    // process; the first call removes those of processes that have ended.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_ended_processes_dirs);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("breakerbox-fleet-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Removes the `tempdir`s of test processes that are no longer running.
fn remove_ended_processes_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix("breakerbox-fleet-"))
        else {
            continue;
        };
        let Some((pid, n)) = rest.split_once('-') else {
            continue;
        };
        let ours = pid.parse::<u32>().is_ok() && n.parse::<u64>().is_ok();
        if ours && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Node {
    pub fn start(config: &Path, name: &str) -> Node {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fleet_node"))
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start fleet_node");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, replies) = channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let key_events = Arc::new(Mutex::new(Vec::new()));
        let keys_seen = key_events.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("keyevent ") {
                    let mut f = rest.splitn(4, ' ');
                    let key = f.next().unwrap_or_default().to_owned();
                    let _from = f.next();
                    let to = f.next().unwrap_or_default().to_owned();
                    let (reason, failure) = f
                        .next()
                        .unwrap_or_default()
                        .split_once('|')
                        .unwrap_or_default();
                    keys_seen.lock().unwrap().push(KeyEv {
                        key,
                        to,
                        reason: reason.to_owned(),
                        failure: failure.to_owned(),
                    });
                } else if let Some(rest) = line.strip_prefix("event ") {
                    let mut f = rest.splitn(4, ' ');
                    let ev = Ev {
                        from: f.next().unwrap_or_default().to_owned(),
                        to: f.next().unwrap_or_default().to_owned(),
                        wall_ns: f.next().and_then(|n| n.parse().ok()).unwrap_or(0),
                        reason: f.next().unwrap_or_default().to_owned(),
                    };
                    seen.lock().unwrap().push(ev);
                } else if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut node = Node {
            name: name.to_owned(),
            child,
            stdin,
            replies,
            events,
            key_events,
        };
        let ready = node.reply();
        assert!(ready.starts_with("ready "), "{name}: {ready}");
        node
    }

    fn reply(&mut self) -> String {
        match self.replies.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("{}: no answer within 20 s", self.name),
            Err(RecvTimeoutError::Disconnected) => panic!("{}: exited", self.name),
        }
    }

    /// Sends `line` without waiting for the answer; [`answer`](Node::answer) reads it.
    pub fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn answer(&mut self) -> String {
        self.reply()
    }

    pub fn cmd(&mut self, line: &str) -> String {
        self.send(line);
        self.reply()
    }

    pub fn state(&mut self) -> String {
        let s = self.cmd("state");
        s.strip_prefix("state ").unwrap_or(&s).to_owned()
    }

    /// `(connected, pushed, applied, store errors, resyncs)`.
    pub fn status(&mut self) -> (bool, u64, u64, u64, u64) {
        let s = self.cmd("status");
        let f: Vec<&str> = s.split_whitespace().collect();
        assert_eq!(f.len(), 6, "{s}");
        let n = |i: usize| f[i].parse::<u64>().unwrap();
        (f[1] == "true", n(2), n(3), n(4), n(5))
    }

    /// Polls until the node has read the records once (its first resync), failing at
    /// `deadline`.
    pub fn wait_resync(&mut self, deadline: Instant) {
        while self.status().4 == 0 {
            assert!(Instant::now() < deadline, "{}: no resync", self.name);
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The fleet view of `payments` (`fleet_node`'s `instances`): `(trip, tally, [(instance,
    /// state)])`.
    pub fn instances(&mut self) -> (String, String, Vec<(String, String)>) {
        let s = self.cmd("instances");
        let mut f = s.split_whitespace().skip(1);
        let trip = f.next().unwrap_or_default().to_owned();
        let tally = f.next().unwrap_or_default().to_owned();
        let live = f
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        (trip, tally, live)
    }

    /// `(p50, p99, max, calls)` of the background traffic since the last call, in ns.
    pub fn lat(&mut self) -> (u64, u64, u64, u64) {
        let s = self.cmd("lat");
        let f: Vec<u64> = s
            .split_whitespace()
            .skip(1)
            .map(|n| n.parse().unwrap())
            .collect();
        (f[0], f[1], f[2], f[3])
    }

    /// Polls the state until it is `want`; `Err` with the last state seen at `deadline`.
    pub fn wait_state(&mut self, want: &str, deadline: Instant) -> Result<(), String> {
        loop {
            let now = self.state();
            if now == want {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("{} is {now}, not {want}", self.name));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The state of the `hosts` key `key` (`none` if the node does not hold it).
    pub fn key_state(&mut self, key: &str) -> String {
        let s = self.cmd(&format!("kstate {key}"));
        s.strip_prefix("state ").unwrap_or(&s).to_owned()
    }

    /// Polls the `hosts` key `key` until it is `want`; `Err` with the last state seen at
    /// `deadline`.
    pub fn wait_key(&mut self, key: &str, want: &str, deadline: Instant) -> Result<(), String> {
        loop {
            let now = self.key_state(key);
            if now == want {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("{}: key {key} is {now}, not {want}", self.name));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn key_events(&self) -> Vec<KeyEv> {
        self.key_events.lock().unwrap().clone()
    }

    pub fn events(&self) -> Vec<Ev> {
        self.events.lock().unwrap().clone()
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = writeln!(self.stdin, "quit");
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` nodes named `node-0…` on `url` under `prefix`.
pub fn nodes(url: &str, prefix: &str, n: usize) -> Vec<Node> {
    nodes_with(url, prefix, n, "failures = 1\nopen_for = \"60s\"\n")
}

/// `n` nodes whose `payments` has the config keys `keys`.
pub fn nodes_with(url: &str, prefix: &str, n: usize, keys: &str) -> Vec<Node> {
    nodes_with_fleet(url, prefix, n, keys, "")
}

/// `n` nodes whose `payments` has the config keys `keys`, and whose `[fleet]` table has the
/// keys `fleet_keys` too.
pub fn nodes_with_fleet(
    url: &str,
    prefix: &str,
    n: usize,
    keys: &str,
    fleet_keys: &str,
) -> Vec<Node> {
    let dir = tempdir();
    (0..n)
        .map(|i| {
            let name = format!("node-{i}");
            Node::start(
                &config_fleet(&dir, url, prefix, &name, keys, fleet_keys),
                &name,
            )
        })
        .collect()
}

/// `n` nodes whose `[fleet]` table has the keys `fleet_keys` too.
pub fn nodes_fleet(url: &str, prefix: &str, n: usize, fleet_keys: &str) -> Vec<Node> {
    let dir = tempdir();
    let keys = "failures = 1\nopen_for = \"60s\"\n";
    (0..n)
        .map(|i| {
            let name = format!("node-{i}");
            Node::start(
                &config_fleet(&dir, url, prefix, &name, keys, fleet_keys),
                &name,
            )
        })
        .collect()
}

/// `n` nodes sharing `payments` and the keyed family `hosts`, with `fleet_keys` in their
/// `[fleet]` table.
pub fn keyed_nodes(url: &str, prefix: &str, n: usize, fleet_keys: &str) -> Vec<Node> {
    keyed_nodes_with(url, prefix, n, fleet_keys, "")
}

/// The same, with `hosts_keys` in a `[breakers.hosts]` table (over the family's config in
/// `fleet_node`) when not empty.
pub fn keyed_nodes_with(
    url: &str,
    prefix: &str,
    n: usize,
    fleet_keys: &str,
    hosts_keys: &str,
) -> Vec<Node> {
    let dir = tempdir();
    let mut keys = "failures = 1\nopen_for = \"60s\"\n".to_owned();
    if !hosts_keys.is_empty() {
        keys.push_str(&format!("\n[breakers.hosts]\ndynamic = true\n{hosts_keys}"));
    }
    let keys = keys.as_str();
    (0..n)
        .map(|i| {
            let name = format!("node-{i}");
            let config = config_sharing(
                &dir,
                url,
                prefix,
                &name,
                keys,
                fleet_keys,
                "\"pay*\", \"hosts\"",
            );
            Node::start(&config, &name)
        })
        .collect()
}

/// The deadline of a step that should be over at once: 5 s from now.
pub fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// Every node reaches `want` by `deadline`.
pub fn all_reach(nodes: &mut [Node], want: &str, deadline: Instant) -> Result<(), String> {
    for node in nodes.iter_mut() {
        node.wait_state(want, deadline)?;
    }
    Ok(())
}

/// A loopback TCP proxy in front of Redis that can stall (forward nothing, accept and hold new
/// connections: a partition) and cut every connection.
pub struct Proxy {
    pub port: u16,
    stalled: Arc<AtomicBool>,
    /// Bumped to cut every connection open now.
    generation: Arc<AtomicU64>,
    delay_ms: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let proxy = Proxy {
            port,
            stalled: Arc::default(),
            generation: Arc::default(),
            delay_ms: Arc::default(),
            stop: Arc::default(),
        };
        let (stalled, generation, delay, stop) = (
            proxy.stalled.clone(),
            proxy.generation.clone(),
            proxy.delay_ms.clone(),
            proxy.stop.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let born = generation.load(Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let (stalled, generation, delay, stop) = (
                        stalled.clone(),
                        generation.clone(),
                        delay.clone(),
                        stop.clone(),
                    );
                    std::thread::spawn(move || {
                        pump(from, to, born, &stalled, &generation, &delay, &stop)
                    });
                }
            }
        });
        proxy
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stop forwarding: bytes wait, as behind a partition.
    pub fn stall(&self, on: bool) {
        self.stalled.store(on, Ordering::SeqCst);
    }

    /// Cut every connection open now.
    pub fn cut(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    pub fn delay(&self, ms: u64) {
        self.delay_ms.store(ms, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.cut();
    }
}

fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    born: u64,
    stalled: &AtomicBool,
    generation: &AtomicU64,
    delay: &AtomicU64,
    stop: &AtomicBool,
) {
    from.set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if generation.load(Ordering::SeqCst) != born || stop.load(Ordering::SeqCst) {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
        if stalled.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
            Ok(n) => {
                let ms = delay.load(Ordering::SeqCst);
                if ms > 0 {
                    std::thread::sleep(Duration::from_millis(ms));
                }
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

/// The p-th fraction of `values` (sorted here).
pub fn percentile(values: &mut [u128], p: f64) -> u128 {
    values.sort_unstable();
    values[((values.len() - 1) as f64 * p).round() as usize]
}

/// The fault tests and the measurements run alone; every other test holds this shared.
static MACHINE: RwLock<()> = RwLock::new(());

/// Held by a test that times its calls (the fault tests, the measurements): no other test runs
/// beside it.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

/// Held by every other test: they run together, and never beside one that runs [`alone`].
pub fn shared() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}

/// One idle instance for the measurements: `count` breakers `b0`, `b1`… (one failure opens each
/// for a minute) shared through a fleet at `url` under `prefix` as `web-1` (`fleet_trip` a
/// quorum of two instances if `quorum`, else any), resynced; with the first tripped and
/// resynced again if `tripping`.
fn idle_fleet(
    rt: &tokio::runtime::Runtime,
    url: String,
    prefix: &str,
    count: usize,
    quorum: bool,
    tripping: bool,
) -> (breakerbox_fleet::Fleet, Vec<breakerbox_runtime::Breaker>) {
    use breakerbox_fleet::{Fleet, FleetConfig, FleetTrip, Quorum};
    use breakerbox_runtime::{Breaker, Config};
    let breakers: Vec<Breaker> = (0..count)
        .map(|i| {
            let config = Config::builder()
                .failures(1)
                .open_for(Duration::from_secs(60))
                .build()
                .unwrap();
            Breaker::new(format!("b{i}"), config)
        })
        .collect();
    let mut config = FleetConfig::new(url).prefix(prefix).instance("web-1");
    if quorum {
        config = config.fleet_trip(FleetTrip::Quorum(Quorum::Instances(2)));
    }
    let fleet = rt.block_on(async {
        let fleet = Fleet::connect(config).await.unwrap();
        for b in &breakers {
            fleet.share(b);
        }
        assert!(fleet.resync().await);
        fleet
    });
    if tripping {
        let _ = breakers[0].call(|| Err::<(), _>("down"));
        assert!(rt.block_on(fleet.resync()));
    }
    (fleet, breakers)
}

/// The fleet's probe leases all held by the node `holder`, its open time run out: every other
/// node rejects three calls (open), and the holder admits probes, polled for its first (the
/// lease is granted before the holder takes it on), then three calls more. Returns the
/// holder's index and how many probes it admitted.
fn probes_at_the_holder(nodes: &mut [Node], holder: &str, deadline: Instant) -> (usize, usize) {
    for node in nodes.iter_mut().filter(|n| n.name != holder) {
        for _ in 0..3 {
            assert_eq!(node.cmd("hold"), "rejected open", "{} probed", node.name);
        }
    }
    let at = nodes.iter().position(|n| n.name == holder).unwrap();
    let mut probes = 0;
    loop {
        let answer = nodes[at].cmd("hold");
        if answer == "ok half-open" {
            probes += 1;
            break;
        }
        assert_eq!(answer, "rejected open");
        assert!(Instant::now() < deadline, "the holder never probed");
        std::thread::sleep(Duration::from_millis(5));
    }
    for _ in 0..3 {
        match nodes[at].cmd("hold").as_str() {
            "ok half-open" => probes += 1,
            answer => assert_eq!(answer, "rejected half-open"),
        }
    }
    (at, probes)
}

/// The fleet's two probe leases `held` (as the store lists them, by holder), the fleet's open
/// time run out, are one process's: `<instance>@<token>#1` and `#2` (a lease is held by a
/// process: its instance, then a token of that process). Every other node rejects its calls,
/// that instance admits one probe per lease, two fleet-wide; the probes succeed, the holder
/// closes, and so does every node.
pub fn probes_through_two_leases(nodes: &mut [Node], held: &[&str]) {
    let holder = held[0].split('#').next().unwrap();
    assert_eq!(
        held,
        [format!("{holder}#1"), format!("{holder}#2")],
        "both leases to one process"
    );
    let instance = holder.split('@').next().unwrap();
    let (at, probes) = probes_at_the_holder(nodes, instance, soon());
    assert_eq!(probes, 2, "one probe per lease, fleet-wide");
    assert_eq!(nodes[at].cmd("release"), "ok closed");
    all_reach(nodes, "closed", soon()).unwrap();
}

/// What an idle instance does a second, for the measurements: after one periodic pass (so
/// that the count starts in the steady state), `reset` zeroes the server's count, and `count`
/// reads it `window` seconds later.
fn per_second(window: u64, reset: impl FnOnce(), count: impl FnOnce() -> u64) -> f64 {
    std::thread::sleep(Duration::from_millis(1_100));
    reset();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(window));
    let total = count();
    total as f64 / start.elapsed().as_secs_f64()
}

/// The idle measurements of a store at `url`: for `fleet_trip` `any` and under a quorum, for
/// each number of shared breakers in `counts`, all closed and one open, one idle instance
/// (`idle_fleet`) and what it sends the store a second (`per_second`: `reset` zeroes the
/// server's count, `count` reads it `window` seconds later). `report` has each rate as it comes,
/// with its mode (`"quorum,"` or `"any,   "`), count and breakers (`"one open "` or
/// `"all closed"`).
pub fn idle_rates(
    url: String,
    counts: &[usize],
    window: u64,
    reset: impl Fn(),
    count: impl Fn() -> u64,
    report: impl Fn(&str, usize, &str, f64),
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    for quorum in [false, true] {
        for &n in counts {
            for tripping in [false, true] {
                let prefix = format!("idle{n}{quorum}{tripping}");
                let (fleet, breakers) = idle_fleet(&rt, url.clone(), &prefix, n, quorum, tripping);
                let rate = per_second(window, &reset, &count);
                report(
                    if quorum { "quorum," } else { "any,   " },
                    n,
                    if tripping { "one open " } else { "all closed" },
                    rate,
                );
                drop(fleet);
                drop(breakers);
            }
        }
    }
}
