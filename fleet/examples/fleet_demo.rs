//! Fleet mode in one run (docs/fleet.md): three processes share the breaker `payments` through
//! Redis; one failure on the first opens it on all three, a reset on the third closes them.
//!
//!   cargo run -p breakerbox-fleet --example fleet_demo
//!
//! Uses the store at `$FLEET_DEMO_URL` if set (any fleet URL: a PostgreSQL one with
//! `--features postgres`, as in `FLEET_DEMO_URL=postgres://postgres@127.0.0.1:5432/postgres
//! cargo run -p breakerbox-fleet --features postgres --example fleet_demo`), else the Redis at
//! `$BREAKERBOX_TEST_REDIS_URL`, or starts `redis-server` (the Debian package) on a free loopback
//! port, persistence off, and stops it at the end. The three nodes
//! are this same program run as `fleet_demo node <config>` (the `fleet_node` binary's code).

#[path = "../src/bin/fleet_node.rs"]
#[allow(dead_code)]
mod node;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

struct Node {
    name: String,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Node {
    fn start(config: &std::path::Path, name: &str) -> Node {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("node")
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a node");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        let who = name.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(event) = line.strip_prefix("event ") {
                    let f: Vec<&str> = event.splitn(4, ' ').collect();
                    println!("  {who}: {} -> {} ({})", f[0], f[1], f[3]);
                } else if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut node = Node {
            name: name.to_owned(),
            child,
            stdin,
            lines,
        };
        let ready = node.answer();
        assert!(ready.starts_with("ready"), "{ready}");
        node
    }

    fn answer(&mut self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{} did not answer", self.name))
    }

    fn cmd(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").unwrap();
        self.answer()
    }

    fn wait(&mut self, state: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.cmd("state") != format!("state {state}") {
            assert!(
                Instant::now() < deadline,
                "{} never reached {state}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.wait();
    }
}

struct Server(Option<Child>);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("node") {
        node::run(&args[2]);
        return;
    }
    let chosen =
        std::env::var("FLEET_DEMO_URL").or_else(|_| std::env::var("BREAKERBOX_TEST_REDIS_URL"));
    let (url, _server) = match chosen {
        Ok(url) => (url, Server(None)),
        Err(_) => {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .spawn()
                .expect("start redis-server (Debian: apt-get install redis-server)");
            let server = Server(Some(child));
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(Instant::now() < deadline, "redis-server did not start");
                std::thread::sleep(Duration::from_millis(10));
            }
            (format!("redis://127.0.0.1:{port}/"), server)
        }
    };
    println!("The store at {url}");
    let dir = std::env::temp_dir().join(format!("fleet-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = format!("demo{}", std::process::id());
    let mut nodes: Vec<Node> = (1..=3)
        .map(|i| {
            let name = format!("node-{i}");
            let path = dir.join(format!("{name}.toml"));
            std::fs::write(
                &path,
                format!(
                    "[breakers.payments]\ndynamic = true\nfailures = 1\nopen_for = \"30s\"\n\n\
                     [fleet]\nurl = \"{url}\"\nprefix = \"{prefix}\"\nshare = [\"payments\"]\ninstance = \"{name}\"\n"
                ),
            )
            .unwrap();
            Node::start(&path, &name)
        })
        .collect();
    println!("three nodes share `payments`; node-1 fails one call:");
    println!("  node-1 answers: {}", nodes[0].cmd("fail"));
    for node in nodes.iter_mut() {
        node.wait("open");
    }
    println!(
        "every node is open; a call on node-2: {}",
        nodes[1].cmd("succeed")
    );
    println!("node-3 resets:");
    nodes[2].cmd("reset");
    for node in nodes.iter_mut() {
        node.wait("closed");
    }
    println!(
        "every node is closed; a call on node-2: {}",
        nodes[1].cmd("succeed")
    );
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
}
