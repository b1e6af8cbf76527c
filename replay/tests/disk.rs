//! The disk journal: kept across restarts and `kill -9`, and read back from damaged files.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_replay::{
    DiskJournal, Journal, Replay, ReplayConfig, Settled, Skipped, Take, WallClock,
};
use breakerbox_runtime::{Breaker, Clock, Config, Error, TokioClock};
use tokio::time::sleep;

type Args = (u32, u32, u32, String);

/// Every entry's arguments, oldest first, taken (and settled as replayed) from `journal`.
fn drain<A>(journal: &impl Journal<A>) -> Vec<A> {
    let mut all = Vec::new();
    let now = Duration::from_secs(1 << 40);
    while let Take::Due(taken) = journal.take(now) {
        journal.settle(taken.id, Settled::Replayed, now);
        all.push(taken.args);
    }
    all
}

fn open(path: &Path) -> (DiskJournal<u32>, breakerbox_replay::Recovery) {
    // No TTL to speak of: these entries are journaled at time 0..n.
    let config = ReplayConfig::new().ttl(Duration::from_secs(1 << 41));
    DiskJournal::open("test", path, &config).unwrap()
}

fn written(dir: &Path, n: u32) -> (PathBuf, Vec<u8>) {
    let path = dir.join("journal");
    let (journal, _) = open(&path);
    for i in 0..n {
        journal
            .push(Some(format!("k{i}")), i, Duration::from_secs(u64::from(i)))
            .unwrap();
    }
    drop(journal);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn entries_survive_a_restart_with_their_keys_attempts_and_dead_letters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let config = ReplayConfig::new()
        .attempts(2)
        .ttl(Duration::from_secs(1 << 41));
    {
        let (journal, recovery) = DiskJournal::<String>::open("restart", &path, &config).unwrap();
        assert_eq!(recovery.entries, 0);
        for word in ["a", "b", "c", "d"] {
            journal
                .push(Some(word.into()), word.to_uppercase(), Duration::ZERO)
                .unwrap();
        }
        // "A" replayed at 1 s; "B" failed at 1 s and at 100 s: a dead letter; "C" failed at
        // 100 s, to be tried again at 101 s.
        let replay = |at: u64, how: Settled| {
            let Take::Due(taken) = journal.take(Duration::from_secs(at)) else {
                panic!("nothing due at {at} s")
            };
            journal.settle(taken.id, how, Duration::from_secs(at));
            taken.args
        };
        assert_eq!(replay(1, Settled::Replayed), "A");
        assert_eq!(replay(1, Settled::Failed), "B");
        assert_eq!(replay(100, Settled::Failed), "B");
        assert_eq!(replay(100, Settled::Failed), "C");
        // "D" is being replayed when the process ends: queued again after the restart.
        let Take::Due(d) = journal.take(Duration::from_secs(100)) else {
            panic!("D is due")
        };
        assert_eq!(d.args, "D");
    }
    let (journal, recovery) = DiskJournal::<String>::open("restart", &path, &config).unwrap();
    assert_eq!(
        (
            recovery.entries,
            recovery.dead_letters,
            recovery.skipped.len()
        ),
        (2, 1, 0)
    );
    let entries = journal.entries();
    let keys: Vec<_> = entries.iter().map(|e| e.key.as_deref().unwrap()).collect();
    assert_eq!(keys, ["c", "d"]);
    assert_eq!(entries[0].attempts, 1);
    assert_eq!(entries[0].next_try, Duration::from_secs(101));
    let dead = journal.dead_letters();
    assert_eq!((dead[0].key.as_deref(), dead[0].attempts), (Some("b"), 2));
    // A key queued before the restart still deduplicates after it.
    assert!(matches!(
        journal.push(Some("c".into()), "C again".into(), Duration::ZERO),
        Ok(breakerbox_replay::Pushed::Duplicate(_))
    ));
    assert_eq!(drain(&journal), ["C", "D"]);
}

#[test]
fn a_journal_file_cut_short_anywhere_loses_at_most_the_entry_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = written(dir.path(), 12);
    let whole: Vec<u32> = (0..12).collect();
    // Every cut within the last two frames, and every 7th byte before them.
    let cuts = (0..bytes.len() - 60)
        .step_by(7)
        .chain(bytes.len() - 60..bytes.len());
    for cut in cuts {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let (journal, recovery) = open(&path);
        let got = drain(&journal);
        assert_eq!(
            got,
            whole[..got.len()],
            "cut at {cut}: entries lost or reordered"
        );
        assert!(
            got.len() + 1 >= whole.len() * cut / bytes.len(),
            "cut at {cut}: lost more than the torn frame: {got:?}"
        );
        // A cut inside a frame is reported, as running to the end.
        if let Some(skipped) = recovery.skipped.first() {
            assert!(skipped.at_end, "cut at {cut}: {skipped:?}");
            assert_eq!(skipped.offset + skipped.bytes, cut as u64);
        }
    }
}

