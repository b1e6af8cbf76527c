//! [`DiskJournal`]: entries in an SQLite database on local disk, kept across restarts.

use core::marker::PhantomData;
use core::time::Duration;
use std::collections::HashMap;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::book::{Book, BookTake, Change, Done, Slot};
use crate::config::ReplayConfig;
use crate::journal::{
    EntryInfo, Journal, JournalCounts, JournalStatus, NotJournaled, Pushed, Settled, Take, Taken,
};
use crate::memory::status;
use crate::stats::Sink;

/// A journal in an SQLite database on local disk: it survives a restart, and a call is told
/// it was journaled only once its entry is committed and synced to the disk, so `kill -9` (or
/// a power cut, on a disk that honours syncs) loses no entry a caller was told about.
///
/// - **Format.** One SQLite database (the bundled library, through `rusqlite`) in
///   write-ahead-log mode: a row per entry, queued or dead. Arguments are encoded with
///   postcard, so they need `Serialize + DeserializeOwned`. Each row carries a checksum of its
///   id, key and arguments, seeded with a random value kept in the database: a row that does
///   not check out is dropped (and counted in [`Recovery::damaged`]), never replayed.
/// - **One opener.** The database is locked exclusively while the journal is open: a second
///   journal on the same file, in this process or another, fails to open with an error that
///   names the file (and, on Linux, the process that holds it).
/// - **Space.** Removed entries give their pages back at each commit, and the log is folded
///   into the database every 256 KiB and cut back: the files stay within 1 MiB plus 4× the
///   live entries' bytes. Opening reads the entries' bookkeeping, not their arguments.
/// - **Writes.** Each change is one transaction, under the journal's lock. New entries are
///   committed in groups (the calls that arrive while a commit runs are committed together
///   next, in one transaction synced once), and a call returns only once the commit that
///   holds its entry is synced; replays, failures and expiries are committed without a sync
///   (a process crash keeps them; a power cut may replay such an entry once more). A commit
///   that fails leaves nothing behind: its calls are refused ([`NotJournaled::Io`]), counted
///   `refused` once each (a call deduplicated into one of its new entries too; one
///   deduplicated into an entry committed before stays journaled), and the journal goes on.
pub struct DiskJournal<A> {
    inner: Mutex<Inner>,
    /// Pushes waiting to be committed together.
    batch: Mutex<Batch>,
    /// A batch was committed: its callers' answers are in `Batch::answers`.
    committed: Condvar,
    sink: Sink,
    _args: PhantomData<fn(A) -> A>,
}

/// A push waiting to be committed: its entry, encoded.
struct Job {
    key: Option<String>,
    encoded: Vec<u8>,
    bytes: usize,
    now: Duration,
}

/// The pushes of concurrent callers, committed together: one transaction and one sync for all
/// the pushes that arrived while the last commit ran.
#[derive(Default)]
struct Batch {
    /// Waiting for the next commit, by number.
    waiting: Vec<(u64, Job)>,
    /// A caller is committing a batch now.
    committing: bool,
    /// The answers of committed pushes, by number, until their callers take them.
    answers: HashMap<u64, Result<Pushed, NotJournaled>>,
    /// The next push's number.
    next: u64,
}

/// What opening a journal found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovery {
    /// Entries queued.
    pub entries: usize,
    /// Dead letters.
    pub dead_letters: usize,
    /// Rows whose checksum failed (damaged on disk): dropped, never replayed.
    pub damaged: usize,
}

struct Inner {
    book: Book<()>,
    db: Connection,
    /// The checksum's seed, this database's own.
    seed: [u8; 16],
    /// Whether the connection syncs each commit now.
    syncing: bool,
    /// The next commit fails (a fault injected by a test: a full disk, say).
    fail_next: bool,
    path: PathBuf,
    /// Where the journal is listed among this process's open journals.
    opened: PathBuf,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|path| path != &self.opened);
    }
}

/// The journals open in this process, by canonical path.
static OPEN: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// The log is folded into the database once it holds this many pages (of 4 KiB).
const CHECKPOINT_PAGES: u32 = 64;
/// And cut back to at most this many bytes.
const LOG_LIMIT: u64 = 256 << 10;

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

