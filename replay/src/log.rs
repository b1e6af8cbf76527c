//! The disk journal's file: an append-only log of the book's changes, each a checksummed
//! frame, written with group commit; read back, damage and all, at startup.
//!
//! # A frame
//!
//! `MAGIC` (4 bytes), the record's length (u32, little-endian), the CRC-32 of the length's
//! bytes and the record (u32, little-endian), then the record: a [`Record`] in postcard.
//!
//! # Reading a damaged file
//!
//! A frame whose checksum fails, whose length runs past the end, or whose record does not
//! decode is skipped: the reader looks for the next `MAGIC` at which a whole frame checks out,
//! and reports the bytes in between. A torn write at the end (the frame being written when the
//! process died) is a short or failing last frame, so it loses that frame only; a flipped byte
//! elsewhere loses the frame it is in. A lost `Put` is a lost entry; a lost `Remove` replays
//! an entry again (the journal is at-least-once).
//!
//! # Group commit
//!
//! Frames are appended to a buffer in the order of the book's changes (under the journal's
//! lock). A caller that needs them written (and synced) becomes the writer if none is
//! writing: it takes the whole buffer, writes it and calls `fdatasync` outside every lock,
//! then wakes the others. Callers that appended meanwhile are covered by the next writer's one
//! sync: under load, one sync serves every call journaled during the previous one.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

const MAGIC: [u8; 4] = *b"BBj1";
const HEADER: usize = 12;
/// No record is larger: a longer length is damage.
pub(crate) const MAX_RECORD: usize = 64 << 20;

/// One change, as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Record {
    /// An entry: queued (or, followed by `Dead`, a dead letter).
    Put {
        id: u64,
        key: Option<String>,
        enqueued_ns: u64,
        attempts: u32,
        next_try_ns: u64,
        args: Vec<u8>,
    },
    /// Replayed, expired or dropped.
    Remove { id: u64 },
    /// A failed replay.
    Retry {
        id: u64,
        attempts: u32,
        next_try_ns: u64,
    },
    /// To the dead letters.
    Dead { id: u64, attempts: u32 },
    /// Back from the dead letters, due at `at_ns`.
    Revive { id: u64, at_ns: u64 },
    /// A dead letter dropped.
    Forget { id: u64 },
}

/// Appends `record`'s frame to `out`.
pub(crate) fn frame(record: &Record, out: &mut Vec<u8>) {
    let body = postcard::to_allocvec(record).unwrap_or_default();
    let len = (body.len() as u32).to_le_bytes();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&len);
    crc.update(&body);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&body);
}

/// A stretch of the file the reader could not use.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skipped {
    /// Where it starts, in bytes from the file's start.
    pub offset: u64,
    /// How long it is.
    pub bytes: u64,
    /// Whether it runs to the end of the file (a torn last write, typically).
    pub at_end: bool,
}

/// What reading a journal file at startup found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Recovery {
    /// Frames read whole.
    pub records: usize,
    /// Entries queued after reading them.
    pub entries: usize,
    /// Dead letters after reading them.
    pub dead_letters: usize,
    /// What was skipped: damaged or torn frames (empty for a clean file).
    pub skipped: Vec<Skipped>,
}

/// The whole frame at `at`, if one checks out there: its record and its length.
fn frame_at(bytes: &[u8], at: usize) -> Option<(Result<Record, ()>, usize)> {
    let header = bytes.get(at..at.checked_add(HEADER)?)?;
    if header[..4] != MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(header[4..8].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(header[8..12].try_into().ok()?);
    if len > MAX_RECORD {
        return None;
    }
    let body = bytes.get(at + HEADER..(at + HEADER).checked_add(len)?)?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&header[4..8]);
    hasher.update(body);
    if hasher.finalize() != crc {
        return None;
    }
    Some((postcard::from_bytes(body).map_err(drop), HEADER + len))
}

