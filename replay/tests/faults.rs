//! The disk journal under faults a seed chooses: pushes, takes and settles in any order, a
//! write that fails (a full disk), a crash at a step (the files as they are, the log cut
//! anywhere within the last push's commit), a byte flipped in the closed file, a second
//! opener. After every step: nothing acknowledged is lost, nothing refused or forged is taken,
//! nothing is taken twice at once or again after its replay, and the files stay within
//! max(1 MiB, 4 × the live entries).
//!
//! The same seeds drive the replayer (`the_replayer_…`): the breaker trips, half-opens and
//! closes at any step, also while an entry is being taken; no replay holds the probe's place,
//! none succeeds twice, and every journaled call ends replayed or dead.
//!
//! With the feature `redis`, the same seeds drive the fleet journal against a real
//! `redis-server` through a proxy (`the_fleet_journal_…`, module `fleet`): Redis hangs and
//! continues (running the held commands late), connections drop, the journal's counts, its
//! keys or its stream are lost; the same invariants, read from Redis after every step.
//!
//! `BREAKERBOX_REPLAY_FAULT_SEEDS` seeds (100 by default; `scripts/test` runs 2 000), or the
//! one seed `BREAKERBOX_REPLAY_FAULT_SEED`; a failing seed prints the command that replays it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use breakerbox_replay::{DiskJournal, Journal, Pushed, ReplayConfig, Settled, Take};

/// SplitMix64: one seed, one sequence, on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the model knows of each call, by its tag (the entry's key and the start of its
/// arguments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// Told "journaled", not yet replayed: must be there.
    Acked,
    /// Its caller was never told (a crash during its commit): may be there or not.
    InDoubt,
    /// Told "not journaled": must never be taken.
    Refused,
    /// Replayed: must never be taken again.
    Replayed,
    /// Replayed in a damaged journal, whose removal may not have been written: never taken
    /// again while it is open, and may be back after a reopen (at least once).
    Gone,
}

const TTL: Duration = Duration::from_secs(1 << 40);

fn config() -> ReplayConfig {
    ReplayConfig::new()
        .max_entries(64)
        .attempts(3)
        .backoff(Duration::ZERO, Duration::ZERO)
        .ttl(TTL)
}

fn files(path: &Path) -> [PathBuf; 2] {
    [
        path.to_path_buf(),
        PathBuf::from(format!("{}-wal", path.display())),
    ]
}

/// Bytes on disk of the journal at `path`: its file and every file beside it whose name starts
/// with its name (SQLite's `-wal`, `-shm` and `-journal`, and any other the journal leaves).
fn on_disk(path: &Path) -> u64 {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let dir = std::fs::read_dir(path.parent().unwrap()).unwrap();
    dir.filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&name))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// Arguments that carry a tag and, for some, bytes that look like records of their own.
fn args(tag: u32, rng: &mut Rng) -> Vec<u8> {
    let mut args = tag.to_le_bytes().to_vec();
    let len = [0, 10, 300, 5000][rng.below(4) as usize];
    args.extend((0..len).map(|i| (i as u8) ^ (tag as u8)));
    if rng.below(3) == 0 {
        // The postcard of a whole row-like tuple, and the old log's frame magic.
        args.extend(b"BBj1\x0c\x00\x00\x00");
        args.extend(999u32.to_le_bytes());
    }
    args
}

fn tag_of(args: &[u8]) -> u32 {
    u32::from_le_bytes(args[..4].try_into().unwrap())
}

struct Run {
    rng: Rng,
    dir: tempfile::TempDir,
    path: PathBuf,
    journal: Option<DiskJournal<Vec<u8>>>,
    fates: BTreeMap<u32, Fate>,
    in_flight: BTreeSet<(u64, u32)>,
    next_tag: u32,
    /// A byte of the open journal's file was flipped.
    damaged: bool,
    trace: Vec<String>,
}

