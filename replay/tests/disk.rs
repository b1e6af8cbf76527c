//! The disk journal: kept across restarts and `kill -9`, and read back from damaged files.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_replay::{
    DiskJournal, EntryInfo, Journal, Replay, ReplayConfig, Settled, Take, WallClock,
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
        (recovery.entries, recovery.dead_letters, recovery.damaged),
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

/// Bytes on disk of the journal at `path`: its file and every file beside it whose name starts
/// with its name (SQLite's `-wal`, `-shm` and `-journal`, and any other the journal leaves).
fn files_bytes(path: &Path) -> u64 {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let dir = std::fs::read_dir(path.parent().unwrap()).unwrap();
    dir.filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&name))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// A frame of a hand-made log, as a journal that wrote its arguments into its file verbatim
/// would read one: an entry (id 999) whose arguments are the postcard of `[6, 6, 6]`.
fn frame_inside_an_argument() -> Vec<u8> {
    let body = [0u8, 0xe7, 0x07, 0, 0, 0, 0, 4, 3, 6, 6, 6];
    let len = (body.len() as u32).to_le_bytes();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&len);
    crc.update(&body);
    let mut frame = b"BBj1".to_vec();
    frame.extend_from_slice(&len);
    frame.extend_from_slice(&crc.finalize().to_le_bytes());
    frame.extend_from_slice(&body);
    frame
}

/// A journal of 12 entries whose arguments each carry a well-formed frame, closed; its bytes.
fn journal_with_frames_inside(dir: &Path) -> (PathBuf, Vec<u8>, Vec<Vec<u8>>) {
    let path = dir.join("journal");
    let config = ReplayConfig::new().ttl(Duration::from_secs(1 << 41));
    let (journal, _) = DiskJournal::<Vec<u8>>::open("forge", &path, &config).unwrap();
    let mut journaled = Vec::new();
    for i in 0..12u8 {
        let mut args = vec![i; 40];
        for _ in 0..4 {
            args.extend(frame_inside_an_argument());
        }
        journal.push(None, args.clone(), Duration::ZERO).unwrap();
        journaled.push(args);
    }
    drop(journal);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes, journaled)
}

/// Opens a damaged journal: an error naming the file, or entries that were all journaled.
fn open_damaged(path: &Path, journaled: &[Vec<u8>], what: &str) {
    let config = ReplayConfig::new().ttl(Duration::from_secs(1 << 41));
    match DiskJournal::<Vec<u8>>::open("forge", path, &config) {
        Err(e) => assert!(
            e.to_string().contains(&path.display().to_string()),
            "{what}: the error does not name the file: {e}"
        ),
        Ok((journal, _)) => {
            for args in drain(&journal) {
                assert!(
                    journaled.contains(&args),
                    "{what}: replayed {args:?}, never journaled"
                );
            }
        }
    }
}

#[test]
fn a_damaged_journal_never_replays_an_entry_nobody_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes, journaled) = journal_with_frames_inside(dir.path());
    for cut in (0..bytes.len()).step_by(61) {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        open_damaged(&path, &journaled, &format!("cut at {cut}"));
    }
    for at in (0..bytes.len()).step_by(37) {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x41;
        std::fs::write(&path, &damaged).unwrap();
        open_damaged(&path, &journaled, &format!("byte {at} flipped"));
    }
    // Undamaged, every entry is there.
    std::fs::write(&path, &bytes).unwrap();
    let config = ReplayConfig::new().ttl(Duration::from_secs(1 << 41));
    let (journal, _) = DiskJournal::<Vec<u8>>::open("forge", &path, &config).unwrap();
    assert_eq!(drain(&journal), journaled);
}

#[test]
fn garbage_is_refused_with_an_error_naming_the_file() {
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
        .collect();
    std::fs::write(&path, &garbage).unwrap();
    let Err(e) = DiskJournal::<u32>::open("garbage", &path, &ReplayConfig::new()) else {
        panic!("garbage opened as a journal")
    };
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    // The file is left as it was, for whoever looks into it.
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
}

