//! `#[circuit_breaker(replay = …)]`: rejected calls journaled and replayed through the
//! breaker once it closes (feature `replay`).

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use breakerbox::{Rejected, State, circuit_breaker, registry};

#[allow(dead_code)]
#[path = "attribute/support.rs"]
mod support;

#[derive(Debug)]
enum SendError {
    Down,
    Rejected(Rejected),
}

impl From<Rejected> for SendError {
    fn from(rejected: Rejected) -> Self {
        SendError::Rejected(rejected)
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Down => f.write_str("the service is down"),
            SendError::Rejected(r) => r.fmt(f),
        }
    }
}

fn journaled<T: fmt::Debug>(result: Result<T, SendError>) -> bool {
    match result {
        Err(SendError::Rejected(rejected)) => rejected.journaled(),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

static SENT: Mutex<Vec<(u32, String)>> = Mutex::new(Vec::new());
static DOWN: AtomicBool = AtomicBool::new(false);

#[circuit_breaker(
    name = "attr-replay-memory",
    failures = 1,
    replay = "memory",
    replay_key = id.to_string(),
    replay_rate = 100
)]
async fn notify(id: u32, mut body: String) -> Result<(), SendError> {
    if DOWN.load(Ordering::SeqCst) {
        return Err(SendError::Down);
    }
    body.push('!');
    SENT.lock().unwrap().push((id, body));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_call_rejected_while_open_is_journaled_and_replayed_once_the_breaker_closes() {
    DOWN.store(true, Ordering::SeqCst);
    assert!(matches!(notify(1, "a".into()).await, Err(SendError::Down)));
    let breaker = registry().get("attr-replay-memory").unwrap();
    assert_eq!(breaker.state(), State::Open);
    assert!(journaled(notify(2, "b".into()).await));
    // The same key: one entry stands for both calls.
    assert!(journaled(notify(2, "b again".into()).await));
    assert!(journaled(notify(3, "c".into()).await));
    DOWN.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(SENT.lock().unwrap().is_empty(), "replayed while open");
    breaker.reset();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        *SENT.lock().unwrap(),
        [(2, "b!".to_owned()), (3, "c!".to_owned())]
    );
    // The replays went through the breaker.
    assert_eq!(breaker.metrics().successes, 2);
}

static RECORDED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

#[circuit_breaker(name = "attr-replay-disk", failures = 1, replay = "disk")]
fn record(id: u64) -> Result<u64, SendError> {
    RECORDED.lock().unwrap().push(id);
    Ok(id)
}

/// The journal's directory comes from `BREAKERBOX_REPLAY_DIR`, read at the first call: the
/// test runs alone in a process that starts with it (`support::alone_with_env`).
#[test]
fn a_disk_replay_journals_to_a_file_under_the_replay_dir() {
    let dir = std::env::temp_dir().join(format!("breakerbox-attr-replay-{}", std::process::id()));
    support::alone_with_env(
        concat!(
            module_path!(),
            "::a_disk_replay_journals_to_a_file_under_the_replay_dir"
        ),
        &[("BREAKERBOX_REPLAY_DIR", &dir)],
        a_disk_replay_journals_to_a_file_under_the_replay_dir_alone,
    );
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn a_disk_replay_journals_to_a_file_under_the_replay_dir_alone() {
    let dir = std::path::PathBuf::from(
        std::env::var_os("BREAKERBOX_REPLAY_DIR").expect("the process starts with the variable"),
    );
    assert_eq!(record(1).unwrap(), 1);
    let breaker = registry().get("attr-replay-disk").unwrap();
    breaker.force_open();
    assert!(journaled(record(2)));
    let file = dir.join("attr-replay-disk.journal");
    assert!(std::fs::metadata(&file).unwrap().len() > 0);
    breaker.reset();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(*RECORDED.lock().unwrap(), [1, 2]);
    let _ = std::fs::remove_dir_all(&dir);
}