fn duration(ns: i64) -> Duration {
    Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
}

/// What an entry weighs against `max_bytes`: its encoded arguments and key, and 32 bytes of
/// row and fields.
fn weight(key: Option<&str>, args: &[u8]) -> usize {
    args.len() + key.map_or(0, str::len) + 32
}

/// A row's checksum: of the database's seed, the entry's id, key and arguments.
fn checksum(seed: &[u8; 16], id: u64, key: Option<&str>, args: &[u8]) -> i64 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(seed);
    hasher.update(&id.to_le_bytes());
    match key {
        Some(key) => {
            hasher.update(&[1]);
            hasher.update(&(key.len() as u64).to_le_bytes());
            hasher.update(key.as_bytes());
        }
        None => hasher.update(&[0]),
    }
    hasher.update(args);
    i64::from(hasher.finalize())
}

/// A fresh seed: random enough that no argument can carry a row that checks out.
fn fresh_seed() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut seed = [0; 16];
    for (i, half) in seed.chunks_mut(8).enumerate() {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(i);
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        );
        hasher.write_u32(std::process::id());
        half.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    seed
}

/// An SQLite error as an I/O error that names the journal's file.
fn error(path: &Path, e: rusqlite::Error) -> io::Error {
    let code = e.sqlite_error_code();
    match code {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "the replay journal {} is open already, {}: a journal file has one opener at a time, and it opens once its holder closes it or exits; processes that run at once need a file each (`#[circuit_breaker(replay = \"disk\")]`: a BREAKERBOX_REPLAY_DIR each), or one journal in Redis (`replay = \"fleet\"`)",
                path.display(),
                holder(path)
            ),
        ),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the replay journal {} is damaged or not a journal ({e}): move it aside to start an empty one",
                path.display()
            ),
        ),
        Some(ErrorCode::DiskFull) => io::Error::new(
            io::ErrorKind::StorageFull,
            format!("the replay journal {}: {e}", path.display()),
        ),
        _ => io::Error::other(format!("the replay journal {}: {e}", path.display())),
    }
}

/// Who holds the lock on the file at `path`, as far as the system says.
fn holder(path: &Path) -> String {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(meta), Ok(locks)) = (
            std::fs::metadata(path),
            std::fs::read_to_string("/proc/locks"),
        ) {
            let inode = format!(":{}", meta.ino());
            let me = std::process::id().to_string();
            let mut mine = false;
            for line in locks.lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                // `1: POSIX  ADVISORY  WRITE 1234 08:01:5678 0 EOF`
                if let [_, _, _, _, pid, file, ..] = fields[..]
                    && file.ends_with(&inode)
                {
                    if pid != me {
                        return format!("by process {pid}");
                    }
                    mine = true;
                }
            }
            // Another journal of this process holds it, under another name (a link).
            if mine {
                return "by this process (under another name)".to_owned();
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = path;
    "by another process".to_owned()
}

/// `path`'s place among this process's open journals: its folder's canonical path and its
/// name (the file need not exist yet).
fn canonical(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the replay journal {} names no file", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let dir = std::fs::canonicalize(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "the replay journal {}: its folder {}: {e}",
                path.display(),
                dir.display()
            ),
        )
    })?;
    Ok(dir.join(name))
}

/// One row's bookkeeping as read at open.
struct Row {
    id: u64,
    dead: bool,
    key: Option<String>,
    enqueued: Duration,
    attempts: u32,
    next_try: Duration,
    bytes: usize,
}