#[test]
fn a_journal_open_already_in_this_process_refuses_a_second_opener() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let (first, _) = open(&path);
    first.push(None, 1, Duration::ZERO).unwrap();
    // By the same path, another spelling of it, or (on Linux) a symbolic or hard link to it:
    // each refusal says this process holds it.
    let mut again = vec![path.clone(), dir.path().join(".").join("journal")];
    #[cfg(target_os = "linux")]
    {
        let symlink = dir.path().join("symlink");
        std::os::unix::fs::symlink(&path, &symlink).unwrap();
        let hard_link = dir.path().join("hard-link");
        std::fs::hard_link(&path, &hard_link).unwrap();
        again.extend([symlink, hard_link]);
    }
    for again in again {
        let Err(e) = DiskJournal::<u32>::open("second", &again, &ReplayConfig::new()) else {
            panic!("opened twice")
        };
        assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy);
        let message = e.to_string();
        assert!(message.contains(&again.display().to_string()), "{message}");
        assert!(message.contains("this process"), "{message}");
        assert!(!message.contains("another process"), "{message}");
    }
    // The first goes on, and its entries survive it.
    first.push(None, 2, Duration::ZERO).unwrap();
    drop(first);
    let (journal, recovery) = open(&path);
    assert_eq!(recovery.entries, 2);
    assert_eq!(drain(&journal), [1, 2]);
}

#[test]
fn a_journal_in_a_folder_that_does_not_exist_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing").join("journal");
    let Err(e) = DiskJournal::<u32>::open("missing", &path, &ReplayConfig::new()) else {
        panic!("opened in a folder that does not exist")
    };
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    let message = e.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
}

#[allow(dead_code, reason = "the file's other helper is for other tests")]
#[path = "../../runtime/tests/common/alone.rs"]
mod alone;

/// `replay = "disk"` makes its folder, `BREAKERBOX_REPLAY_DIR`: a folder that cannot be made
/// (here, under a file) is an error naming it and the variable. The test runs alone in a
/// process that starts with the variable.
#[test]
fn the_attributes_folder_that_cannot_be_made_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    alone::alone_with_env(
        concat!(
            module_path!(),
            "::the_attributes_folder_that_cannot_be_made_is_an_error_naming_it"
        ),
        &[("BREAKERBOX_REPLAY_DIR", file.join("journals"))],
        || {
            let folder = breakerbox_replay::__private::dir();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _entered = runtime.enter();
            let breaker = Breaker::new("attr-folder", Config::default());
            let started = breakerbox_replay::__private::disk::<u32, _, _>(
                &breaker,
                ReplayConfig::new(),
                |_| async { Ok(()) },
            );
            let Err(e) = started else {
                panic!("a journal started under a file")
            };
            let message = e.to_string();
            assert!(
                message.contains(&folder.display().to_string())
                    && message.contains("BREAKERBOX_REPLAY_DIR"),
                "{message}"
            );
        },
    );
}