impl Run {
    fn new(seed: u64) -> Run {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm).unwrap()
        } else {
            tempfile::tempdir().unwrap()
        };
        let path = dir.path().join("journal");
        let (journal, _) = DiskJournal::open("faults", &path, &config()).unwrap();
        Run {
            rng: Rng(seed),
            dir,
            path,
            journal: Some(journal),
            fates: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            next_tag: 1,
            damaged: false,
            trace: Vec::new(),
        }
    }

    fn journal(&self) -> &DiskJournal<Vec<u8>> {
        self.journal.as_ref().unwrap()
    }

    fn push(&mut self) {
        let tag = self.next_tag;
        self.next_tag += 1;
        let args = args(tag, &mut self.rng);
        let fail = self.rng.below(8) == 0;
        if fail {
            self.journal().fail_next_write();
        }
        let key = Some(tag.to_string());
        let pushed = self.journal().push(key, args, Duration::ZERO);
        self.trace
            .push(format!("push {tag} (write fails: {fail}): {pushed:?}"));
        let fate = match pushed {
            Ok(Pushed::New(_)) => Fate::Acked,
            Ok(Pushed::Duplicate(_)) => panic!("tags are unique"),
            Err(_) => Fate::Refused,
        };
        assert!(
            !(fail && fate == Fate::Acked),
            "a failed write was acknowledged"
        );
        self.fates.insert(tag, fate);
    }

    fn take(&mut self) {
        let take = self.journal().take(Duration::ZERO);
        let Take::Due(taken) = take else {
            self.trace.push(format!("take: {take:?}"));
            return;
        };
        let tag = tag_of(&taken.args);
        self.trace.push(format!("take {tag} (id {})", taken.id));
        assert_eq!(taken.key, Some(tag.to_string()), "a forged or mixed entry");
        match self.fates.get(&tag) {
            Some(Fate::Acked | Fate::InDoubt) => {}
            other => panic!("took entry {tag}, which is {other:?}"),
        }
        assert!(
            !self.in_flight.iter().any(|&(_, t)| t == tag),
            "took entry {tag} twice at once"
        );
        // An in-doubt entry that is there is as good as acknowledged from now on.
        self.fates.insert(tag, Fate::Acked);
        self.in_flight.insert((taken.id, tag));
    }

    fn settle(&mut self) {
        let Some(&(id, tag)) = self
            .in_flight
            .iter()
            .nth(self.rng.below(self.in_flight.len().max(1) as u64) as usize)
        else {
            return;
        };
        self.in_flight.remove(&(id, tag));
        let how = [Settled::Replayed, Settled::Failed, Settled::NotRun][self.rng.below(3) as usize];
        self.trace.push(format!("settle {tag} {how:?}"));
        self.journal().settle(id, how, Duration::ZERO);
        if how == Settled::Replayed {
            let fate = if self.damaged {
                Fate::Gone
            } else {
                Fate::Replayed
            };
            self.fates.insert(tag, fate);
        }
    }

    /// A crash at this step: the files as they are now, the log's last transaction cut
    /// anywhere (which makes the last acknowledged push in doubt), reopened.
    fn crash(&mut self, log_before: Option<Vec<u8>>, last_push: Option<u32>) {
        let image = self.dir.path().join(format!("crash-{}", self.next_tag));
        let [db, wal] = files(&self.path);
        let [image_db, image_wal] = files(&image);
        std::fs::copy(&db, &image_db).unwrap();
        let mut log = std::fs::read(&wal).unwrap_or_default();
        if let (Some(before), Some(tag)) = (log_before, last_push)
            && self.rng.below(2) == 0
        {
            // Torn: the new bytes up to a point, the old ones after it.
            let cut = self.rng.below(log.len() as u64 + 1) as usize;
            for (i, byte) in log.iter_mut().enumerate().skip(cut) {
                *byte = before.get(i).copied().unwrap_or(0);
            }
            if self.fates.get(&tag) == Some(&Fate::Acked) {
                self.fates.insert(tag, Fate::InDoubt);
            }
            self.trace.push(format!("crash, log torn at {cut}"));
        } else {
            self.trace.push("crash".to_owned());
        }
        std::fs::write(&image_wal, &log).unwrap();
        self.journal = None;
        self.in_flight.clear();
        for path in files(&self.path) {
            let _ = std::fs::remove_file(path);
        }
        std::fs::rename(&image_db, &self.path).unwrap();
        std::fs::rename(&image_wal, files(&self.path)[1].clone()).unwrap();
        self.reopen(false);
    }

    /// Closes the journal, flips a byte of the file, and reopens it.
    fn damage(&mut self) {
        self.journal = None;
        self.in_flight.clear();
        let mut bytes = std::fs::read(&self.path).unwrap();
        let at = self.rng.below(bytes.len() as u64) as usize;
        bytes[at] ^= 1 << self.rng.below(8);
        std::fs::write(&self.path, &bytes).unwrap();
        self.trace.push(format!("flip a bit of byte {at}"));
        self.damaged = true;
        // Damage may lose entries: from here on, what was acknowledged may be missing.
        for fate in self.fates.values_mut() {
            if *fate == Fate::Acked {
                *fate = Fate::InDoubt;
            }
        }
        self.reopen(true);
    }

    fn reopen(&mut self, damaged: bool) {
        match DiskJournal::open("faults", &self.path, &config()) {
            Ok((journal, _)) => self.journal = Some(journal),
            Err(e) => {
                assert!(damaged, "an undamaged journal did not open: {e}");
                assert!(
                    e.to_string().contains(&self.path.display().to_string()),
                    "the error does not name the file: {e}"
                );
                self.trace.push(format!("refused to open: {e}"));
                // Moved aside, as the error says: an empty journal.
                std::fs::remove_file(&self.path).unwrap();
                self.damaged = false;
                let _ = std::fs::remove_file(files(&self.path)[1].clone());
                for fate in self.fates.values_mut() {
                    if matches!(*fate, Fate::InDoubt | Fate::Gone) {
                        *fate = Fate::Refused;
                    }
                }
                self.journal = Some(
                    DiskJournal::open("faults", &self.path, &config())
                        .unwrap()
                        .0,
                );
            }
        }
        let held: BTreeSet<u32> = self
            .journal()
            .entries()
            .iter()
            .chain(self.journal().dead_letters().iter())
            .map(|e| e.key.as_deref().unwrap().parse().unwrap())
            .collect();
        for (tag, fate) in &mut self.fates {
            match fate {
                Fate::Acked => assert!(held.contains(tag), "acknowledged entry {tag} lost"),
                Fate::Refused | Fate::Replayed => {
                    assert!(!held.contains(tag), "entry {tag} ({fate:?}) is back")
                }
                Fate::Gone if held.contains(tag) => *fate = Fate::InDoubt,
                Fate::InDoubt | Fate::Gone => {}
            }
        }
    }

    fn second_opener(&mut self) {
        let again = DiskJournal::<Vec<u8>>::open("second", &self.path, &config());
        assert!(again.is_err(), "a second opener opened the journal");
        self.trace.push("a second opener was refused".to_owned());
    }

    fn check_space(&self) {
        let journal = self.journal();
        let live = journal.status().bytes as u64
            + journal
                .dead_letters()
                .iter()
                .map(|e| e.bytes as u64)
                .sum::<u64>();
        let size = on_disk(&self.path);
        assert!(
            size <= (1u64 << 20).max(4 * live),
            "{size} bytes on disk for {live} live"
        );
    }

    fn step(&mut self) {
        let log_before = std::fs::read(files(&self.path)[1].clone()).ok();
        match self.rng.below(20) {
            0..=6 => self.push(),
            7..=10 => self.take(),
            11..=14 => self.settle(),
            15 => {
                self.push();
                let last = self.next_tag - 1;
                self.crash(log_before, Some(last));
            }
            16 => self.crash(None, None),
            17 => self.damage(),
            18 => self.second_opener(),
            _ => {
                let n = self.journal().retry_dead_letters(Duration::ZERO);
                self.trace.push(format!("retry dead letters: {n}"));
            }
        }
        self.check_space();
    }
}

