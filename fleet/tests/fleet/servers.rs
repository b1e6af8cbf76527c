//! Real servers for the fleet's production-setup tests, all on 127.0.0.1 on free ports and
//! killed on drop: a TLS `redis-server` with a certificate made here (rcgen) and ACL users, a
//! Sentinel setup (a master, a replica, three sentinels: `redis-server --sentinel`), and a
//! Cluster (`--cluster-enabled yes`, created with `redis-cli --cluster create`). Every wait
//! polls a condition with a deadline.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Polls `ready` every 10 ms until it holds; panics naming `what` after `limit`.
pub fn poll(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// How `redis-cli` reaches a TLS node.
#[derive(Clone, Debug)]
struct CliTls {
    ca: PathBuf,
}

/// One `redis-server` process (a data node or a sentinel).
pub struct Server {
    bin: PathBuf,
    pub port: u16,
    args: Vec<String>,
    tls: Option<CliTls>,
    child: Option<Child>,
}

impl Server {
    fn start(bin: &Path, port: u16, args: Vec<String>, tls: Option<CliTls>) -> Server {
        let mut server = Server {
            bin: bin.to_owned(),
            port,
            args,
            tls,
            child: None,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new(&self.bin)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        poll(
            &format!("redis-server on {} answering PING", self.port),
            Duration::from_secs(10),
            || self.cli(&["PING"]) == "PONG",
        );
    }

    /// `redis-cli` against this server (as the default user); its output, trimmed.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("redis-cli");
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        if let Some(tls) = &self.tls {
            cmd.arg("--tls").arg("--cacert").arg(&tls.ca);
        }
        let out = cmd.args(args).output().expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The value of `field` in `INFO <section>`.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let info = self.cli(&["INFO", section]);
        info.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// SIGKILL, and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again with the same arguments; returns once it answers.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

fn data_node_args(port: u16, dir: &Path) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        dir.to_str().unwrap(),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A certificate authority made for one test, and a server certificate it signed for
/// `127.0.0.1` and `localhost`, as PEM files in `dir`.
pub struct Certs {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Certs {
    pub fn make(dir: &Path) -> Certs {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType,
        };
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "breakerbox fleet test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        params
            .distinguished_name
            .push(DnType::CommonName, "redis-server");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &ca).unwrap();
        let certs = Certs {
            ca: dir.join("ca.pem"),
            cert: dir.join("server.pem"),
            key: dir.join("server.key"),
        };
        std::fs::write(&certs.ca, ca.pem()).unwrap();
        std::fs::write(&certs.cert, cert.pem()).unwrap();
        std::fs::write(&certs.key, key.serialize_pem()).unwrap();
        certs
    }
}

/// A `redis-server` answering only TLS (no plain port), its certificate signed by a CA made
/// here, with ACL users beside `default`.
pub struct TlsRedis {
    pub dir: tempfile::TempDir,
    pub certs: Certs,
    pub server: Server,
}

impl TlsRedis {
    /// `users`: (name, password, ACL rules) each, as `ACL SETUSER` takes them after `on >pass`.
    pub fn start(bin: &Path, users: &[(&str, &str, &str)]) -> TlsRedis {
        let dir = tempfile::tempdir().unwrap();
        let certs = Certs::make(dir.path());
        let port = free_port();
        let mut args = data_node_args(0, dir.path());
        args.extend(
            [
                "--tls-port",
                &port.to_string(),
                "--tls-cert-file",
                certs.cert.to_str().unwrap(),
                "--tls-key-file",
                certs.key.to_str().unwrap(),
                "--tls-ca-cert-file",
                certs.ca.to_str().unwrap(),
                "--tls-auth-clients",
                "no",
            ]
            .map(str::to_owned),
        );
        for (name, password, rules) in users {
            // A directive's words as separate arguments: redis-server joins them.
            args.extend(["--user", name, "on"].map(str::to_owned));
            args.push(format!(">{password}"));
            args.extend(rules.split_whitespace().map(str::to_owned));
        }
        let tls = CliTls {
            ca: certs.ca.clone(),
        };
        let server = Server::start(bin, port, args, Some(tls));
        TlsRedis { dir, certs, server }
    }

    /// `rediss://user:password@127.0.0.1:<port>/`.
    pub fn url(&self, user: &str, password: &str) -> String {
        format!("rediss://{user}:{password}@127.0.0.1:{}/", self.server.port)
    }
}

/// A master, its replica and three sentinels watching it (quorum 2), with failure detection
/// in `down_after` (300 ms).
pub struct Sentinels {
    pub dir: tempfile::TempDir,
    /// The first master, then the first replica.
    pub data: Vec<Server>,
    pub sentinels: Vec<Server>,
    /// The master's name, as the sentinels know it.
    pub name: &'static str,
}

impl Sentinels {
    pub fn start(bin: &Path) -> Sentinels {
        let dir = tempfile::tempdir().unwrap();
        let name = "fleet";
        let master_port = free_port();
        let master = Server::start(
            bin,
            master_port,
            data_node_args(master_port, dir.path()),
            None,
        );
        let replica_port = free_port();
        let mut args = data_node_args(replica_port, dir.path());
        args.extend(["--replicaof".to_owned(), format!("127.0.0.1 {master_port}")]);
        let replica = Server::start(bin, replica_port, args, None);
        poll("the replica in sync", Duration::from_secs(10), || {
            replica.info("replication", "master_link_status").as_deref() == Some("up")
        });
        let sentinels = (0..3)
            .map(|i| {
                let port = free_port();
                let conf = dir.path().join(format!("sentinel-{i}.conf"));
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                         sentinel monitor {name} 127.0.0.1 {master_port} 2\n\
                         sentinel down-after-milliseconds {name} 300\n\
                         sentinel failover-timeout {name} 2000\n\
                         sentinel parallel-syncs {name} 1\n",
                        dir = dir.path().display()
                    ),
                )
                .unwrap();
                Server::start(
                    bin,
                    port,
                    vec![conf.to_str().unwrap().to_owned(), "--sentinel".to_owned()],
                    None,
                )
            })
            .collect::<Vec<_>>();
        let setup = Sentinels {
            dir,
            data: vec![master, replica],
            sentinels,
            name,
        };
        // Sentinels find each other by hello messages every 2 s, and the replica from the
        // master's INFO: a failover needs both.
        poll(
            "three sentinels knowing each other and the replica",
            Duration::from_secs(15),
            || {
                setup.sentinels.iter().all(|s| {
                    let m = sentinel_fields(&s.cli(&["SENTINEL", "MASTER", name]));
                    m.get("num-other-sentinels").map(String::as_str) == Some("2")
                        && m.get("num-slaves").map(String::as_str) == Some("1")
                })
            },
        );
        setup
    }

    /// The sentinels' addresses as `redis://127.0.0.1:<port>/` each.
    pub fn urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}/", s.port))
            .collect()
    }

    /// `redis+sentinel://127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>/<name>`.
    pub fn url(&self) -> String {
        let hosts = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect::<Vec<_>>()
            .join(",");
        format!("redis+sentinel://{hosts}/{}", self.name)
    }

    /// The master's port as every running sentinel names it, once they agree.
    pub fn master_port(&self) -> Option<u16> {
        let mut ports = self.sentinels.iter().filter(|s| s.is_running()).map(|s| {
            let out = s.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name]);
            out.lines()
                .nth(1)
                .and_then(|p| p.trim().parse::<u16>().ok())
        });
        let first = ports.next()??;
        ports.all(|p| p == Some(first)).then_some(first)
    }

    /// The data node on `port`.
    pub fn node(&mut self, port: u16) -> &mut Server {
        self.data
            .iter_mut()
            .find(|s| s.port == port)
            .expect("a data node on that port")
    }

    /// SIGKILLs the current master and waits until every sentinel names another, which
    /// answers as a master; how long that took.
    pub fn kill_master_and_wait(&mut self, limit: Duration) -> Duration {
        let old = self.master_port().expect("the sentinels agree on a master");
        self.node(old).kill();
        let killed = Instant::now();
        poll("the failover", limit, || {
            self.master_port().is_some_and(|p| p != old)
        });
        let new = self.master_port().unwrap();
        poll("the new master's role", limit, || {
            self.node(new).info("replication", "role").as_deref() == Some("master")
        });
        killed.elapsed()
    }
}