#[test]
fn a_flipped_byte_loses_at_most_the_entry_it_is_in_and_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = written(dir.path(), 12);
    for at in (0..bytes.len()).step_by(5) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x41;
        std::fs::write(&path, &damaged).unwrap();
        let (journal, recovery) = open(&path);
        let got = drain(&journal);
        assert!(got.len() >= 11, "byte {at} flipped: {got:?}");
        assert!(got.windows(2).all(|w| w[0] < w[1]), "byte {at}: {got:?}");
        if got.len() == 11 {
            assert_eq!(recovery.skipped.len(), 1, "byte {at}: {recovery:?}");
            let Skipped { bytes: n, .. } = recovery.skipped[0];
            assert!(n > 0 && n < 100, "byte {at}: skipped {n} bytes");
        }
    }
}

#[test]
fn garbage_of_any_kind_opens_as_an_empty_journal_with_what_was_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let mut seed = 0x9e37_79b9_u32;
    let garbage: Vec<u8> = (0..100_000)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as u8
        })
        .chain(*b"BBj1\xff\xff\xff\xff")
        .collect();
    std::fs::write(&path, &garbage).unwrap();
    let (journal, recovery) = open(&path);
    assert_eq!(drain(&journal), Vec::<u32>::new());
    let skipped: u64 = recovery.skipped.iter().map(|s| s.bytes).sum();
    assert_eq!(skipped, garbage.len() as u64);
}

/// The `journal_writer` example, which `cargo test -p breakerbox-replay` builds; built here if
/// only this test target was.
fn writer() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().unwrap().parent().unwrap();
    let writer = profile
        .join("examples")
        .join(format!("journal_writer{}", std::env::consts::EXE_SUFFIX));
    if !writer.exists() {
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "-p",
                "breakerbox-replay",
                "--example",
                "journal_writer",
            ])
            .env("CARGO_TARGET_DIR", profile.parent().unwrap())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "building the journal_writer example failed"
        );
    }
    writer
}

/// Runs the writer until it has acknowledged `at_least` entries, then `kill -9`s it; the
/// entries it acknowledged (its output read to the end, what it printed before it died).
fn run_and_kill(path: &Path, round: u32, at_least: usize) -> BTreeSet<(u32, u32, u32)> {
    let writer = writer();
    let mut child = Command::new(&writer)
        .args([path.to_str().unwrap(), "4", &round.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (built by cargo test)", writer.display()));
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = BTreeSet::new();
    let parse = |line: String| {
        let n: Vec<u32> = line.split(' ').map(|n| n.parse().unwrap()).collect();
        (n[0], n[1], n[2])
    };
    while acked.len() < at_least {
        acked.insert(parse(lines.next().unwrap().unwrap()));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // What it printed before it died is acknowledged too.
    acked.extend(
        lines
            .map_while(Result::ok)
            .filter(|l| l.split(' ').count() == 3)
            .map(parse),
    );
    acked
}

#[test]
fn kill_9_during_writes_loses_no_entry_the_caller_was_told_was_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let mut acked = BTreeSet::new();
    for round in 0..3 {
        acked.extend(run_and_kill(&path, round, 400));
        let config = ReplayConfig::new().max_entries(1 << 20);
        let (journal, recovery) = DiskJournal::<Args>::open("crash", &path, &config).unwrap();
        // Only a torn last frame may be skipped.
        assert!(
            recovery.skipped.iter().all(|s| s.at_end),
            "round {round}: {recovery:?}"
        );
        let held: BTreeSet<(u32, u32, u32)> = {
            // The writer dates entries by the wall clock.
            let now = WallClock.now() + Duration::from_secs(60);
            let mut all = BTreeSet::new();
            let mut taken = Vec::new();
            while let Take::Due(t) = journal.take(now) {
                all.insert((t.args.0, t.args.1, t.args.2));
                taken.push(t.id);
            }
            // Back in the queue for the next round (and the next check).
            for id in taken {
                journal.settle(id, Settled::NotRun, now);
            }
            all
        };
        let missing: Vec<_> = acked.difference(&held).collect();
        assert!(
            missing.is_empty(),
            "round {round}: acknowledged and lost: {missing:?}"
        );
        assert!(held.len() >= acked.len());
    }
}

#[tokio::test(start_paused = true)]
async fn a_restarted_replayer_replays_what_the_last_one_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let breaker = Breaker::new(
        "restart",
        Config::builder().clock(TokioClock).build().unwrap(),
    );
    breaker.force_open();
    {
        let (replay, _) = Replay::builder(&breaker)
            .clock(TokioClock)
            .disk(&path, |_: String| async { Ok::<(), String>(()) })
            .unwrap();
        for word in ["one", "two", "three"] {
            let Err(Error::Rejected(r)) = replay.call(word.to_string(), |_| Ok::<(), String>(()))
            else {
                panic!()
            };
            assert!(r.journaled());
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let (replay, recovery) = Replay::builder(&breaker)
        .clock(TokioClock)
        .disk(&path, move |word: String| {
            log.lock().unwrap().push(word);
            async { Ok::<(), String>(()) }
        })
        .unwrap();
    assert_eq!(recovery.entries, 3);
    breaker.reset();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(*seen.lock().unwrap(), ["one", "two", "three"]);
    assert_eq!(replay.status().entries, 0);
    drop(replay);
    // Replayed entries stay replayed across the next restart.
    let (_, recovery) = DiskJournal::<String>::open("again", &path, &ReplayConfig::new()).unwrap();
    assert_eq!(recovery.entries, 0);
}
