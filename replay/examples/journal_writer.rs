//! Journals calls into a disk journal from several threads until it is killed, printing
//! `<round> <thread> <n>` once each call's entry is durable (the journal has told the caller
//! so). The crash test (tests/disk.rs) runs it, `kill -9`s it mid-write, and checks that every
//! printed entry is in the journal. With a fourth argument it stops once that many calls were
//! refused (the disk full, say), printing `refused <round> <thread> <n>` for each, then
//! `status <entries> <refused>` and `taken <round> <thread> <n>` for each entry it holds.
//!
//!   cargo run -p breakerbox-replay --example journal_writer -- PATH THREADS ROUND [REFUSALS]

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use breakerbox_replay::{DiskJournal, Journal, ReplayConfig, Take, WallClock};
use breakerbox_runtime::Clock;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("PATH");
    let threads: u32 = args.next().and_then(|t| t.parse().ok()).unwrap_or(4);
    let round: u32 = args.next().and_then(|r| r.parse().ok()).unwrap_or(0);
    let stop: Option<u32> = args.next().and_then(|s| s.parse().ok());
    let config = ReplayConfig::new().max_entries(1 << 20).max_bytes(1 << 30);
    let (journal, _) = DiskJournal::<(u32, u32, u32, String)>::open("crash", &path, &config)
        .expect("open the journal");
    let journal = Arc::new(journal);
    let refusals = Arc::new(AtomicU32::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|thread| {
            let journal = journal.clone();
            let refusals = refusals.clone();
            std::thread::spawn(move || {
                for n in 0.. {
                    if stop.is_some_and(|stop| refusals.load(Ordering::SeqCst) >= stop) {
                        return;
                    }
                    let args = (round, thread, n, "x".repeat(100));
                    let pushed = journal.push(None, args, WallClock.now());
                    let mut out = std::io::stdout().lock();
                    if pushed.is_ok() {
                        let _ = writeln!(out, "{round} {thread} {n}");
                    } else {
                        refusals.fetch_add(1, Ordering::SeqCst);
                        let _ = writeln!(out, "refused {round} {thread} {n}");
                    }
                    let _ = out.flush();
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.join();
    }
    let status = journal.status();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "status {} {}", status.entries, status.counts.refused);
    while let Take::Due(taken) = journal.take(WallClock.now()) {
        let (r, t, n, _) = taken.args;
        let _ = writeln!(out, "taken {r} {t} {n}");
    }
}