#[test]
fn journals_side_by_side_in_one_folder_keep_their_own_entries() {
    let dir = tempfile::tempdir().unwrap();
    let config = ReplayConfig::new()
        .attempts(1)
        .max_entries(1000)
        .ttl(Duration::from_secs(1 << 41));
    let hooks = dir.path().join("hooks.journal");
    let dlq = dir.path().join("hooks.dlq");
    {
        // `hooks` holds 400 dead letters and one entry; `dlq` one entry.
        let (a, _) = DiskJournal::<String>::open("a", &hooks, &config).unwrap();
        for i in 0..400 {
            a.push(None, format!("dead {i}"), Duration::ZERO).unwrap();
            let Take::Due(taken) = a.take(Duration::ZERO) else {
                panic!()
            };
            a.settle(taken.id, Settled::Failed, Duration::ZERO);
        }
        a.push(None, "hooks".into(), Duration::ZERO).unwrap();
        let (b, _) = DiskJournal::<String>::open("b", &dlq, &config).unwrap();
        b.push(None, "dlq".into(), Duration::ZERO).unwrap();
    }
    for round in 0..10 {
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let open_and_check = |path: PathBuf, entries: Vec<EntryInfo>, own: &'static str| {
            let barrier = barrier.clone();
            let config = config.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let (journal, recovery) =
                    DiskJournal::<String>::open("side", &path, &config).unwrap();
                assert_eq!(journal.entries().len(), 1, "round {round}: {recovery:?}");
                let now = Duration::ZERO;
                let Take::Due(taken) = journal.take(now) else {
                    panic!("round {round}: {own} lost its entry")
                };
                assert_eq!(taken.args, own, "round {round}");
                journal.settle(taken.id, Settled::NotRun, now);
                drop(entries);
                journal.dead_letters().len()
            })
        };
        let a = open_and_check(hooks.clone(), Vec::new(), "hooks");
        let b = open_and_check(dlq.clone(), Vec::new(), "dlq");
        assert_eq!(a.join().unwrap(), 400, "round {round}");
        assert_eq!(b.join().unwrap(), 0, "round {round}");
    }
}

#[test]
fn the_files_stay_within_the_bound_of_the_live_entries_while_calls_keep_coming() {
    let dir = tempfile::tempdir().unwrap();
    let bound = |live: u64| (1u64 << 20).max(4 * live);
    // Dropping the oldest for room, and expiring after a TTL, with the breaker open throughout.
    let configs = [
        ReplayConfig::new()
            .max_entries(10)
            .when_full(breakerbox_replay::WhenFull::DropOldest),
        ReplayConfig::new()
            .max_entries(100_000)
            .ttl(Duration::from_secs(10)),
    ];
    for (n, config) in configs.into_iter().enumerate() {
        let path = dir.path().join(format!("journal-{n}"));
        let (journal, _) = DiskJournal::<Vec<u8>>::open("space", &path, &config).unwrap();
        for i in 0..1000u64 {
            journal
                .push(None, vec![i as u8; 4096], Duration::from_secs(i))
                .unwrap();
            let live = journal.status().bytes as u64;
            let size = files_bytes(&path);
            assert!(
                size <= bound(live),
                "journal {n}, call {i}: {size} bytes on disk for {live} live"
            );
        }
        assert!(journal.status().entries <= 11, "journal {n}");
    }
}

/// Bytes this thread has written (Linux's per-thread I/O counts).
#[cfg(target_os = "linux")]
fn written_by_this_thread() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|line| line.strip_prefix("wchar: "))
        .unwrap()
        .parse()
        .unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn a_replay_writes_about_its_entry_however_many_dead_letters_wait() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let config = ReplayConfig::new()
        .attempts(1)
        .max_entries(1000)
        .ttl(Duration::from_secs(1 << 41));
    let (journal, _) = DiskJournal::<Vec<u8>>::open("dead", &path, &config).unwrap();
    let now = Duration::ZERO;
    // About 3 MB of dead letters.
    for i in 0..400u32 {
        journal.push(None, vec![i as u8; 8000], now).unwrap();
        let Take::Due(taken) = journal.take(now) else {
            panic!()
        };
        journal.settle(taken.id, Settled::Failed, now);
    }
    for i in 0..40u32 {
        journal.push(None, vec![i as u8; 100], now).unwrap();
    }
    let before = written_by_this_thread();
    for _ in 0..40 {
        let Take::Due(taken) = journal.take(now) else {
            panic!()
        };
        journal.settle(taken.id, Settled::Replayed, now);
    }
    let written = written_by_this_thread() - before;
    assert!(
        written < 40 * (64 << 10),
        "40 replays wrote {written} bytes beside 3 MB of dead letters"
    );
    assert_eq!(journal.dead_letters().len(), 400);
}