/// `SENTINEL MASTER`'s alternating field and value lines.
fn sentinel_fields(out: &str) -> std::collections::HashMap<String, String> {
    let lines = out.lines().map(str::trim).collect::<Vec<_>>();
    lines
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (c[0].to_owned(), c[1].to_owned()))
        .collect()
}

/// A Redis Cluster of `masters` masters with `replicas` replicas each, every slot covered,
/// node timeout 500 ms; a killed master's slots stop answering until it is back (or, with
/// replicas, until one is promoted): `cluster-require-full-coverage no` keeps the others.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub nodes: Vec<Server>,
}

impl Cluster {
    pub fn start(bin: &Path, masters: usize, replicas: usize) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let nodes = (0..masters * (1 + replicas))
            .map(|_| {
                let port = free_port();
                let mut args = data_node_args(port, dir.path());
                args.extend(
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        &format!("nodes-{port}.conf"),
                        "--cluster-node-timeout",
                        "500",
                        "--cluster-require-full-coverage",
                        "no",
                    ]
                    .map(str::to_owned),
                );
                Server::start(bin, port, args, None)
            })
            .collect::<Vec<_>>();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)))
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = Cluster { dir, nodes };
        poll(
            "every node's cluster_state:ok",
            Duration::from_secs(15),
            || {
                cluster
                    .nodes
                    .iter()
                    .all(|n| n.info_cluster("cluster_state").as_deref() == Some("ok"))
            },
        );
        cluster
    }

    /// Every node's address as `redis://127.0.0.1:<port>/`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect()
    }

    fn any(&self) -> &Server {
        self.nodes
            .iter()
            .find(|n| n.is_running())
            .expect("a node running")
    }

    /// `CLUSTER KEYSLOT key`.
    pub fn keyslot(&self, key: &str) -> u16 {
        self.any()
            .cli(&["CLUSTER", "KEYSLOT", key])
            .parse()
            .unwrap()
    }

    /// The index in `nodes` of the master serving `slot`, as a running node sees it
    /// (`CLUSTER NODES`: id, address, flags, master, …, then the slot ranges it serves).
    pub fn owner(&self, slot: u16) -> usize {
        let out = self.any().cli(&["CLUSTER", "NODES"]);
        for line in out.lines() {
            let fields = line.split_whitespace().collect::<Vec<_>>();
            if fields.len() < 9 || !fields[2].contains("master") || fields[2].contains("fail") {
                continue;
            }
            let serves = fields[8..].iter().any(|range| {
                let mut ends = range.split('-').map(|n| n.parse::<u16>());
                match (ends.next(), ends.next()) {
                    (Some(Ok(a)), Some(Ok(b))) => (a..=b).contains(&slot),
                    (Some(Ok(a)), None) => a == slot,
                    _ => false,
                }
            });
            if serves {
                let port = fields[1]
                    .split(['@', ':'])
                    .nth(1)
                    .unwrap()
                    .parse::<u16>()
                    .unwrap();
                return self.nodes.iter().position(|n| n.port == port).unwrap();
            }
        }
        panic!("no node serves slot {slot}: {out}");
    }

    /// Moves `slot` and its keys from its master to `nodes[to]`, as `redis-cli --cluster
    /// reshard` does: IMPORTING, MIGRATING, MIGRATE each key, then SETSLOT NODE everywhere.
    pub fn move_slot(&self, slot: u16, to: usize) {
        let from = self.owner(slot);
        assert_ne!(from, to, "slot {slot} is already on node {to}");
        let (src, dst) = (&self.nodes[from], &self.nodes[to]);
        let src_id = src.cli(&["CLUSTER", "MYID"]);
        let dst_id = dst.cli(&["CLUSTER", "MYID"]);
        let slot_s = slot.to_string();
        assert_eq!(
            dst.cli(&["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &src_id]),
            "OK"
        );
        assert_eq!(
            src.cli(&["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &dst_id]),
            "OK"
        );
        loop {
            let keys = src.cli(&["CLUSTER", "GETKEYSINSLOT", &slot_s, "100"]);
            let keys = keys.lines().filter(|k| !k.is_empty()).collect::<Vec<_>>();
            if keys.is_empty() {
                break;
            }
            let port = dst.port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys);
            assert_eq!(src.cli(&args), "OK");
        }
        for n in self.nodes.iter().filter(|n| n.is_running()) {
            n.cli(&["CLUSTER", "SETSLOT", &slot_s, "NODE", &dst_id]);
        }
        poll(
            &format!("slot {slot} served by node {to} everywhere"),
            Duration::from_secs(10),
            || self.owner(slot) == to,
        );
    }
}

impl Server {
    fn info_cluster(&self, field: &str) -> Option<String> {
        let info = self.cli(&["CLUSTER", "INFO"]);
        info.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .map(|v| v.trim().to_owned())
    }
}
