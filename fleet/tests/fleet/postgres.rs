//! Fleet mode with PostgreSQL as the store (feature `postgres`): `fleet_node` processes on a
//! `postgres://` URL share trips and controls, a keyed family's keys, quorum trips, fleet-wide
//! half-open leases and fleet counts; expired rows are deleted; and the processes keep their
//! promises under the faults the Redis backend's tests make (`faults`): the server killed and
//! restarted empty, stopped and continued, and a row of another application's under a
//! breaker's name. A table of another shape is an error naming it.
//!
//! Each fault test starts a PostgreSQL server of its own (a copy of a cluster `initdb` made once
//! for the machine, kept in the temporary directory; `fsync` off) on a free loopback port, from
//! `$BREAKERBOX_POSTGRES_BIN` or the newest `/usr/lib/postgresql/*/bin` (Debian's `postgresql`
//! package). Without one, the tests are skipped, saying so, except under CI (`CI=true`:
//! `scripts/test` installs it), where they fail.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use breakerbox_fleet::{Fleet, FleetConfig, FleetError};

use crate::faults::cut_off_store;
use crate::servers::poll;
use crate::support::{
    all_reach, alone, idle_rates, keyed_nodes, nodes, probes_through_two_leases, shared, soon,
    tempdir,
};

/// The directory of PostgreSQL's programs, or `None` (the test skipped, or failed under CI).
pub fn postgres_bin() -> Option<PathBuf> {
    let found = std::env::var_os("BREAKERBOX_POSTGRES_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
                .ok()?
                .filter_map(|e| Some(e.ok()?.path().join("bin")))
                .filter(|bin| bin.join("postgres").is_file())
                .collect();
            // The newest: the version directories are numbers.
            dirs.sort_by_key(|d| {
                d.parent()
                    .and_then(|v| v.file_name()?.to_str()?.parse::<u32>().ok())
                    .unwrap_or(0)
            });
            dirs.pop()
        });
    if found.is_none() {
        let message = "the PostgreSQL fleet tests need PostgreSQL's programs (the Debian package \
                       `postgresql`; scripts/test installs it) in /usr/lib/postgresql/*/bin or \
                       $BREAKERBOX_POSTGRES_BIN";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{message}: none found, and CI=true");
        }
        eprintln!("SKIPPED: {message}");
    }
    found
}

/// Whether this process runs as root: PostgreSQL's programs refuse to, so they run as the
/// `postgres` user the Debian package makes.
fn root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// `program` of PostgreSQL's, as a user it runs as.
fn pg_command(bin: &Path, program: &str) -> Command {
    if root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(bin.join(program));
        cmd
    } else {
        Command::new(bin.join(program))
    }
}

/// A fresh cluster each server starts from a copy of: made once for this machine and
/// PostgreSQL version (in the temporary directory, kept for the next runs; made under a name
/// of this process's, then renamed into place, so that processes making it at once agree).
fn template(bin: &Path) -> &'static Path {
    static TEMPLATE: OnceLock<PathBuf> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let version = bin
            .parent()
            .and_then(|v| v.file_name())
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_default();
        let root = if root() { "root" } else { "user" };
        let dir =
            std::env::temp_dir().join(format!("breakerbox-fleet-pg-template-{version}-{root}"));
        if dir.join("data/PG_VERSION").is_file() {
            return dir.join("data");
        }
        let making = tempdir().join("pg-template");
        std::fs::create_dir_all(&making).unwrap();
        own(&making);
        let status = pg_command(bin, "initdb")
            .arg("-D")
            .arg(making.join("data"))
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdout(Stdio::null())
            .status()
            .expect("run initdb");
        assert!(status.success(), "initdb failed");
        if std::fs::rename(&making, &dir).is_err() {
            // Made by another process meanwhile: theirs is used.
            let _ = std::fs::remove_dir_all(&making);
        }
        assert!(dir.join("data/PG_VERSION").is_file(), "no template cluster");
        dir.join("data")
    })
}