/// The `journal_writer` example, built (once per run of this test binary) so that it is the
/// code under test, not a build left over from another.
fn writer() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let profile = exe.parent().unwrap().parent().unwrap();
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
            profile
                .join("examples")
                .join(format!("journal_writer{}", std::env::consts::EXE_SUFFIX))
        })
        .clone()
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
            .filter(|l| l.split(' ').count() == 3 && !l.starts_with("refused"))
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
        assert_eq!(recovery.damaged, 0, "round {round}");
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
    // The dropped replay's journal is closed.
    tokio::task::yield_now().await;
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
    tokio::task::yield_now().await;
    // Replayed entries stay replayed across the next restart.
    let (_, recovery) = DiskJournal::<String>::open("again", &path, &ReplayConfig::new()).unwrap();
    assert_eq!(recovery.entries, 0);
}

#[test]
fn a_journal_open_in_another_process_refuses_naming_the_file_the_holder_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let mut child = Command::new(writer())
        .args([path.to_str().unwrap(), "1", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Its first entry is journaled: it holds the file.
    lines.next().unwrap().unwrap();
    let opened = DiskJournal::<Args>::open("second", &path, &ReplayConfig::new());
    child.kill().unwrap();
    child.wait().unwrap();
    let Err(e) = opened else {
        panic!("a journal another process holds was opened")
    };
    assert_eq!(e.kind(), std::io::ErrorKind::ResourceBusy);
    let message = e.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    #[cfg(target_os = "linux")]
    assert!(
        message.contains(&format!("process {}", child.id())),
        "{message}"
    );
    // What to do: wait for the holder, or give each process its own file, or share Redis.
    assert!(message.contains("once its holder"), "{message}");
    assert!(message.contains("BREAKERBOX_REPLAY_DIR"), "{message}");
    assert!(message.contains("replay = \"fleet\""), "{message}");
    // Once the holder is gone, it opens.
    assert!(DiskJournal::<Args>::open("third", &path, &ReplayConfig::new()).is_ok());
}

#[cfg(unix)]
#[test]
fn a_write_that_fails_refuses_its_call_and_leaves_no_entry_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    // A file size limit stands for a full disk: past it, writes fail (EFBIG; SIGXFSZ ignored).
    let script = format!(
        "trap '' XFSZ; ulimit -f 1024; exec '{}' '{}' 1 0 20",
        writer().display(),
        path.display()
    );
    let output = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let mut acked = BTreeSet::new();
    let mut refused = BTreeSet::new();
    let mut taken = BTreeSet::new();
    let mut status = None;
    for line in stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let id = |from: usize| -> (u32, u32, u32) {
            let n: Vec<u32> = words[from..].iter().map(|w| w.parse().unwrap()).collect();
            (n[0], n[1], n[2])
        };
        match words[0] {
            "refused" => drop(refused.insert(id(1))),
            "taken" => drop(taken.insert(id(1))),
            "status" => status = Some((words[1].to_owned(), words[2].to_owned())),
            _ => drop(acked.insert(id(0))),
        }
    }
    assert_eq!(refused.len(), 20, "{stdout}");
    assert!(acked.len() > 100, "{} acknowledged", acked.len());
    // In the process: what it holds is what it acknowledged, and every refusal is counted.
    assert_eq!(
        status,
        Some((acked.len().to_string(), "20".to_owned())),
        "entries, refused"
    );
    assert_eq!(taken, acked);
    // And after it, on disk.
    let config = ReplayConfig::new().max_entries(1 << 20);
    let (journal, _) = DiskJournal::<Args>::open("full", &path, &config).unwrap();
    let mut held = BTreeSet::new();
    // The writer dates entries by the wall clock.
    let now = WallClock.now();
    while let Take::Due(t) = journal.take(now) {
        held.insert((t.args.0, t.args.1, t.args.2));
        journal.settle(t.id, Settled::Replayed, now);
    }
    assert_eq!(held, acked);
}