/// Every record of a file's bytes, in order, and what was skipped. Linear in the file's
/// length apart from false `MAGIC`s, each checked once.
pub(crate) fn read(bytes: &[u8]) -> (Vec<Record>, Vec<Skipped>) {
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    let mut at = 0;
    let mut bad_from: Option<usize> = None;
    while at < bytes.len() {
        match frame_at(bytes, at) {
            Some((record, len)) => {
                if let Some(from) = bad_from.take() {
                    skipped.push(Skipped {
                        offset: from as u64,
                        bytes: (at - from) as u64,
                        at_end: false,
                    });
                }
                match record {
                    Ok(record) => records.push(record),
                    // Checked out but does not decode: a record of a later version, say.
                    Err(()) => skipped.push(Skipped {
                        offset: at as u64,
                        bytes: len as u64,
                        at_end: false,
                    }),
                }
                at += len;
            }
            None => {
                bad_from.get_or_insert(at);
                // The next place a frame could start.
                at = match bytes[at + 1..].windows(4).position(|w| w == MAGIC) {
                    Some(next) => at + 1 + next,
                    None => bytes.len(),
                };
            }
        }
    }
    if let Some(from) = bad_from {
        skipped.push(Skipped {
            offset: from as u64,
            bytes: (bytes.len() - from) as u64,
            at_end: true,
        });
    }
    (records, skipped)
}

/// The file and its group commit.
pub(crate) struct Log {
    path: PathBuf,
    state: Mutex<State>,
    done: Condvar,
}

struct State {
    file: Arc<File>,
    /// Frames appended and not yet written.
    pending: Vec<u8>,
    /// Frames appended so far (a sequence number: the last one's).
    appended: u64,
    written: u64,
    synced: u64,
    /// The highest sequence number a caller waits to see synced.
    sync_wanted: u64,
    writing: bool,
    /// A write or sync failed: the log takes nothing more (what it holds may not be on disk).
    failed: Option<String>,
    /// Bytes in the file, written or pending.
    size: u64,
}