impl Inner {
    fn open(path: &Path, config: &ReplayConfig) -> io::Result<(Inner, Recovery)> {
        let opened = canonical(path)?;
        {
            let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
            if open.contains(&opened) {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    format!(
                        "the replay journal {} is open already, by this process: a journal file has one opener at a time (drop the DiskJournal, or every Replay and ReplayHandle over it, before opening it again)",
                        path.display()
                    ),
                ));
            }
            open.push(opened.clone());
        }
        let listed = Listed(&opened);
        let e = |e| error(path, e);
        let db = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(e)?;
        db.busy_timeout(Duration::ZERO).map_err(e)?;
        // Held from the first read to the close: no other connection reads or writes it, and
        // the log's index lives in this process's memory (no `-shm` file).
        db.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(e)?;
        // Pages of removed rows go back to the system at each commit (a new database only).
        db.pragma_update(None, "auto_vacuum", "FULL").map_err(e)?;
        db.pragma_update(None, "journal_mode", "WAL").map_err(e)?;
        db.pragma_update(None, "synchronous", "FULL").map_err(e)?;
        db.pragma_update(None, "wal_autocheckpoint", CHECKPOINT_PAGES)
            .map_err(e)?;
        db.pragma_update(None, "journal_size_limit", LOG_LIMIT as i64)
            .map_err(e)?;
        db.pragma_update(None, "cell_size_check", true).map_err(e)?;
        db.execute_batch(
            "BEGIN IMMEDIATE;
             CREATE TABLE IF NOT EXISTS journal (name TEXT PRIMARY KEY, value BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS entries (
                 id INTEGER PRIMARY KEY,
                 dead INTEGER NOT NULL,
                 key TEXT,
                 enqueued INTEGER NOT NULL,
                 attempts INTEGER NOT NULL,
                 next_try INTEGER NOT NULL,
                 args BLOB NOT NULL,
                 sum INTEGER NOT NULL
             );
             COMMIT;",
        )
        .map_err(e)?;
        let seed = match db
            .query_row("SELECT value FROM journal WHERE name = 'seed'", [], |row| {
                row.get::<_, Vec<u8>>(0)
            })
            .optional()
            .map_err(e)?
        {
            Some(seed) => seed.try_into().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the replay journal {} is damaged (its seed): move it aside to start an empty one",
                        path.display()
                    ),
                )
            })?,
            None => {
                let seed = fresh_seed();
                db.execute(
                    "INSERT INTO journal (name, value) VALUES ('seed', ?1)",
                    [&seed[..]],
                )
                .map_err(e)?;
                seed
            }
        };
        let mut rows = Vec::new();
        let mut damaged = Vec::new();
        {
            let mut select = db
                .prepare(
                    "SELECT id, dead, key, enqueued, attempts, next_try, args, sum FROM entries ORDER BY id",
                )
                .map_err(e)?;
            let mut found = select.query([]).map_err(e)?;
            while let Some(row) = found.next().map_err(e)? {
                let id: i64 = row.get(0).map_err(e)?;
                let key: Option<String> = row.get(2).unwrap_or_default();
                let args = row.get_ref(6).map_err(e)?.as_blob().unwrap_or_default();
                let sum: i64 = row.get(7).unwrap_or(-1);
                let Ok(id) = u64::try_from(id) else {
                    damaged.push(id);
                    continue;
                };
                if checksum(&seed, id, key.as_deref(), args) != sum {
                    damaged.push(id as i64);
                    continue;
                }
                rows.push(Row {
                    id,
                    dead: row.get::<_, i64>(1).unwrap_or(0) != 0,
                    bytes: weight(key.as_deref(), args),
                    key,
                    enqueued: duration(row.get(3).unwrap_or(0)),
                    attempts: u32::try_from(row.get::<_, i64>(4).unwrap_or(0)).unwrap_or(u32::MAX),
                    next_try: duration(row.get(5).unwrap_or(0)),
                });
            }
        }
        for id in &damaged {
            db.execute("DELETE FROM entries WHERE id = ?1", [id])
                .map_err(e)?;
        }
        let mut book = Book::new(config.clone());
        for row in rows {
            book.restore(
                row.id,
                Slot {
                    key: row.key.map(String::into_boxed_str),
                    payload: Some(()),
                    bytes: row.bytes,
                    enqueued: row.enqueued,
                    attempts: row.attempts,
                    next_try: row.next_try,
                    in_flight: false,
                },
                row.dead,
            );
        }
        let recovery = Recovery {
            entries: book.len(),
            dead_letters: book.dead_len(),
            damaged: damaged.len(),
        };
        core::mem::forget(listed);
        Ok((
            Inner {
                book,
                db,
                seed,
                syncing: true,
                fail_next: false,
                path: path.to_owned(),
                opened,
            },
            recovery,
        ))
    }

    /// Writes an operation's changes as one transaction, synced if `sync`; `args` are the
    /// encoded arguments of the entry it put, if it put one.
    /// Writes `changes` in one transaction, the arguments of each new entry from `args` (by
    /// id), synced to the disk before it returns if `sync`.
    fn write(&mut self, changes: &[Change], args: &[(u64, &[u8])], sync: bool) -> io::Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let e = |e| error(&path, e);
        if self.syncing != sync {
            let level = if sync { "FULL" } else { "NORMAL" };
            self.db
                .pragma_update(None, "synchronous", level)
                .map_err(e)?;
            self.syncing = sync;
        }
        let tx = self.db.transaction().map_err(e)?;
        for &change in changes {
            let slot = |id| self.book.slot(id);
            match change {
                Change::Put(id) => {
                    let args = args.iter().find(|(put, _)| *put == id).map(|(_, a)| *a);
                    let (Some(slot), Some(args)) = (slot(id), args) else {
                        continue;
                    };
                    let key = slot.key.as_deref();
                    tx.prepare_cached(
                        "INSERT INTO entries (id, dead, key, enqueued, attempts, next_try, args, sum)
                         VALUES (?1, 0, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )
                    .and_then(|mut insert| {
                        insert.execute(params![
                            id as i64,
                            key,
                            nanos(slot.enqueued),
                            slot.attempts,
                            nanos(slot.next_try),
                            args,
                            checksum(&self.seed, id, key, args),
                        ])
                    })
                    .map_err(e)?;
                }
                Change::Remove(id) | Change::Forget(id) => {
                    tx.prepare_cached("DELETE FROM entries WHERE id = ?1")
                        .and_then(|mut delete| delete.execute([id as i64]))
                        .map_err(e)?;
                }
                Change::Retry(id) | Change::Dead(id) | Change::Revive(id) => {
                    let Some(slot) = slot(id) else { continue };
                    let dead = matches!(change, Change::Dead(_));
                    tx.prepare_cached(
                        "UPDATE entries SET dead = ?2, enqueued = ?3, attempts = ?4, next_try = ?5
                         WHERE id = ?1",
                    )
                    .and_then(|mut update| {
                        update.execute(params![
                            id as i64,
                            dead,
                            nanos(slot.enqueued),
                            slot.attempts,
                            nanos(slot.next_try)
                        ])
                    })
                    .map_err(e)?;
                }
            }
        }
        if std::mem::take(&mut self.fail_next) {
            // Dropping the transaction rolls it back, as a failed commit does.
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "the replay journal {}: a write failed (injected)",
                    path.display()
                ),
            ));
        }
        tx.commit().map_err(e)
    }

    /// Writes changes that need no sync; an error is logged. The book keeps them: a replayed
    /// entry whose removal could not be written is not replayed again by this process, but
    /// comes back at the next open (at least once).
    fn write_through(&mut self, changes: &[Change], sink: &Sink) {
        if let Err(e) = self.write(changes, &[], false) {
            tracing::error!(target: "breakerbox", journal = %sink.name(), error = %e, "a replay journal could not write to its database");
        }
    }

    /// Entry `id`'s arguments, if its row checks out.
    fn args(&self, id: u64) -> io::Result<Option<Vec<u8>>> {
        let row = self
            .db
            .prepare_cached("SELECT key, args, sum FROM entries WHERE id = ?1")
            .and_then(|mut select| {
                select
                    .query_row([id as i64], |row| {
                        Ok((
                            row.get::<_, Option<String>>(0)?,
                            row.get::<_, Vec<u8>>(1)?,
                            row.get::<_, i64>(2)?,
                        ))
                    })
                    .optional()
            })
            .map_err(|e| error(&self.path, e))?;
        Ok(row.and_then(|(key, args, sum)| {
            (checksum(&self.seed, id, key.as_deref(), &args) == sum).then_some(args)
        }))
    }
}