/// Entry "a" dead at 0 s, "b" journaled at 10 s, "a" retried at 50 s; a TTL of 100 s: at
/// 120 s "b" is past its TTL and "a" is not. `by_push`: the next operation is a push, else a
/// take; either expires "b".
fn revived_before_an_older_entry(journal: &dyn Journal<String>, by_push: bool) {
    let at = Duration::from_secs;
    journal.push(None, "a".into(), at(0)).unwrap();
    let Take::Due(a) = journal.take(at(0)) else {
        panic!()
    };
    journal.settle(a.id, Settled::Failed, at(0));
    journal.push(None, "b".into(), at(10)).unwrap();
    assert_eq!(journal.retry_dead_letters(at(50)), 1);
    // "b", journaled at 10 s, is the oldest, though "a" has the lower id.
    assert_eq!(journal.status().oldest, Some(at(10)));
    if by_push {
        journal.push(None, "c".into(), at(120)).unwrap();
        assert_eq!(journal.status().counts.expired, 1);
        assert_eq!(journal.status().oldest, Some(at(50)));
    }
    let Take::Due(taken) = journal.take(at(120)) else {
        panic!("nothing due")
    };
    assert_eq!(taken.args, "a");
    assert_eq!(journal.status().counts.expired, 1);
    journal.settle(taken.id, Settled::Replayed, at(120));
    if by_push {
        let Take::Due(c) = journal.take(at(120)) else {
            panic!("\"c\" is due")
        };
        assert_eq!(c.args, "c");
        journal.settle(c.id, Settled::Replayed, at(120));
    }
    assert!(matches!(journal.take(at(120)), Take::Empty));
    assert_eq!(journal.status().oldest, None);
}

#[test]
fn every_entry_older_than_the_ttl_expires_whatever_was_retried_before_it() {
    let config = ReplayConfig::new()
        .attempts(1)
        .ttl(Duration::from_secs(100));
    let dir = tempfile::tempdir().unwrap();
    for by_push in [false, true] {
        let memory = breakerbox_replay::MemoryJournal::new("ttl", &config);
        revived_before_an_older_entry(&memory, by_push);
        let path = dir.path().join(format!("journal-{by_push}"));
        let (disk, _) = DiskJournal::open("ttl", path, &config).unwrap();
        revived_before_an_older_entry(&disk, by_push);
    }
}