fn run(seed: u64) {
    let mut run = Run::new(seed);
    let steps = 30 + run.rng.below(30);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..steps {
            run.step();
        }
    }));
    if let Err(panic) = outcome {
        eprintln!("seed {seed} failed after:\n  {}", run.trace.join("\n  "));
        eprintln!(
            "replay it: BREAKERBOX_REPLAY_FAULT_SEED={seed} cargo test -p breakerbox-replay --test faults"
        );
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn the_disk_journal_keeps_its_promises_under_seeded_faults() {
    if let Some(seed) = std::env::var("BREAKERBOX_REPLAY_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return run(seed);
    }
    let seeds: u64 = std::env::var("BREAKERBOX_REPLAY_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let workers: Vec<_> = (0..2)
        .map(|worker| {
            std::thread::spawn(move || {
                for seed in (worker..seeds).step_by(2) {
                    run(seed);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
}

/// A memory journal that lets a seed act on the breaker while the replayer takes an entry:
/// trip it and let its open time pass (half-open), or close it.
struct Meddling {
    inner: breakerbox_replay::MemoryJournal<u32>,
    breaker: breakerbox_runtime::Breaker,
    clock: breakerbox_runtime::ManualClock,
    rng: std::sync::Mutex<Rng>,
}

impl Meddling {
    fn meddle(&self) {
        let act = self.rng.lock().unwrap().below(4);
        match act {
            0 => {
                if let Ok(permit) = self.breaker.try_acquire() {
                    permit.failure();
                }
                self.clock.advance(Duration::from_secs(5));
            }
            1 => self.breaker.reset(),
            _ => {}
        }
    }
}

impl Journal<u32> for Meddling {
    fn push(
        &self,
        key: Option<String>,
        args: u32,
        now: Duration,
    ) -> Result<Pushed, breakerbox_replay::NotJournaled> {
        self.inner.push(key, args, now)
    }
    fn take(&self, now: Duration) -> Take<u32> {
        self.meddle();
        self.inner.take(now)
    }
    fn settle(&self, id: u64, how: Settled, now: Duration) {
        self.inner.settle(id, how, now)
    }
    fn status(&self) -> breakerbox_replay::JournalStatus {
        self.inner.status()
    }
    fn entries(&self) -> Vec<breakerbox_replay::EntryInfo> {
        self.inner.entries()
    }
    fn dead_letters(&self) -> Vec<breakerbox_replay::EntryInfo> {
        self.inner.dead_letters()
    }
    fn retry_dead_letters(&self, now: Duration) -> usize {
        self.inner.retry_dead_letters(now)
    }
    fn drop_dead_letters(&self) -> usize {
        self.inner.drop_dead_letters()
    }
    fn may_block(&self) -> bool {
        false
    }
}

/// One seed of the replayer's rules: calls journaled while the breaker trips, half-opens and
/// closes at any step (also while the replayer takes an entry), replays failing as the seed
/// says. No replay runs while the breaker is half-open (as its probe), none succeeds twice,
/// and at the end every journaled call was replayed or is a dead letter.
fn run_replayer(seed: u64) {
    use breakerbox_runtime::{Breaker, Config, Error, ManualClock, RejectReason, TokioClock};
    use std::sync::{Arc, Mutex};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let clock = ManualClock::new();
        let config = Config::builder()
            .failures(1)
            .open_for(Duration::from_secs(5))
            .half_open_calls(1)
            .clock(clock.clone())
            .build()
            .unwrap();
        let breaker = Breaker::new("faults.replayer", config);
        let journal = Arc::new(Meddling {
            inner: breakerbox_replay::MemoryJournal::new(
                "faults.replayer",
                &ReplayConfig::new().attempts(3).ttl(TTL),
            ),
            breaker: breaker.clone(),
            clock: clock.clone(),
            rng: Mutex::new(Rng(seed ^ 0x5eed)),
        });
        let succeeded: Arc<Mutex<Vec<u32>>> = Arc::default();
        let as_probe: Arc<Mutex<Vec<u32>>> = Arc::default();
        let rng = Arc::new(Mutex::new(Rng(seed)));
        let replay = {
            let (succeeded, as_probe, rng, breaker) = (
                succeeded.clone(),
                as_probe.clone(),
                rng.clone(),
                breaker.clone(),
            );
            breakerbox_replay::Replay::builder(&breaker.clone())
                .clock(TokioClock)
                .config(ReplayConfig::new().attempts(3).ttl(TTL).rate(100))
                .journal(journal.clone(), move |tag: u32| {
                    // With one probe place, a replay that holds it leaves none for a call.
                    if let Err(rejected) = breaker.try_acquire()
                        && rejected.reason() == RejectReason::HalfOpenFull
                    {
                        as_probe.lock().unwrap().push(tag);
                    }
                    let ok = rng.lock().unwrap().below(4) != 0;
                    if ok {
                        succeeded.lock().unwrap().push(tag);
                    }
                    async move { if ok { Ok(()) } else { Err("down") } }
                })
                .unwrap()
        };
        let mut journaled = BTreeSet::new();
        let mut trace = Vec::new();
        for tag in 0..40u32 {
            let act = rng.lock().unwrap().below(6);
            match act {
                0 => {
                    breaker.force_open();
                    trace.push("force open".to_owned());
                }
                1 => {
                    breaker.reset();
                    trace.push("reset".to_owned());
                }
                2 => {
                    clock.advance(Duration::from_secs(5));
                    trace.push("5 s pass".to_owned());
                }
                _ => {}
            }
            if let Err(Error::Rejected(r)) = replay.call(tag, |_| Err::<(), _>("down"))
                && r.journaled()
            {
                journaled.insert(tag);
            }
            let pause = Duration::from_millis(rng.lock().unwrap().below(50));
            tokio::time::sleep(pause).await;
            let probes = as_probe.lock().unwrap().clone();
            assert!(
                probes.is_empty(),
                "seed {seed}: replayed as a probe: {probes:?} after {trace:?}"
            );
        }
        // The breaker stays closed: everything is replayed or dead.
        for _ in 0..200 {
            breaker.reset();
            tokio::time::sleep(Duration::from_secs(1)).await;
            if journal.status().entries == 0 {
                break;
            }
        }
        let probes = as_probe.lock().unwrap().clone();
        assert!(
            probes.is_empty(),
            "seed {seed}: replayed as a probe: {probes:?}"
        );
        let succeeded = succeeded.lock().unwrap().clone();
        let once: BTreeSet<u32> = succeeded.iter().copied().collect();
        assert_eq!(
            once.len(),
            succeeded.len(),
            "seed {seed}: a call replayed twice: {succeeded:?}"
        );
        let dead: BTreeSet<u32> = journal.dead_letters().iter().map(|e| e.id as u32).collect();
        assert_eq!(journal.status().entries, 0, "seed {seed}: entries left");
        assert!(
            once.is_subset(&journaled),
            "seed {seed}: replayed unjournaled calls"
        );
        assert_eq!(
            once.len() + dead.len(),
            journaled.len(),
            "seed {seed}: journaled calls neither replayed nor dead"
        );
    });
}

#[test]
fn the_replayer_never_replays_as_a_probe_nor_twice_under_seeded_interleavings() {
    if let Some(seed) = std::env::var("BREAKERBOX_REPLAY_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return run_replayer(seed);
    }
    let seeds: u64 = std::env::var("BREAKERBOX_REPLAY_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    for seed in 0..seeds {
        let outcome = std::panic::catch_unwind(|| run_replayer(seed));
        if let Err(panic) = outcome {
            eprintln!(
                "replay it: BREAKERBOX_REPLAY_FAULT_SEED={seed} cargo test -p breakerbox-replay --test faults"
            );
            std::panic::resume_unwind(panic);
        }
    }
}

/// The fleet journal under faults a seed chooses, against a real `redis-server` on 127.0.0.1
/// (`scripts/test`'s, named by `BREAKERBOX_TEST_REDIS_URL`, or one of the test's own) reached
/// through a proxy the seed drives: Redis hangs (the proxy holds the commands, then lets them
/// through late, as a stopped server that continues), the connection drops (the held commands
/// with it), the journal's counts hash, its keys' hash or its stream is lost (`DEL`). After every step, read
/// from Redis directly: nothing acknowledged is lost unless Redis lost its stream, nothing
/// refused (also when Redis runs it late) or forged is queued or taken, nothing is taken twice
/// at once or again after its replay, and the stream stays within `max_entries`. A push
/// refused in doubt (its reason says so: sent, and no answer in time) while Redis was not hung
/// may be queued (its answer may have been slower than the wait after Redis ran it): counted,
/// and allowed either way; every other refusal must have journaled nothing.
#[cfg(feature = "redis")]
mod fleet {
    use std::collections::{BTreeMap, BTreeSet};
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::process::{Child, Command, Stdio};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use breakerbox_replay::{
        Journal, Pushed, RedisJournal, RedisOptions, ReplayConfig, Settled, Take,
    };

    use super::Rng;

    /// The journal's timeout: short, so that a hang costs little real time.
    const TIMEOUT: Duration = Duration::from_millis(50);
    /// What the reason of a push refused in doubt says (it was sent, and no answer came).
    const IN_DOUBT: &str = "may have been journaled all the same";
    const MAX_ENTRIES: usize = 24;

    /// What the model knows of each call, by its tag (its key).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Fate {
        /// Told "journaled", not yet replayed: must be queued (or a dead letter).
        Acked,
        /// Told "not journaled": must never be queued nor taken.
        Refused,
        /// Told "not journaled" in doubt (sent, no answer in time) while Redis was not hung (a
        /// loaded machine, a dropped connection): Redis may have run it in time, and its answer
        /// been lost or slower than the caller's wait. May be queued.
        InDoubt,
        /// Replayed: must never be taken again.
        Replayed,
        /// Redis lost its stream while it was there: may be gone.
        Lost,
    }

    /// A server of the harness's own, or `scripts/test`'s.
    pub(super) struct Server {
        pub(super) url: String,
        addr: String,
        child: Option<Child>,
    }

    impl Server {
        pub(super) fn get() -> Option<Server> {
            if let Ok(url) = std::env::var("BREAKERBOX_TEST_REDIS_URL") {
                let addr = url
                    .trim_start_matches("redis://")
                    .trim_end_matches('/')
                    .to_owned();
                return Some(Server {
                    url,
                    addr,
                    child: None,
                });
            }
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            let child = match child {
                Ok(child) => child,
                Err(e) => {
                    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
                    assert!(!ci, "redis-server is needed under CI: {e}");
                    eprintln!("SKIPPED: no redis-server ({e})");
                    return None;
                }
            };
            let server = Server {
                url: format!("redis://127.0.0.1:{port}/"),
                addr: format!("127.0.0.1:{port}"),
                child: Some(child),
            };
            let client = redis::Client::open(server.url.as_str()).unwrap();
            for _ in 0..500 {
                if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(100))
                    && redis::cmd("PING").query::<String>(&mut con).is_ok()
                {
                    return Some(server);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("redis-server at {} did not start", server.url);
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            if let Some(child) = &mut self.child {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    /// One connection through the proxy: the way to Redis, and the commands held meanwhile;
    /// the way back, and the answers held meanwhile.
    struct Pipe {
        client: TcpStream,
        upstream: TcpStream,
        held: Vec<u8>,
        answers: Vec<u8>,
    }

    /// A TCP proxy in front of Redis: it passes bytes both ways, or holds the client's (Redis
    /// hangs: nothing is run, nothing answered), lets them through late, holds Redis's answers
    /// (Redis runs the commands, their answers are late), or drops every connection.
    struct Proxy {
        port: u16,
        hold: Arc<Mutex<bool>>,
        hold_answers: Arc<Mutex<bool>>,
        pipes: Arc<Mutex<Vec<Arc<Mutex<Pipe>>>>>,
        closed: Arc<std::sync::atomic::AtomicBool>,
    }

    impl Drop for Proxy {
        fn drop(&mut self) {
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
            // Wakes the accepting thread, which then ends.
            let _ = TcpStream::connect(("127.0.0.1", self.port));
            self.drop_connections();
        }
    }

    impl Proxy {
        fn start(upstream: String) -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let hold = Arc::new(Mutex::new(false));
            let hold_answers = Arc::new(Mutex::new(false));
            let pipes: Arc<Mutex<Vec<Arc<Mutex<Pipe>>>>> = Arc::default();
            let (held, all) = (hold.clone(), pipes.clone());
            let answers_held = hold_answers.clone();
            let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let ended = closed.clone();
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    let Ok(client) = client else { return };
                    if ended.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    let Ok(server) = TcpStream::connect(&upstream) else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let pipe = Arc::new(Mutex::new(Pipe {
                        client: client.try_clone().unwrap(),
                        upstream: server.try_clone().unwrap(),
                        held: Vec::new(),
                        answers: Vec::new(),
                    }));
                    all.lock().unwrap().push(pipe.clone());
                    // Redis to the client: through, or held.
                    let (mut from, hold, back) = (server, answers_held.clone(), pipe.clone());
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            let holding = *hold.lock().unwrap();
                            let mut pipe = back.lock().unwrap();
                            if holding {
                                pipe.answers.extend_from_slice(&buf[..n]);
                            } else if pipe.client.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = back.lock().unwrap().client.shutdown(Shutdown::Both);
                    });
                    // The client to Redis: through, or held.
                    let (mut from, hold) = (client, held.clone());
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            let n = match from.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            let holding = *hold.lock().unwrap();
                            let mut pipe = pipe.lock().unwrap();
                            if holding {
                                pipe.held.extend_from_slice(&buf[..n]);
                            } else if pipe.upstream.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let pipe = pipe.lock().unwrap();
                        let _ = pipe.upstream.shutdown(Shutdown::Both);
                    });
                }
            });
            Proxy {
                port,
                hold,
                hold_answers,
                pipes,
                closed,
            }
        }

        fn url(&self) -> String {
            format!("redis://127.0.0.1:{}/", self.port)
        }

        /// Redis hangs: the commands sent from now on wait in the proxy.
        fn hang(&self) {
            *self.hold.lock().unwrap() = true;
        }

        /// Redis continues: the held commands go through (late), then the new ones.
        fn resume(&self) {
            let mut hold = self.hold.lock().unwrap();
            for pipe in self.pipes.lock().unwrap().iter() {
                let mut pipe = pipe.lock().unwrap();
                let held = std::mem::take(&mut pipe.held);
                let _ = pipe.upstream.write_all(&held);
            }
            *hold = false;
        }

        /// Redis runs the commands, and its answers wait in the proxy.
        fn hold_answers(&self) {
            *self.hold_answers.lock().unwrap() = true;
        }

        /// The held answers go through (late), then the new ones.
        fn release_answers(&self) {
            let mut hold = self.hold_answers.lock().unwrap();
            for pipe in self.pipes.lock().unwrap().iter() {
                let mut pipe = pipe.lock().unwrap();
                let answers = std::mem::take(&mut pipe.answers);
                let _ = pipe.client.write_all(&answers);
            }
            *hold = false;
        }

        /// Every connection dropped, with the commands held in it (never run).
        fn drop_connections(&self) {
            for pipe in self.pipes.lock().unwrap().drain(..) {
                let mut pipe = pipe.lock().unwrap();
                pipe.held.clear();
                let _ = pipe.client.shutdown(Shutdown::Both);
                let _ = pipe.upstream.shutdown(Shutdown::Both);
            }
        }
    }

    fn config() -> ReplayConfig {
        ReplayConfig::new()
            .max_entries(MAX_ENTRIES)
            .attempts(3)
            .backoff(Duration::ZERO, Duration::ZERO)
            .ttl(super::TTL)
    }

    struct Run {
        rng: Rng,
        proxy: Proxy,
        direct: redis::Connection,
        journal: RedisJournal<Vec<u8>>,
        fates: BTreeMap<u32, Fate>,
        in_flight: BTreeSet<(u64, u32)>,
        next_tag: u32,
        hung: bool,
        /// Pushes refused on a timeout while Redis was not hung.
        in_doubt: usize,
        /// The journal's clock: a millisecond a step (no held entry is taken over).
        now: Duration,
        trace: Vec<String>,
    }

    impl Run {
        fn new(seed: u64, server: &Server) -> Run {
            let proxy = Proxy::start(server.addr.clone());
            let prefix = format!("bbfaults:{}:{seed}:", std::process::id());
            let options = RedisOptions::new(proxy.url())
                .timeout(TIMEOUT)
                .prefix(prefix)
                .consumer("faults")
                .claim_after(Duration::from_secs(3600));
            let journal = open(&options);
            let direct = redis::Client::open(server.url.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            Run {
                rng: Rng(seed),
                proxy,
                direct,
                journal,
                fates: BTreeMap::new(),
                in_flight: BTreeSet::new(),
                next_tag: 1,
                hung: false,
                in_doubt: 0,
                now: Duration::ZERO,
                trace: Vec::new(),
            }
        }

        fn key(&self, what: &str) -> String {
            self.journal.stream_key().replace(":stream", what)
        }

        fn push(&mut self) {
            let tag = self.next_tag;
            self.next_tag += 1;
            // Small arguments: the store's faults are what this harness is about, and every
            // step reads the whole stream back.
            let mut args = tag.to_le_bytes().to_vec();
            args.resize(4 + [0, 10, 300][self.rng.below(3) as usize], tag as u8);
            let pushed = self.journal.push(Some(tag.to_string()), args, self.now);
            self.trace.push(format!("push {tag}: {pushed:?}"));
            let fate = match pushed {
                Ok(Pushed::New(_)) => Fate::Acked,
                Ok(Pushed::Duplicate(_)) => panic!("tags are unique"),
                // The proxy held it (Redis hung): Redis runs it late, or never.
                Err(_) if self.hung => Fate::Refused,
                // Sent, and no answer in time while Redis was not hung (a loaded machine, a
                // dropped connection): Redis may have run it. Every other refusal journaled
                // nothing.
                Err(e) if e.to_string().contains(IN_DOUBT) => {
                    self.in_doubt += 1;
                    Fate::InDoubt
                }
                Err(_) => Fate::Refused,
            };
            assert!(
                !(self.hung && fate == Fate::Acked),
                "a push acknowledged while Redis hangs"
            );
            self.fates.insert(tag, fate);
        }

        fn take(&mut self) {
            let take = self.journal.take(self.now);
            let Take::Due(taken) = take else {
                self.trace.push(format!("take: {take:?}"));
                return;
            };
            let tag = super::tag_of(&taken.args);
            self.trace.push(format!("take {tag} (id {})", taken.id));
            assert_eq!(taken.key, Some(tag.to_string()), "a forged or mixed entry");
            match self.fates.get(&tag) {
                Some(Fate::Acked | Fate::Lost | Fate::InDoubt) => {}
                other => panic!("took entry {tag}, which is {other:?}"),
            }
            assert!(
                !self.in_flight.iter().any(|&(_, t)| t == tag),
                "took entry {tag} twice at once"
            );
            self.fates.insert(tag, Fate::Acked);
            self.in_flight.insert((taken.id, tag));
        }

        fn settle(&mut self) {
            let Some(&(id, tag)) = self
                .in_flight
                .iter()
                .nth(self.rng.below(self.in_flight.len().max(1) as u64) as usize)
            else {
                return;
            };
            self.in_flight.remove(&(id, tag));
            let how =
                [Settled::Replayed, Settled::Failed, Settled::NotRun][self.rng.below(3) as usize];
            self.trace.push(format!("settle {tag} {how:?}"));
            self.journal.settle(id, how, self.now);
            // Written or not (a settle that fails leaves the entry held, and nothing takes it
            // over within the run), a replayed entry is never taken again.
            if how == Settled::Replayed {
                self.fates.insert(tag, Fate::Replayed);
            }
        }

        /// Redis continues; the held commands run (late), and the journal's thread finds
        /// Redis answering again.
        fn resume(&mut self) {
            self.proxy.resume();
            self.hung = false;
            self.trace.push("Redis continues".to_owned());
            self.answering();
        }

        /// Until the journal finds Redis answering again (real time: a probe every timeout; at
        /// most 10 s, the harness's workers sharing the machine's cores).
        fn answering(&self) {
            for _ in 0..2000 {
                if self.journal.try_status().is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!("the journal did not find Redis answering again");
        }

        fn lose(&mut self, what: &str) {
            let key = self.key(what);
            let _: () = redis::cmd("DEL").arg(&key).query(&mut self.direct).unwrap();
            self.trace.push(format!("Redis lost {what}"));
            if what == ":stream" {
                for fate in self.fates.values_mut() {
                    if matches!(*fate, Fate::Acked | Fate::InDoubt) {
                        *fate = Fate::Lost;
                    }
                }
            }
        }

        /// The tags queued and dead, read from Redis directly.
        fn held(&mut self) -> (BTreeSet<u32>, usize) {
            let mut tags = BTreeSet::new();
            let mut queued = 0;
            for (what, count) in [(":stream", true), (":dead", false)] {
                let entries: Vec<(String, BTreeMap<String, Vec<u8>>)> = redis::cmd("XRANGE")
                    .arg(self.key(what))
                    .arg("-")
                    .arg("+")
                    .query(&mut self.direct)
                    .unwrap();
                if count {
                    queued = entries.len();
                }
                for (_, fields) in entries {
                    let key = fields.get("k").expect("every entry has its key");
                    tags.insert(String::from_utf8_lossy(key).parse().unwrap());
                }
            }
            (tags, queued)
        }

        fn check(&mut self) {
            let (held, queued) = self.held();
            assert!(queued <= MAX_ENTRIES, "{queued} entries queued");
            for (tag, fate) in &self.fates {
                match fate {
                    Fate::Acked => assert!(held.contains(tag), "acknowledged entry {tag} lost"),
                    Fate::Refused => {
                        assert!(!held.contains(tag), "refused entry {tag} is queued")
                    }
                    // A replayed entry may stay queued where its settle was not written: held
                    // by this instance, never taken again (the check is in `take`).
                    Fate::Replayed | Fate::Lost | Fate::InDoubt => {}
                }
            }
        }

        fn step(&mut self) {
            self.now += Duration::from_millis(1);
            match self.rng.below(25) {
                0..=7 => self.push(),
                8..=11 => self.take(),
                12..=15 => self.settle(),
                16 if !self.hung => {
                    self.proxy.hang();
                    self.hung = true;
                    self.trace.push("Redis hangs".to_owned());
                }
                16 | 17 if self.hung => self.resume(),
                17 | 18 => {
                    self.proxy.drop_connections();
                    self.trace.push("connections dropped".to_owned());
                    if self.hung {
                        self.resume();
                    }
                }
                19 => self.lose(":counts"),
                20 => self.lose(":stream"),
                21 => self.lose(":keys"),
                _ => {
                    let n = self.journal.retry_dead_letters(self.now);
                    self.trace.push(format!("retry dead letters: {n}"));
                }
            }
            if !self.hung {
                self.check();
            }
        }
    }

    fn open(options: &RedisOptions) -> RedisJournal<Vec<u8>> {
        // A loaded machine may miss the short timeout at open: try again.
        let mut last = None;
        for _ in 0..50 {
            match RedisJournal::open("faults", options.clone(), &config()) {
                Ok(journal) => return journal,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the journal did not open: {last:?}");
    }

    /// The tags queued in the journal at `prefix`, read from Redis directly.
    fn queued_tags(direct: &mut redis::Connection, prefix: &str) -> BTreeSet<u32> {
        let entries: Vec<(String, BTreeMap<String, Vec<u8>>)> = redis::cmd("XRANGE")
            .arg(format!("{prefix}{{faults}}:stream"))
            .arg("-")
            .arg("+")
            .query(direct)
            .unwrap();
        entries
            .iter()
            .map(|(_, fields)| String::from_utf8_lossy(&fields["k"]).parse().unwrap())
            .collect()
    }

    /// A push Redis ran whose answer came after the caller's wait is refused in doubt, and is
    /// queued; a push refused while Redis is known not to answer (never sent) is refused
    /// plainly, and is not; a push Redis gets late is refused in doubt, and is not queued.
    pub(super) fn in_doubt(server: &Server) {
        let proxy = Proxy::start(server.addr.clone());
        let prefix = format!("bbfaults:{}:in-doubt:", std::process::id());
        // Push 2 must reach Redis within half of it, through the proxy, while the seeded
        // harness's workers load the machine: half a second.
        let timeout = Duration::from_secs(1);
        let options = RedisOptions::new(proxy.url())
            .timeout(timeout)
            .prefix(prefix.clone())
            .consumer("doubt")
            .claim_after(Duration::from_secs(3600));
        let journal = open(&options);
        let mut direct = redis::Client::open(server.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let push = |tag: u32| {
            journal.push(
                Some(tag.to_string()),
                tag.to_le_bytes().to_vec(),
                Duration::ZERO,
            )
        };
        assert!(matches!(push(1), Ok(Pushed::New(_))));
        // Redis runs the push at once; its answer waits in the proxy past the caller's wait.
        proxy.hold_answers();
        let why = push(2).unwrap_err().to_string();
        assert!(why.contains(IN_DOUBT), "{why}");
        // Redis is known not to answer now: refused at once, never sent.
        let why = push(3).unwrap_err().to_string();
        assert!(!why.contains(IN_DOUBT), "{why}");
        // Until the journal finds Redis answering again (a probe every timeout), and a status
        // on its connection has run after every command sent before it (at most 10 s).
        let answering = || {
            for _ in 0..2000 {
                if journal.try_status().is_ok() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            panic!("the journal did not find Redis answering again");
        };
        proxy.release_answers();
        answering();
        // Redis hangs: the push waits in the proxy, and runs after its deadline.
        proxy.hang();
        let why = push(4).unwrap_err().to_string();
        assert!(why.contains(IN_DOUBT), "{why}");
        proxy.resume();
        answering();
        assert_eq!(
            queued_tags(&mut direct, &prefix),
            BTreeSet::from([1, 2]),
            "the push in doubt that Redis ran is queued; the others are not"
        );
        let _: () = redis::cmd("DEL")
            .arg(
                ["stream", "dead", "keys", "tries", "held", "counts"]
                    .map(|what| format!("{prefix}{{faults}}:{what}"))
                    .to_vec(),
            )
            .query(&mut direct)
            .unwrap();
    }

    /// Runs one seed; how many of its pushes were in doubt.
    pub(super) fn run(seed: u64, server: &Server) -> usize {
        let mut run = Run::new(seed, server);
        let steps = 15 + run.rng.below(15);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for _ in 0..steps {
                run.step();
            }
            if run.hung {
                run.resume();
                run.check();
            }
        }));
        let _: Result<(), _> = redis::cmd("DEL")
            .arg(
                [":stream", ":dead", ":keys", ":tries", ":held", ":counts"]
                    .map(|what| run.key(what))
                    .to_vec(),
            )
            .query(&mut run.direct);
        if let Err(panic) = outcome {
            eprintln!("seed {seed} failed after:\n  {}", run.trace.join("\n  "));
            eprintln!(
                "replay it: BREAKERBOX_REPLAY_FAULT_SEED={seed} cargo test -p breakerbox-replay --features redis --test faults"
            );
            std::panic::resume_unwind(panic);
        }
        run.in_doubt
    }
}

#[cfg(feature = "redis")]
#[test]
fn a_push_refused_in_doubt_says_so_and_every_other_refusal_journaled_nothing() {
    let Some(server) = fleet::Server::get() else {
        return;
    };
    fleet::in_doubt(&server);
}

#[cfg(feature = "redis")]
#[test]
fn the_fleet_journal_keeps_its_promises_under_seeded_redis_faults() {
    let Some(server) = fleet::Server::get() else {
        return;
    };
    if let Some(seed) = std::env::var("BREAKERBOX_REPLAY_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        fleet::run(seed, &server);
        return;
    }
    let seeds: u64 = std::env::var("BREAKERBOX_REPLAY_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    // Most of a seed's time is waiting for a hung Redis's timeout: many at once.
    let workers = 32;
    let server = std::sync::Arc::new(server);
    let handles: Vec<_> = (0..workers)
        .map(|worker| {
            let server = server.clone();
            std::thread::spawn(move || {
                (worker..seeds)
                    .step_by(workers as usize)
                    .map(|seed| fleet::run(seed, &server))
                    .sum::<usize>()
            })
        })
        .collect();
    let in_doubt: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    eprintln!("{seeds} seeds: {in_doubt} pushes refused in doubt while Redis was not hung");
}