/// Gives `path` to the user PostgreSQL runs as.
pub fn own(path: &Path) {
    if root() {
        let status = Command::new("chown")
            .args(["-R", "postgres:"])
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A PostgreSQL server of the test's own, in its own process group (so that a signal reaches
/// the server and every backend), killed on drop.
pub struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    pub port: u16,
    child: Option<Child>,
    extra: Vec<String>,
}

impl Postgres {
    pub fn start(bin: &Path) -> Postgres {
        Postgres::start_with(bin, &[])
    }

    /// A server with `extra` arguments (`-c name=value`).
    pub fn start_with(bin: &Path, extra: &[&str]) -> Postgres {
        let mut pg = Postgres {
            bin: bin.to_owned(),
            dir: tempdir().join("pg"),
            port: free_port(),
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        pg.fresh();
        pg.spawn();
        pg
    }

    /// The data directory, a copy of the template: an empty cluster.
    fn fresh(&self) {
        let data = self.dir.join("data");
        let _ = std::fs::remove_dir_all(&data);
        std::fs::create_dir_all(&self.dir).unwrap();
        // A killed server's socket lock, which names a process that may not be reaped yet.
        for entry in std::fs::read_dir(&self.dir).unwrap().flatten() {
            if entry.file_name().to_string_lossy().starts_with(".s.PGSQL.") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let status = Command::new("cp")
            .arg("-a")
            .arg(template(&self.bin))
            .arg(&data)
            .status()
            .unwrap();
        assert!(status.success());
        own(&self.dir);
    }

    fn spawn(&mut self) {
        use std::os::unix::process::CommandExt;
        let mut cmd = pg_command(&self.bin, "postgres");
        cmd.arg("-D")
            .arg(self.dir.join("data"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-k"])
            .arg(&self.dir)
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("log")).unwrap())
            .process_group(0);
        self.child = Some(cmd.spawn().expect("start postgres"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.sql("select 1") != "1" {
            assert!(Instant::now() < deadline, "postgres did not answer");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `psql` against this server: `sql`'s output, unaligned, trimmed.
    pub fn sql(&self, sql: &str) -> String {
        psql(&self.bin, &self.url(), sql)
    }

    /// The server's processes: the postmaster (from its pid file) first, then its children
    /// (each backend is a process group of its own, so a group's signal misses them).
    fn pids(&self) -> Vec<String> {
        let Some(postmaster) = std::fs::read_to_string(self.dir.join("data/postmaster.pid"))
            .ok()
            .and_then(|s| s.lines().next().map(str::to_owned))
        else {
            return Vec::new();
        };
        let mut pids = vec![postmaster.clone()];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`: the fields after the command's closing parenthesis.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            if ppid == Some(postmaster.as_str()) {
                pids.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        pids
    }

    /// A signal to the server and every backend (`-STOP`: the postmaster first, so that it
    /// starts no backend meanwhile; `-CONT`: the postmaster last).
    pub fn signal(&self, signal: &str) {
        let mut pids = self.pids();
        if signal == "-CONT" {
            pids.reverse();
        }
        if let Some(child) = &self.child {
            pids.push(child.id().to_string());
        }
        for pid in pids {
            // A process may have exited meanwhile.
            let _ = Command::new("kill")
                .args([signal, &pid])
                .stderr(Stdio::null())
                .status();
        }
    }

    /// SIGKILL to the server and every backend, and waits for it.
    pub fn kill(&mut self) {
        if self.child.is_some() {
            self.signal("-CONT");
            self.signal("-KILL");
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Kills it and starts an empty cluster on the same port; returns once it answers.
    pub fn restart_empty(&mut self) {
        self.kill();
        self.fresh();
        self.spawn();
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.kill();
        if std::env::var_os("KEEP_PG").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `psql` against `url`: `sql`'s output, unaligned, trimmed.
fn psql(bin: &Path, url: &str, sql: &str) -> String {
    let out = Command::new(bin.join("psql"))
        .args(["-X", "-q", "-A", "-t", "-d", url, "-c", sql])
        .stderr(Stdio::null())
        .output()
        .expect("run psql");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The record's state in the table, or '' for none.
fn record_state(pg: &Postgres, prefix: &str, name: &str) -> String {
    pg.sql(&format!(
        "select state from breakerbox_fleet_records where prefix = '{prefix}' and family = '' \
         and name = '{name}'"
    ))
}

/// How many keys of the family `hosts` are listed open under `prefix`.
fn psql_count(url: &str, prefix: &str) -> u32 {
    let bin = postgres_bin().expect("found before");
    psql(
        &bin,
        url,
        &format!(
            "select count(*) from breakerbox_fleet_open_keys \
             where prefix = '{prefix}' and family = 'hosts'"
        ),
    )
    .parse()
    .unwrap_or(0)
}

/// `scripts/test`'s server (`$BREAKERBOX_TEST_POSTGRES_URL`) if set, else one of the test's
/// own (kept alive by the second value).
pub(crate) fn shared_postgres(bin: &Path) -> (String, Option<Postgres>) {
    match std::env::var("BREAKERBOX_TEST_POSTGRES_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let pg = Postgres::start(bin);
            (pg.url(), Some(pg))
        }
    }
}

#[test]
fn a_trip_and_the_controls_reach_every_process_through_postgres() {
    let Some(bin) = postgres_bin() else { return };
    let _shared = shared();
    let (url, _own) = shared_postgres(&bin);
    let prefix = format!("pg-together-{}", std::process::id());
    let mut nodes = nodes(&url, &prefix, 2);
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    // One row, written by node-0's trip; node-1 took it on as an imported change.
    let row = psql(
        &bin,
        &url,
        &format!(
            "select state, origin, reason, last_failure, open_until - changed_at \
             from breakerbox_fleet_records where prefix = '{prefix}' and name = 'payments'"
        ),
    );
    let f: Vec<&str> = row.split('|').collect();
    assert_eq!(
        f[..4],
        ["open", "node-0", "1 consecutive failure", "refused"],
        "{row}"
    );
    // Open for what remains of the config's 60 s when the trip is written (within 10 s, its
    // node connecting first).
    let open_for: u64 = f[4].parse().unwrap();
    assert!((50_000..=60_000).contains(&open_for), "{open_for} ms");
    // The event line is printed after the state changed: waited for.
    poll("node-1's open event", Duration::from_secs(5), || {
        nodes[1].events().last().is_some_and(|e| e.to == "open")
    });
    let last = nodes[1].events().last().cloned().unwrap();
    assert_eq!(
        (last.to.as_str(), last.reason.as_str()),
        ("open", "imported")
    );
    assert_eq!(nodes[1].cmd("fail"), "rejected open");
    assert_eq!(nodes[1].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
    assert_eq!(nodes[1].cmd("force_open"), "ok");
    all_reach(&mut nodes, "forced-open", soon()).unwrap();
    assert_eq!(nodes[0].cmd("disable"), "ok");
    all_reach(&mut nodes, "disabled", soon()).unwrap();
    assert_eq!(nodes[0].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
}

#[test]
fn a_keyed_familys_key_trips_every_process_through_postgres() {
    let Some(bin) = postgres_bin() else { return };
    let _shared = shared();
    let (url, _own) = shared_postgres(&bin);
    let prefix = format!("pg-keyed-{}", std::process::id());
    let mut nodes = keyed_nodes(&url, &prefix, 2, "");
    // node-1 holds the key already.
    assert_eq!(nodes[1].cmd("ksucceed a"), "ok closed");
    assert_eq!(nodes[0].cmd("kfail a"), "ok open");
    nodes[1].wait_key("a", "open", soon()).unwrap();
    // The event line is printed after the key's state changed: waited for.
    poll("node-1's open event", Duration::from_secs(5), || {
        nodes[1].key_events().last().is_some_and(|e| e.to == "open")
    });
    let last = nodes[1].key_events().last().cloned().unwrap();
    assert_eq!(
        (last.to.as_str(), last.failure.as_str()),
        ("open", "node-0: HTTP 503")
    );
    assert_eq!(nodes[1].cmd("ksucceed b"), "ok closed", "only that key");
    // A key node-1 makes after the fleet opened it takes the fleet's state before its first
    // call: node-0's trip is read once the family's open keys list it.
    assert_eq!(nodes[0].cmd("kfail c"), "ok open");
    let deadline = soon();
    while psql_count(&url, &prefix) < 2 {
        assert!(Instant::now() < deadline, "the open keys are not listed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(nodes[1].cmd("resync"), "resync true");
    assert_eq!(nodes[1].cmd("ksucceed c"), "rejected open");
    assert_eq!(nodes[1].cmd("kreset a"), "ok");
    for n in nodes.iter_mut() {
        n.wait_key("a", "closed", soon()).unwrap();
    }
}

/// `fleet_trip = "quorum"`, `quorum = 2`, on PostgreSQL: every node lists the three live
/// instances (heartbeats as rows), one node failing alone opens only itself (its report a row),
/// and a second one's report opens the fleet.
#[test]
fn a_quorum_of_two_opens_the_fleet_through_postgres() {
    let Some(bin) = postgres_bin() else { return };
    let _shared = shared();
    let (url, _own) = shared_postgres(&bin);
    let prefix = format!("pg-quorum-{}", std::process::id());
    let quorum = "fleet_trip = \"quorum\"\nquorum = 2\nresync_every = \"200ms\"\n";
    let mut nodes = crate::support::nodes_fleet(&url, &prefix, 3, quorum);
    for node in nodes.iter_mut() {
        let deadline = soon();
        loop {
            let (_, _, live) = node.instances();
            let names: Vec<&str> = live.iter().map(|(n, _)| n.as_str()).collect();
            if names == ["node-0", "node-1", "node-2"] {
                break;
            }
            assert!(Instant::now() < deadline, "{} lists {live:?}", node.name);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    let reports = format!(
        "select count(*) from breakerbox_fleet_reports where prefix = '{prefix}' \
         and name = 'payments'"
    );
    let deadline = soon();
    while psql(&bin, &url, &reports) != "1" {
        assert!(Instant::now() < deadline, "no report");
        std::thread::sleep(Duration::from_millis(2));
    }
    for node in &mut nodes[1..] {
        assert_eq!(node.cmd("resync"), "resync true");
        assert_eq!(node.state(), "closed", "{}", node.name);
    }
    // node-0 takes its tally from the answer to its report, after the report is in the store.
    poll("node-0's tally 1/2/3", Duration::from_secs(5), || {
        nodes[0].instances().1 == "1/2/3"
    });
    assert_eq!(nodes[1].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    let row = psql(
        &bin,
        &url,
        &format!(
            "select state, reason from breakerbox_fleet_records where prefix = '{prefix}' \
             and name = 'payments'"
        ),
    );
    assert!(
        row.starts_with("open|quorum: 2 of 3 instances open"),
        "{row}"
    );
    assert_eq!(nodes[2].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
}

/// Fleet-wide half-open on PostgreSQL: once the fleet's open time has run out, the two leases
/// (`half_open_calls = 2`) go to one process, which runs exactly two probes while the others
/// reject; its close closes the fleet and drops the leases.
#[test]
fn after_the_open_time_exactly_half_open_calls_probes_run_fleet_wide_through_postgres() {
    let Some(bin) = postgres_bin() else { return };
    let _shared = shared();
    let (url, _own) = shared_postgres(&bin);
    let prefix = format!("pg-lease-{}", std::process::id());
    let keys = "failures = 1\nopen_for = \"300ms\"\nhalf_open_calls = 2\nsuccesses = 1\n\
                probe_timeout = \"60s\"\n";
    let mut nodes = crate::support::nodes_with(&url, &prefix, 3, keys);
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    let leases = format!(
        "select string_agg(holder, ',' order by holder) from breakerbox_fleet_leases \
         where prefix = '{prefix}' and name = 'payments'"
    );
    let deadline = soon();
    let held = loop {
        let held = psql(&bin, &url, &leases);
        if held.split(',').count() == 2 {
            break held;
        }
        assert!(Instant::now() < deadline, "no two leases: {held:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    probes_through_two_leases(&mut nodes, &held.split(',').collect::<Vec<_>>());
    assert_eq!(psql(&bin, &url, &leases), "", "the close drops the leases");
}

/// Fleet counts on PostgreSQL: three processes each see 4 failures of a 50%-over-10 s breaker
/// with `min_calls = 10`, under it alone; the fleet's 12 trip every process.
#[test]
fn the_fleets_summed_failures_trip_it_through_postgres() {
    let Some(bin) = postgres_bin() else { return };
    let _shared = shared();
    let (url, _own) = shared_postgres(&bin);
    let prefix = format!("pg-counts-{}", std::process::id());
    let keys = "failure_rate = 50\nwindow = \"10s\"\nmin_calls = 10\nopen_for = \"60s\"\n";
    let mut nodes = crate::support::nodes_with(&url, &prefix, 3, keys);
    for node in nodes.iter_mut() {
        node.wait_resync(soon());
    }
    // No node trips alone; the fleet's counts may trip it a batch after node-2's second
    // failure (10 calls), before its last ones: those are rejected.
    for node in nodes.iter_mut() {
        for _ in 0..4 {
            let answer = node.cmd("fail");
            assert!(
                answer == "ok closed" || answer == "rejected open",
                "{}: {answer}",
                node.name
            );
        }
    }
    all_reach(&mut nodes, "open", soon()).unwrap();
    let reason = psql(
        &bin,
        &url,
        &format!(
            "select reason from breakerbox_fleet_records where prefix = '{prefix}' \
             and name = 'payments'"
        ),
    );
    assert_eq!(reason, "fleet failure rate 100%");
}

/// A family key's record expires on the server's clock once closed, and its row is then
/// deleted by a later write of the family (the rows of expired keys do not pile up).
#[test]
fn an_expired_family_keys_row_is_deleted() {
    let Some(bin) = postgres_bin() else { return };
    let _shared = shared();
    let (url, _own) = shared_postgres(&bin);
    let prefix = format!("pg-expiry-{}", std::process::id());
    // A closed key's record lives `key_ttl`, at least three re-reads: 600 ms here.
    let fleet = "resync_every = \"200ms\"\nkey_ttl = \"100ms\"\n";
    let mut nodes = keyed_nodes(&url, &prefix, 1, fleet);
    let rows = |name: &str| {
        psql(
            &bin,
            &url,
            &format!(
                "select count(*) from breakerbox_fleet_records where prefix = '{prefix}' \
                 and family = 'hosts' and name = '{name}'"
            ),
        )
    };
    assert_eq!(nodes[0].cmd("kfail a"), "ok open");
    assert_eq!(nodes[0].cmd("kreset a"), "ok");
    let deadline = soon();
    while psql(
        &bin,
        &url,
        &format!(
            "select state from breakerbox_fleet_records where prefix = '{prefix}' \
             and name = 'a'"
        ),
    ) != "closed"
    {
        assert!(Instant::now() < deadline, "the reset was not written");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rows("a"), "1");
    // Until it has expired on the server's clock.
    let expired = format!(
        "select count(*) from breakerbox_fleet_records where prefix = '{prefix}' \
         and name = 'a' and expires_at <= breakerbox_fleet_now()"
    );
    let deadline = soon();
    while psql(&bin, &url, &expired) != "1" {
        assert!(Instant::now() < deadline, "a's record never expired");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(nodes[0].cmd("kfail b"), "ok open");
    let deadline = soon();
    while rows("b") != "1" {
        assert!(Instant::now() < deadline, "b was not written");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(rows("a"), "0", "the expired row is deleted");
}

/// The fault tests' shape (`faults::cut_off_store`) on PostgreSQL: node-0 trips alone while
/// the server is cut off, the others stay closed, calls never wait; once `restore` returns,
/// every node is open within `within`, and nothing is lost: the trip made while cut off is
/// the fleet's record.
fn cut_off(
    what: &str,
    within: Duration,
    pg: &mut Postgres,
    fault: impl FnOnce(&mut Postgres),
    restore: impl FnOnce(&mut Postgres),
) {
    let url = pg.url();
    cut_off_store(what, &url, within, pg, fault, restore, |pg| {
        assert_eq!(record_state(pg, what, "payments"), "open");
    });
}

#[test]
fn postgres_killed_and_restarted_empty_mid_traffic() {
    let Some(bin) = postgres_bin() else { return };
    let _alone = alone();
    let mut pg = Postgres::start(&bin);
    // Back empty, each node's first connection makes the tables and functions again, one
    // node at a time (an advisory lock): 60 to 170 ms alone, over 1 s on a machine busy with
    // builds; 3 s bounds it.
    let within = Duration::from_secs(3);
    cut_off(
        "pg-kill",
        within,
        &mut pg,
        Postgres::kill,
        Postgres::restart_empty,
    );
}

#[test]
fn postgres_stopped_then_continued() {
    let Some(bin) = postgres_bin() else { return };
    let _alone = alone();
    let mut pg = Postgres::start(&bin);
    cut_off(
        "pg-stop",
        Duration::from_secs(1),
        &mut pg,
        |pg| pg.signal("-STOP"),
        |pg| pg.signal("-CONT"),
    );
}

/// `on_store_error = "open"`: while PostgreSQL is down every node is held forced open (its
/// calls never wait), and gets its own state back within 1 s of the server's return: nothing
/// held is left, nothing held was written.
#[test]
fn postgres_killed_holds_then_gives_back_under_on_store_error_open() {
    let Some(bin) = postgres_bin() else { return };
    let _alone = alone();
    let mut pg = Postgres::start(&bin);
    let prefix = "pg-hold";
    let mut nodes =
        crate::support::nodes_fleet(&pg.url(), prefix, 2, "on_store_error = \"open\"\n");
    assert_eq!(nodes[0].cmd("fail"), "ok open");
    all_reach(&mut nodes, "open", soon()).unwrap();
    pg.kill();
    all_reach(
        &mut nodes,
        "forced-open",
        Instant::now() + Duration::from_secs(2),
    )
    .unwrap();
    assert_eq!(nodes[1].cmd("fail"), "rejected forced-open");
    pg.restart_empty();
    all_reach(&mut nodes, "open", Instant::now() + Duration::from_secs(1)).unwrap();
    // The open record is written again into the empty server, never a held state.
    let deadline = soon();
    while record_state(&pg, prefix, "payments") != "open" {
        assert!(
            Instant::now() < deadline,
            "the record was not written again"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(nodes[1].cmd("reset"), "ok");
    all_reach(&mut nodes, "closed", soon()).unwrap();
}

/// Another application's row under `payments`' name (a state no fleet writes) and a
/// notification that is no fleet's: `payments` decides locally, alone (nothing held), the
/// family's keys go on being shared; once the row is gone, `payments` is shared again.
#[test]
fn a_foreign_row_leaves_that_breaker_alone_and_the_others_shared() {
    let Some(bin) = postgres_bin() else { return };
    let _shared = shared();
    let pg = Postgres::start(&bin);
    let prefix = "pg-foreign";
    let mut nodes = keyed_nodes(&pg.url(), prefix, 2, "");
    // The tables exist once a node has connected.
    nodes[0].wait_resync(soon());
    pg.sql(&format!(
        "insert into breakerbox_fleet_records (prefix, family, name, epoch, state, open_until, \
         reopens, origin, reason, last_failure, changed_at) values ('{prefix}', '', 'payments', \
         1, 'left by another application', 0, 0, '', '', '', 0)"
    ));
    pg.sql("notify breakerbox_fleet, 'not a record'");
    assert_eq!(nodes[0].cmd("fail"), "ok open", "local breaking goes on");
    assert_eq!(nodes[1].cmd("ksucceed k"), "ok closed");
    assert_eq!(nodes[0].cmd("kfail k"), "ok open");
    nodes[1].wait_key("k", "open", soon()).unwrap();
    assert_eq!(
        nodes[1].state(),
        "closed",
        "payments is not shared meanwhile"
    );
    assert_eq!(nodes[1].cmd("succeed"), "ok closed", "and nothing is held");
    assert_eq!(
        record_state(&pg, prefix, "payments"),
        "left by another application",
        "not written over"
    );
    pg.sql(&format!(
        "delete from breakerbox_fleet_records where prefix = '{prefix}' and name = 'payments'"
    ));
    // node-0's trip, kept while the row was there, is written once it is gone.
    nodes[1].wait_state("open", soon()).unwrap();
    assert_eq!(record_state(&pg, prefix, "payments"), "open");
}

/// A `postgres://` URL whose database holds a fleet table of another shape, or another schema
/// version: `Fleet::connect` says which table and what is wrong.
#[test]
fn a_table_of_another_shape_or_version_is_an_error_naming_it() {
    let Some(bin) = postgres_bin() else { return };
    let _shared = shared();
    let pg = Postgres::start(&bin);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let connect = |schema: &str| {
        let url = format!("{}?options=-csearch_path%3D{schema}", pg.url());
        rt.block_on(Fleet::connect(FleetConfig::new(url)))
    };
    pg.sql(
        "create schema shaped; create table shaped.breakerbox_fleet_records \
         (prefix text not null, family text not null, name text not null, epoch text not null)",
    );
    let Err(FleetError::Store { reason, .. }) = connect("shaped") else {
        panic!("a table of another shape connected");
    };
    assert!(
        reason.contains("the table `breakerbox_fleet_records` is not the breakerbox fleet's")
            && reason.contains("its column `epoch` is `text`, not `bigint`"),
        "{reason}"
    );
    // Made by this version, then marked as another's.
    pg.sql("create schema later");
    let fleet = connect("later").expect("an empty schema is made");
    drop(fleet);
    pg.sql("update later.breakerbox_fleet_schema set version = 7");
    let Err(FleetError::Store { reason, .. }) = connect("later") else {
        panic!("another schema version connected");
    };
    assert!(reason.contains("schema version 7"), "{reason}");
    // Nothing listening: an error at connect, naming the URL.
    let url = format!("postgres://postgres@127.0.0.1:{}/postgres", free_port());
    let Err(e) = rt.block_on(Fleet::connect(FleetConfig::new(url))) else {
        panic!("nothing listens, and it connected");
    };
    assert!(
        e.to_string()
            .starts_with("fleet: cannot use the store at `postgres://"),
        "{e}"
    );
}

/// The statements PostgreSQL ran since the last `pg_stat_statements_reset()` (each top-level
/// statement once: a function's own statements are not counted), ours left out.
fn statements(pg: &Postgres) -> u64 {
    pg.sql(
        "select coalesce(sum(calls), 0) from pg_stat_statements \
         where query not like '%pg_stat_statements%'",
    )
    .parse()
    .unwrap()
}

/// PostgreSQL's numbers beside Redis's (`numbers`): trip propagation across processes
/// (`FLEET_NODES`, default 2; 200 trips; `FLEET_TRAFFIC` as there), and the statements one idle instance sends a second
/// with 1 and 100 shared breakers, `fleet_trip` `any` and under a quorum, all closed and one
/// open. `FLEET_WINDOW` (seconds, default 5) sets how long each is counted.
///
///   cargo test -p breakerbox-fleet --release --features postgres --test fleet \
///       postgres::numbers -- --ignored --nocapture
#[test]
#[ignore = "a measurement: run it with --ignored --nocapture"]
fn numbers_propagation_and_idle_statements() {
    let Some(bin) = postgres_bin() else { return };
    let _alone = alone();
    let n: usize = std::env::var("FLEET_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let window: u64 = std::env::var("FLEET_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let pg = Postgres::start_with(&bin, &["-c", "shared_preload_libraries=pg_stat_statements"]);
    pg.sql("create extension pg_stat_statements");

    // Trip propagation: node-0's trip (its event's wall time) to each other node's imported
    // open event. Same host, same clock.
    let mut nodes = nodes(&pg.url(), "numbers", n);
    // As `numbers`: `FLEET_TRAFFIC=fast` makes each node's background calls about 1 M a second.
    let fast = std::env::var("FLEET_TRAFFIC").is_ok_and(|v| v == "fast");
    for node in nodes.iter_mut() {
        let on = if fast { "traffic fast" } else { "traffic on" };
        assert_eq!(node.cmd(on), "ok");
    }
    let trips = 200;
    let mut delays = Vec::with_capacity(trips * (n - 1));
    for i in 0..trips {
        assert_eq!(nodes[0].cmd("fail"), "ok open");
        let tripped = nodes[0].events()[2 * i].wall_ns;
        for at in crate::numbers::last_events(&nodes, 2 * i + 1, "open") {
            delays.push(at.saturating_sub(tripped));
        }
        assert_eq!(nodes[0].cmd("reset"), "ok");
        crate::numbers::last_events(&nodes, 2 * i + 2, "closed");
    }
    let p50 = crate::support::percentile(&mut delays, 0.5);
    let p99 = crate::support::percentile(&mut delays, 0.99);
    let max = *delays.iter().max().unwrap();
    println!(
        "PostgreSQL, fleet of {n}: trip propagation over {trips} trips ({} samples): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        delays.len(),
        p50 as f64 / 1e6,
        p99 as f64 / 1e6,
        max as f64 / 1e6
    );
    for node in nodes.iter_mut() {
        assert_eq!(node.cmd("traffic off"), "ok");
    }
    drop(nodes);

    idle_rates(
        pg.url(),
        &[1, 100],
        window,
        || {
            pg.sql("select pg_stat_statements_reset()");
        },
        || statements(&pg),
        |mode, count, open, rate| {
            println!(
                "PostgreSQL, idle instance, {mode} {count:>4} shared breakers, {open}: {rate:.2} statements per second"
            )
        },
    );
}