#[test]
fn concurrent_calls_are_each_told_journaled_only_once_kept_and_a_failed_commit_keeps_none_of_its_calls()
 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j");
    let (journal, _) = open(&path);
    let journal = Arc::new(journal);
    // 16 threads, 50 calls each; one commit in the middle fails (a full disk): the calls
    // committed with it are refused, and none of them is kept.
    let told: Arc<Mutex<(BTreeSet<u32>, BTreeSet<u32>)>> = Arc::default();
    let threads: Vec<_> = (0..16u32)
        .map(|t| {
            let (journal, told) = (journal.clone(), told.clone());
            std::thread::spawn(move || {
                for i in 0..50u32 {
                    let n = t * 1000 + i;
                    if n == 8025 {
                        journal.fail_next_write();
                    }
                    let pushed = journal.push(Some(n.to_string()), n, Duration::ZERO);
                    let mut told = told.lock().unwrap();
                    match pushed {
                        Ok(breakerbox_replay::Pushed::New(_)) => told.0.insert(n),
                        Ok(breakerbox_replay::Pushed::Duplicate(_)) => panic!("keys are unique"),
                        Err(_) => told.1.insert(n),
                    };
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let (journaled, refused) = Arc::try_unwrap(told).unwrap().into_inner().unwrap();
    assert_eq!(journaled.len() + refused.len(), 800);
    assert!(!refused.is_empty(), "the failed commit refused its calls");
    let status = journal.status();
    assert_eq!(status.entries, journaled.len());
    assert_eq!(status.counts.queued, journaled.len() as u64);
    assert_eq!(status.counts.refused, refused.len() as u64);
    drop(journal);

    let (journal, recovery) = open(&path);
    assert_eq!(recovery.entries, journaled.len());
    let kept: BTreeSet<u32> = drain(&journal).into_iter().collect();
    assert_eq!(kept, journaled, "exactly the calls told journaled are kept");
}

/// What each call was told: `New`, `Duplicate`, or refused.
fn told(
    answers: &[Result<breakerbox_replay::Pushed, breakerbox_replay::NotJournaled>],
) -> Vec<&'static str> {
    answers
        .iter()
        .map(|answer| match answer {
            Ok(breakerbox_replay::Pushed::New(_)) => "new",
            Ok(breakerbox_replay::Pushed::Duplicate(_)) => "duplicate",
            Err(_) => "refused",
        })
        .collect()
}

#[test]
fn a_failed_group_commit_refuses_the_calls_deduplicated_into_it_and_counts_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j");
    let (journal, _) = open(&path);
    let key = |k: &str| Some(k.to_owned());
    assert_eq!(
        told(&[journal.push(key("kept"), 0, Duration::ZERO)]),
        ["new"]
    );
    // One commit: a new entry under "a", a call deduplicated into it, a call deduplicated into
    // the entry committed before, and a call without a key. It fails.
    journal.fail_next_write();
    let answers = journal.push_together(vec![
        (key("a"), 1, Duration::ZERO),
        (key("a"), 2, Duration::ZERO),
        (key("kept"), 3, Duration::ZERO),
        (None, 4, Duration::ZERO),
    ]);
    // The entry committed before stands for its duplicate; the rest are refused.
    assert_eq!(
        told(&answers),
        ["refused", "refused", "duplicate", "refused"]
    );
    let status = journal.status();
    assert_eq!(status.entries, 1, "{status:?}");
    assert_eq!(status.counts.queued, 1, "{status:?}");
    assert_eq!(status.counts.deduplicated, 1, "{status:?}");
    assert_eq!(status.counts.refused, 3, "{status:?}");
    // A call under "a" is new again.
    assert_eq!(told(&[journal.push(key("a"), 5, Duration::ZERO)]), ["new"]);
    drop(journal);
    let (journal, _) = open(&path);
    assert_eq!(
        drain(&journal),
        [0, 5],
        "exactly the calls told journaled are kept"
    );
}

#[test]
fn a_group_commit_that_drops_its_own_new_entry_for_room_counts_it_once_whether_it_fails_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j");
    let config = ReplayConfig::new()
        .max_entries(1)
        .when_full(breakerbox_replay::WhenFull::DropOldest)
        .ttl(Duration::from_secs(1 << 41));
    let (journal, _) = DiskJournal::<u32>::open("drop-own", &path, &config).unwrap();
    // One commit that fails: the second call drops the first's entry for room.
    journal.fail_next_write();
    let answers = journal.push_together(vec![(None, 1, Duration::ZERO), (None, 2, Duration::ZERO)]);
    assert_eq!(told(&answers), ["refused", "refused"]);
    let status = journal.status();
    assert_eq!(status.entries, 0, "{status:?}");
    assert_eq!(status.counts.queued, 0, "nothing was queued: {status:?}");
    assert_eq!(
        status.counts.dropped, 0,
        "nothing queued was dropped: {status:?}"
    );
    assert_eq!(status.counts.refused, 2, "{status:?}");
    // The same commit, written: both calls journaled, the first then dropped for room.
    let answers = journal.push_together(vec![(None, 3, Duration::ZERO), (None, 4, Duration::ZERO)]);
    assert_eq!(told(&answers), ["new", "new"]);
    let status = journal.status();
    assert_eq!(status.entries, 1, "{status:?}");
    assert_eq!(status.counts.queued, 2, "{status:?}");
    assert_eq!(status.counts.dropped, 1, "{status:?}");
    assert_eq!(status.counts.refused, 2, "{status:?}");
    drop(journal);
    let (journal, _) = DiskJournal::<u32>::open("drop-own", &path, &config).unwrap();
    assert_eq!(drain(&journal), [4]);
}

#[test]
fn a_failed_group_commit_whose_later_call_expires_its_own_new_entry_counts_no_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j");
    let config = ReplayConfig::new().ttl(Duration::from_secs(10));
    let (journal, _) = DiskJournal::<u32>::open("expire-own", &path, &config).unwrap();
    // The second call comes 20 s after the first, past its TTL: it expires the first's entry.
    journal.fail_next_write();
    let answers = journal.push_together(vec![
        (None, 1, Duration::ZERO),
        (None, 2, Duration::from_secs(20)),
    ]);
    assert_eq!(told(&answers), ["refused", "refused"]);
    let status = journal.status();
    assert_eq!(status.entries, 0, "{status:?}");
    assert_eq!(status.counts.queued, 0, "{status:?}");
    assert_eq!(
        status.counts.expired, 0,
        "nothing queued expired: {status:?}"
    );
    assert_eq!(status.counts.refused, 2, "{status:?}");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_replay_lets_go_of_its_journal_file_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let breaker = Breaker::new(
        "reopened",
        Config::builder().clock(TokioClock).build().unwrap(),
    );
    let (replay, _) = Replay::builder(&breaker)
        .clock(TokioClock)
        .disk(&path, |_: String| async { Ok::<(), String>(()) })
        .unwrap();
    breaker.force_open();
    let Err(Error::Rejected(r)) = replay.call("one".to_string(), |_| Ok::<(), String>(())) else {
        panic!()
    };
    assert!(r.journaled());
    // Its replayer waits for the breaker to close.
    sleep(Duration::from_millis(10)).await;
    // A new config for the same file: the old replay goes, the new one opens it, with no
    // turn of the runtime between.
    drop(replay);
    let (replay, recovery) = Replay::builder(&breaker)
        .clock(TokioClock)
        .config(ReplayConfig::new().rate(20))
        .disk(&path, |_: String| async { Ok::<(), String>(()) })
        .expect("the dropped replay still held its journal file");
    assert_eq!(recovery.entries, 1);
    breaker.reset();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(replay.status().counts.replayed, 1);
}