impl Log {
    /// Writes `frames` as the whole new file (through a temporary file, synced and renamed
    /// over it), and opens it for appending.
    pub(crate) fn create(path: &Path, frames: &[u8]) -> io::Result<Log> {
        let tmp = path.with_extension("compacting");
        {
            let mut file = File::create(&tmp)?;
            file.write_all(frames)?;
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        sync_dir(path)?;
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(Log {
            path: path.to_owned(),
            state: Mutex::new(State {
                file: Arc::new(file),
                pending: Vec::new(),
                appended: 0,
                written: 0,
                synced: 0,
                sync_wanted: 0,
                writing: false,
                failed: None,
                size: frames.len() as u64,
            }),
            done: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends frames (called under the journal's lock, so the file's order is the book's);
    /// their sequence number.
    pub(crate) fn append(&self, frames: &[u8]) -> u64 {
        let mut state = self.lock();
        if !frames.is_empty() {
            state.pending.extend_from_slice(frames);
            state.size += frames.len() as u64;
            state.appended += 1;
        }
        state.appended
    }

    /// The file's size, written or pending.
    pub(crate) fn size(&self) -> u64 {
        self.lock().size
    }

    pub(crate) fn failed(&self) -> Option<String> {
        self.lock().failed.clone()
    }

    /// Returns once every frame up to `seq` is written to the file (and, with `sync`, synced
    /// to the disk), writing them itself if no one else is.
    pub(crate) fn commit(&self, seq: u64, sync: bool) -> io::Result<()> {
        let mut state = self.lock();
        if sync {
            state.sync_wanted = state.sync_wanted.max(seq);
        }
        loop {
            if state.written >= seq && (!sync || state.synced >= seq) {
                return Ok(());
            }
            if let Some(failed) = &state.failed {
                return Err(io::Error::other(failed.clone()));
            }
            if state.writing {
                state = self
                    .done
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state.writing = true;
            let buffer = std::mem::take(&mut state.pending);
            let upto = state.appended;
            let do_sync = state.sync_wanted > state.synced;
            let file = state.file.clone();
            drop(state);
            let result = (&*file)
                .write_all(&buffer)
                .and_then(|()| if do_sync { file.sync_data() } else { Ok(()) });
            state = self.lock();
            state.writing = false;
            match result {
                Ok(()) => {
                    state.written = upto;
                    if do_sync {
                        state.synced = upto;
                    }
                }
                Err(e) => state.failed = Some(e.to_string()),
            }
            self.done.notify_all();
        }
    }

    /// Replaces the file with `frames` (the book's live state), once no write is under way.
    /// Everything appended so far counts as written and synced: `frames` holds its effect.
    /// Called under the journal's lock, so nothing is appended meanwhile.
    pub(crate) fn compact(&self, frames: &[u8]) -> io::Result<()> {
        let mut state = self.lock();
        while state.writing {
            state = self
                .done
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let tmp = self.path.with_extension("compacting");
        let result = (|| {
            let mut file = File::create(&tmp)?;
            file.write_all(frames)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            sync_dir(&self.path)?;
            OpenOptions::new().append(true).open(&self.path)
        })();
        match result {
            Ok(file) => {
                state.file = Arc::new(file);
                state.pending.clear();
                state.written = state.appended;
                state.synced = state.appended;
                state.size = frames.len() as u64;
                self.done.notify_all();
                Ok(())
            }
            // The old file and its pending frames stand; the next commit writes them.
            Err(e) => Err(e),
        }
    }
}

/// Syncs the directory holding `path`, so a rename into it survives a crash.
fn sync_dir(path: &Path) -> io::Result<()> {
    #[cfg(unix)]
    if let Some(dir) = path.parent() {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<Record> {
        (0..5)
            .map(|id| Record::Put {
                id,
                key: Some(format!("k{id}")),
                enqueued_ns: id * 10,
                attempts: 0,
                next_try_ns: id * 10,
                args: vec![id as u8; 40],
            })
            .collect()
    }

    fn file(records: &[Record]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for record in records {
            starts.push(bytes.len());
            frame(record, &mut bytes);
        }
        (bytes, starts)
    }

    #[test]
    fn a_clean_file_reads_back_every_record() {
        let (bytes, _) = file(&records());
        assert_eq!(read(&bytes), (records(), vec![]));
    }

    #[test]
    fn a_flipped_byte_loses_the_frame_it_is_in_and_reports_it() {
        let (bytes, starts) = file(&records());
        // In each part of the third frame: magic, length, checksum, record.
        for offset in [0, 5, 9, 20] {
            let mut damaged = bytes.clone();
            damaged[starts[2] + offset] ^= 0x20;
            let (read, skipped) = read(&damaged);
            let mut expected = records();
            expected.remove(2);
            assert_eq!(read, expected, "byte {offset} of the frame flipped");
            assert_eq!(
                skipped,
                [Skipped {
                    offset: starts[2] as u64,
                    bytes: (starts[3] - starts[2]) as u64,
                    at_end: false
                }]
            );
        }
    }

    #[test]
    fn a_file_cut_anywhere_loses_at_most_the_frame_being_written() {
        let (bytes, starts) = file(&records());
        let ends: Vec<usize> = starts[1..].iter().copied().chain([bytes.len()]).collect();
        for cut in 0..=bytes.len() {
            let (read, skipped) = read(&bytes[..cut]);
            let whole = ends.iter().filter(|&&end| end <= cut).count();
            assert_eq!(read, records()[..whole], "cut at {cut}");
            let torn = cut != 0 && !ends.contains(&cut);
            let expected: Vec<Skipped> = torn
                .then(|| Skipped {
                    offset: starts[whole] as u64,
                    bytes: (cut - starts[whole]) as u64,
                    at_end: true,
                })
                .into_iter()
                .collect();
            assert_eq!(skipped, expected, "cut at {cut}");
        }
    }
}