/// Takes a path off this process's open journals unless forgotten (an open that failed).
struct Listed<'a>(&'a Path);

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|path| path != self.0);
    }
}

impl<A: Serialize + DeserializeOwned + Send + 'static> DiskJournal<A> {
    /// Opens (or creates) the journal at `path`, reading back what it holds. `name` labels
    /// its metrics. Rows that do not check out are dropped and counted in the [`Recovery`]
    /// (and logged at `warn`). An error names the file: the file system's, a journal open
    /// already (in this process or another), or a file that is not a journal or is damaged
    /// beyond its rows.
    pub fn open(
        name: &str,
        path: impl AsRef<Path>,
        config: &ReplayConfig,
    ) -> io::Result<(DiskJournal<A>, Recovery)> {
        let path = path.as_ref();
        let (inner, recovery) = Inner::open(path, config)?;
        if recovery.damaged > 0 {
            tracing::warn!(target: "breakerbox", journal = %name, path = %path.display(), damaged = recovery.damaged, "dropped damaged entries of a replay journal");
        }
        Ok((
            DiskJournal {
                inner: Mutex::new(inner),
                batch: Mutex::default(),
                committed: Condvar::new(),
                sink: Sink::new(name),
                _args: PhantomData,
            },
            recovery,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the journal's next write fail as a full disk does (its transaction rolled back).
    /// For fault tests; not public API.
    #[doc(hidden)]
    pub fn fail_next_write(&self) {
        self.lock().fail_next = true;
    }

    /// Counts a call the journal could not take before reaching the book.
    fn refused(&self) {
        let counts = JournalCounts {
            refused: 1,
            ..Default::default()
        };
        self.lock().book.counts.add(&counts);
        self.sink.count(&counts);
    }

    fn batch(&self) -> MutexGuard<'_, Batch> {
        self.batch.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Journals `calls` as one group commit, as the pushes of concurrent callers that arrive
    /// while a commit runs are. For fault tests; not public API.
    #[doc(hidden)]
    pub fn push_together(
        &self,
        calls: Vec<(Option<String>, A, Duration)>,
    ) -> Vec<Result<Pushed, NotJournaled>> {
        let mut answers: Vec<Option<Result<Pushed, NotJournaled>>> = Vec::new();
        let mut jobs = Vec::new();
        for (key, args, now) in calls {
            match self.job(key, args, now) {
                Ok(job) => {
                    jobs.push(job);
                    answers.push(None);
                }
                Err(why) => answers.push(Some(Err(why))),
            }
        }
        let mut committed = self.commit_with_others(jobs).into_iter();
        answers
            .into_iter()
            .map(|answer| {
                answer.unwrap_or_else(|| committed.next().unwrap_or(Err(NotJournaled::Panicked)))
            })
            .collect()
    }

    /// The call's entry, encoded; the arguments dropped outside any lock.
    fn job(&self, key: Option<String>, args: A, now: Duration) -> Result<Job, NotJournaled> {
        // The arguments' `Serialize` and `Drop` are user code: outside the lock.
        let encoded = match catch_unwind(AssertUnwindSafe(|| postcard::to_allocvec(&args))) {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(e)) => {
                self.refused();
                return Err(NotJournaled::Encode(e.to_string()));
            }
            Err(panic) => {
                core::mem::forget(panic);
                self.refused();
                return Err(NotJournaled::Panicked);
            }
        };
        crate::memory::drop_outside(vec![args]);
        let bytes = weight(key.as_deref(), &encoded);
        Ok(Job {
            key,
            encoded,
            bytes,
            now,
        })
    }

    /// Commits `jobs` with the pushes of other callers that wait meanwhile (group commit): the
    /// first caller to find no commit running commits every push waiting, in one transaction
    /// synced once; the others wait for it, and each is answered only once the commit that
    /// holds its entry is synced. `jobs` are committed together, in order; their answers.
    fn commit_with_others(&self, jobs: Vec<Job>) -> Vec<Result<Pushed, NotJournaled>> {
        let mut batch = self.batch();
        let mut numbers = Vec::with_capacity(jobs.len());
        for job in jobs {
            let number = batch.next;
            batch.next += 1;
            batch.waiting.push((number, job));
            numbers.push(number);
        }
        let mut answers: Vec<Option<Result<Pushed, NotJournaled>>> =
            numbers.iter().map(|_| None).collect();
        loop {
            for (number, answer) in numbers.iter().zip(&mut answers) {
                if answer.is_none() {
                    *answer = batch.answers.remove(number);
                }
            }
            if answers.iter().all(Option::is_some) {
                return answers.into_iter().flatten().collect();
            }
            if batch.committing {
                batch = self
                    .committed
                    .wait(batch)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            batch.committing = true;
            let jobs = std::mem::take(&mut batch.waiting);
            drop(batch);
            // No user code runs here; a panic of the database's all the same answers every
            // push of the batch (refused) and leaves the next caller free to commit.
            let numbers: Vec<u64> = jobs.iter().map(|(n, _)| *n).collect();
            let answers =
                catch_unwind(AssertUnwindSafe(|| self.commit(jobs))).unwrap_or_else(|_| {
                    numbers
                        .into_iter()
                        .map(|n| (n, Err(NotJournaled::Panicked)))
                        .collect()
                });
            batch = self.batch();
            batch.committing = false;
            batch.answers.extend(answers);
            self.committed.notify_all();
        }
    }

    /// Pushes `jobs` into the book in order and writes them in one transaction, synced. If
    /// it fails, none of the batch's new entries is in the database nor in the book, and the
    /// counts are as if they had never been: each call that made one, or was deduplicated
    /// into one, is refused and counted `refused` (not `queued` nor `deduplicated`), and a new
    /// entry a later push of the batch dropped for room (or expired) is not counted `dropped`
    /// (`expired`). A call deduplicated into an entry committed before is still journaled:
    /// that entry stands for it.
    fn commit(&self, jobs: Vec<(u64, Job)>) -> Vec<(u64, Result<Pushed, NotJournaled>)> {
        let mut inner = self.lock();
        let mut answers = Vec::with_capacity(jobs.len());
        let mut changes = Vec::new();
        let mut counts = JournalCounts::default();
        let mut puts: Vec<(u64, &[u8])> = Vec::new();
        // What the batch counted of its own new entries being removed again.
        let mut own_removals = JournalCounts::default();
        for (number, job) in &jobs {
            let (answer, done) = inner.book.push(
                job.key.clone().map(String::into_boxed_str),
                (),
                job.bytes,
                job.now,
            );
            // A push expires entries first, then drops for room: its first `expired` removals
            // are expiries, the rest drops.
            let removed = done.changes.iter().filter_map(|change| match change {
                Change::Remove(id) => Some(*id),
                _ => None,
            });
            for (n, id) in removed.enumerate() {
                if puts.iter().any(|(put, _)| *put == id) {
                    if (n as u64) < done.counts.expired {
                        own_removals.expired += 1;
                    } else {
                        own_removals.dropped += 1;
                    }
                }
            }
            if let Ok(Pushed::New(id)) = answer {
                puts.push((id, &job.encoded));
            }
            changes.extend(done.changes);
            counts.add(&done.counts);
            answers.push((*number, answer));
        }
        if let Err(e) = inner.write(&changes, &puts, !puts.is_empty()) {
            // Nothing of the transaction is in the database: nor are the new entries in the
            // book (what they expired or dropped of the entries before stays gone, and is back
            // at the next open).
            let mut undone = own_removals;
            for &(id, _) in &puts {
                inner.book.unput(id);
                undone.queued += 1;
            }
            let mut refused = 0;
            for (_, answer) in &mut answers {
                let refuse = match answer {
                    Ok(Pushed::New(_)) => true,
                    Ok(Pushed::Duplicate(id)) => {
                        let into_batch = puts.iter().any(|(put, _)| put == id);
                        undone.deduplicated += u64::from(into_batch);
                        into_batch
                    }
                    Err(_) => false,
                };
                if refuse {
                    *answer = Err(NotJournaled::Io(io::Error::new(e.kind(), e.to_string())));
                    refused += 1;
                }
            }
            inner.book.counts.sub(&undone);
            counts.sub(&undone);
            let refused = JournalCounts {
                refused,
                ..Default::default()
            };
            inner.book.counts.add(&refused);
            counts.add(&refused);
        }
        drop(inner);
        self.sink.count(&counts);
        answers
    }

    fn after(&self, done: Done<()>) {
        self.sink.count(&done.counts);
    }
}

impl<A: Serialize + DeserializeOwned + Send + 'static> Journal<A> for DiskJournal<A> {
    fn push(&self, key: Option<String>, args: A, now: Duration) -> Result<Pushed, NotJournaled> {
        let job = self.job(key, args, now)?;
        self.commit_with_others(vec![job])
            .pop()
            .unwrap_or(Err(NotJournaled::Panicked))
    }

    fn take(&self, now: Duration) -> Take<A> {
        loop {
            let (id, copy, done) = {
                let mut inner = self.lock();
                let (take, done) = inner.book.take(now);
                inner.write_through(&done.changes, &self.sink);
                let id = match take {
                    BookTake::Due(id) => id,
                    BookTake::Wait(at) => {
                        drop(inner);
                        self.after(done);
                        return Take::Wait(at);
                    }
                    BookTake::Empty => {
                        drop(inner);
                        self.after(done);
                        return Take::Empty;
                    }
                };
                let copy = inner
                    .book
                    .slot(id)
                    .map(|slot| (slot.key.as_deref().map(str::to_owned), slot.attempts));
                (id, copy.map(|copy| (copy, inner.args(id))), done)
            };
            self.after(done);
            let Some(((key, attempts), args)) = copy else {
                return Take::Empty;
            };
            let bytes = match args {
                Ok(Some(bytes)) => bytes,
                Ok(None) => {
                    // Damaged since it was opened (or gone): dropped, never replayed.
                    tracing::error!(target: "breakerbox", journal = %self.sink.name(), id, "a replay journal entry is damaged on disk; dropped");
                    let done = {
                        let mut inner = self.lock();
                        let done = inner.book.drop_entry(id);
                        inner.write_through(&done.changes, &self.sink);
                        done
                    };
                    self.after(done);
                    continue;
                }
                Err(e) => {
                    tracing::error!(target: "breakerbox", journal = %self.sink.name(), id, error = %e, "a replay journal could not read an entry");
                    self.settle(id, Settled::NotRun, now);
                    return Take::Wait(now.saturating_add(Duration::from_secs(1)));
                }
            };
            // `Deserialize` is user code: outside the lock.
            match catch_unwind(AssertUnwindSafe(|| postcard::from_bytes::<A>(&bytes))) {
                Ok(Ok(args)) => {
                    return Take::Due(Taken {
                        id,
                        key,
                        attempts,
                        args,
                    });
                }
                Ok(Err(e)) => {
                    tracing::error!(target: "breakerbox", journal = %self.sink.name(), id, error = %e, "a replay journal entry's arguments do not decode; counted as a failed replay");
                }
                Err(panic) => {
                    core::mem::forget(panic);
                    tracing::error!(target: "breakerbox", journal = %self.sink.name(), id, "a replay journal entry's arguments panicked while decoding; counted as a failed replay");
                }
            }
            self.settle(id, Settled::Failed, now);
        }
    }

    fn settle(&self, id: u64, how: Settled, now: Duration) {
        let done = {
            let mut inner = self.lock();
            let done = inner.book.settle(id, how, now);
            inner.write_through(&done.changes, &self.sink);
            done
        };
        self.after(done);
    }

    fn status(&self) -> JournalStatus {
        status(&self.lock().book)
    }

    fn entries(&self) -> Vec<EntryInfo> {
        self.lock().book.entries()
    }

    fn dead_letters(&self) -> Vec<EntryInfo> {
        self.lock().book.dead_letters()
    }

    fn retry_dead_letters(&self, now: Duration) -> usize {
        let (n, done) = {
            let mut inner = self.lock();
            let (n, done) = inner.book.revive_dead(now);
            inner.write_through(&done.changes, &self.sink);
            (n, done)
        };
        self.after(done);
        n
    }

    fn drop_dead_letters(&self) -> usize {
        let (n, done) = {
            let mut inner = self.lock();
            let (n, done) = inner.book.forget_dead();
            inner.write_through(&done.changes, &self.sink);
            (n, done)
        };
        self.after(done);
        n
    }
}
