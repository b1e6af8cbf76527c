//! Journals calls into a disk journal from several threads until it is killed, printing
//! `<thread> <n>` once each call's entry is durable (the journal has told the caller so).
//! The crash test (tests/disk.rs) runs it, `kill -9`s it mid-write, and checks that every
//! printed entry is in the journal.
//!
//!   cargo run -p breakerbox-replay --example journal_writer -- PATH THREADS ROUND

use std::io::Write;
use std::sync::Arc;

use breakerbox_replay::{DiskJournal, Journal, ReplayConfig, WallClock};
use breakerbox_runtime::Clock;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("PATH");
    let threads: u32 = args.next().and_then(|t| t.parse().ok()).unwrap_or(4);
    let round: u32 = args.next().and_then(|r| r.parse().ok()).unwrap_or(0);
    let config = ReplayConfig::new().max_entries(1 << 20);
    let (journal, _) = DiskJournal::<(u32, u32, u32, String)>::open("crash", &path, &config)
        .expect("open the journal");
    let journal = Arc::new(journal);
    let workers: Vec<_> = (0..threads)
        .map(|thread| {
            let journal = journal.clone();
            std::thread::spawn(move || {
                for n in 0.. {
                    let args = (round, thread, n, "x".repeat(100));
                    if journal.push(None, args, WallClock.now()).is_ok() {
                        let mut out = std::io::stdout().lock();
                        let _ = writeln!(out, "{round} {thread} {n}");
                        let _ = out.flush();
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.join();
    }
}