#[test]
fn an_entry_taken_when_its_runtime_shut_down_is_replayed_by_the_next_runtime() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal");
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let runs = Arc::new(AtomicU32::new(0));
    let first = runtime();
    let (breaker, replay) = first.block_on(async {
        let breaker = Breaker::new(
            "runtime-gone-mid-replay",
            Config::builder().clock(TokioClock).build().unwrap(),
        );
        let (log, started) = (seen.clone(), runs.clone());
        let (replay, _) = Replay::builder(&breaker)
            .clock(TokioClock)
            .disk(&path, move |word: String| {
                let first_run = started.fetch_add(1, Ordering::SeqCst) == 0;
                let log = log.clone();
                async move {
                    if first_run {
                        // Still running when its runtime shuts down.
                        std::future::pending::<()>().await;
                    }
                    log.lock().unwrap().push(word);
                    Ok::<(), String>(())
                }
            })
            .unwrap();
        breaker.force_open();
        let Err(Error::Rejected(r)) = replay.call("one".to_string(), |_| Ok::<(), String>(()))
        else {
            panic!()
        };
        assert!(r.journaled());
        breaker.reset();
        while runs.load(Ordering::SeqCst) == 0 {
            sleep(Duration::from_millis(10)).await;
        }
        (breaker, replay)
    });
    drop(first);
    runtime().block_on(async {
        breaker.force_open();
        let Err(Error::Rejected(r)) = replay.call("two".to_string(), |_| Ok::<(), String>(()))
        else {
            panic!()
        };
        assert!(r.journaled());
        breaker.reset();
        for _ in 0..100 {
            sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(*seen.lock().unwrap(), ["one", "two"]);
        assert_eq!(replay.status().entries, 0);
    });
}
