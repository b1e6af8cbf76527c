//! The in-memory journal and its replayer, on tokio's paused time: the breaker and the journal
//! both read `TokioClock`, and the replayer's pacing sleeps on tokio's timers, so each test
//! knows to the millisecond when each entry is replayed.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breakerbox_replay::{Replay, ReplayConfig, WhenFull};
use breakerbox_runtime::{Breaker, Config, Error, RejectReason, State, TokioClock};
use tokio::time::{Instant, sleep};

fn breaker(name: &str, failures: u32) -> Breaker {
    let config = Config::builder()
        .failures(failures)
        .open_for(Duration::from_secs(5))
        .clock(TokioClock)
        .build()
        .unwrap();
    Breaker::new(name, config)
}

/// What the replays saw: each entry's argument and when it ran, from `start`.
#[derive(Clone)]
struct Log {
    start: Arc<Mutex<Instant>>,
    seen: Arc<Mutex<Vec<(u32, Duration)>>>,
}

impl Log {
    fn new() -> Self {
        Log {
            start: Arc::new(Mutex::new(Instant::now())),
            seen: Arc::default(),
        }
    }

    /// Times from now on.
    fn restart(&self) {
        *self.start.lock().unwrap() = Instant::now();
    }

    fn push(&self, n: u32) {
        let at = Instant::now() - *self.start.lock().unwrap();
        self.seen.lock().unwrap().push((n, at));
    }

    fn args(&self) -> Vec<u32> {
        self.seen.lock().unwrap().iter().map(|(n, _)| *n).collect()
    }

    fn times_ms(&self) -> Vec<(u32, u128)> {
        let seen = self.seen.lock().unwrap();
        seen.iter().map(|(n, at)| (*n, at.as_millis())).collect()
    }
}

/// A replay that logs every argument and fails for those `fails` says (each time it says so).
fn replay_with(
    breaker: &Breaker,
    config: ReplayConfig,
    log: &Log,
    fails: impl Fn(u32) -> bool + Send + Sync + 'static,
) -> Replay<u32> {
    let log = log.clone();
    Replay::builder(breaker)
        .clock(TokioClock)
        .config(config)
        .memory(move |n: u32| {
            log.push(n);
            let fail = fails(n);
            async move {
                if fail {
                    Err(format!("{n} failed"))
                } else {
                    Ok(())
                }
            }
        })
        .unwrap()
}

/// Journals `n`: the call is rejected and the rejection says it was journaled.
fn journal(replay: &Replay<u32>, n: u32) -> bool {
    match replay.call(n, |_| Ok::<(), String>(())) {
        Err(Error::Rejected(rejected)) => rejected.journaled(),
        other => panic!("expected a rejection, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_rejected_call_is_journaled_and_the_caller_is_told_so() {
    let breaker = breaker("told", 1);
    let log = Log::new();
    let replay = replay_with(&breaker, ReplayConfig::new(), &log, |_| false);
    breaker.force_open();
    let Err(Error::Rejected(rejected)) = replay.call(7, |_| Ok::<(), String>(())) else {
        panic!("a forced-open breaker ran the call");
    };
    assert!(rejected.journaled());
    assert_eq!(rejected.reason(), RejectReason::ForcedOpen);
    assert_eq!(
        rejected.to_string(),
        "circuit breaker 'told' is forced open; journaled for replay"
    );
    let status = replay.status();
    assert_eq!((status.entries, status.counts.queued), (1, 1));
    // A closed breaker runs the call and journals nothing.
    breaker.reset();
    assert_eq!(replay.call(8, |n| Ok::<u32, String>(n * 2)).unwrap(), 16);
    sleep(Duration::from_secs(1)).await;
    assert_eq!(log.args(), [7]);
}

#[tokio::test(start_paused = true)]
async fn a_call_refused_at_max_concurrent_is_not_journaled() {
    let config = Config::builder()
        .max_concurrent(1)
        .clock(TokioClock)
        .build()
        .unwrap();
    let breaker = Breaker::new("bulkhead", config);
    let log = Log::new();
    let replay = replay_with(&breaker, ReplayConfig::new(), &log, |_| false);
    let held = breaker.try_acquire().unwrap();
    let Err(Error::Rejected(rejected)) = replay.call(1, |_| Ok::<(), String>(())) else {
        panic!("the bulkhead let a second call through");
    };
    assert_eq!(rejected.reason(), RejectReason::BulkheadFull);
    assert!(!rejected.journaled());
    assert_eq!(replay.status().entries, 0);
    drop(held);
}

#[tokio::test(start_paused = true)]
async fn entries_replay_oldest_first_at_most_rate_a_second_once_the_breaker_closes() {
    let breaker = breaker("order", 1);
    let log = Log::new();
    let replay = replay_with(&breaker, ReplayConfig::new().rate(4), &log, |_| false);
    breaker.force_open();
    for n in 0..6 {
        assert!(journal(&replay, n));
    }
    sleep(Duration::from_secs(30)).await;
    assert!(
        log.args().is_empty(),
        "replayed while open: {:?}",
        log.args()
    );

    log.restart();
    breaker.reset();
    sleep(Duration::from_secs(10)).await;
    assert_eq!(
        log.times_ms(),
        [(0, 0), (1, 250), (2, 500), (3, 750), (4, 1000), (5, 1250)]
    );
    let status = replay.status();
    assert_eq!((status.entries, status.counts.replayed), (0, 6));
    assert_eq!(breaker.metrics().successes, 6);
}

#[tokio::test(start_paused = true)]
async fn a_failed_replay_reopens_the_breaker_and_stops_the_pass() {
    let breaker = breaker("stops", 1);
    let log = Log::new();
    let failed_once = Arc::new(AtomicBool::new(false));
    let flag = failed_once.clone();
    let replay = replay_with(&breaker, ReplayConfig::new().rate(10), &log, move |n| {
        n == 2 && !flag.swap(true, Ordering::SeqCst)
    });
    breaker.force_open();
    for n in 0..6 {
        journal(&replay, n);
    }
    let start = Instant::now();
    breaker.reset();
    sleep(Duration::from_secs(1)).await;
    // 0 and 1 replayed, 2 failed: one failure opens this breaker, and nothing else ran.
    assert_eq!(log.args(), [0, 1, 2]);
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(breaker.last_failure().as_deref(), Some("2 failed"));
    assert_eq!(replay.status().entries, 4);
    assert_eq!(replay.entries()[0].attempts, 1);

    // Open for 5 s, then half-open: no replay (a replay is not a probe).
    sleep(Duration::from_secs(10)).await;
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(log.args(), [0, 1, 2]);
    // A probe closes it; the failed entry, its backoff over, comes first again.
    breaker.call(|| Ok::<(), String>(())).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    let closed_at = Instant::now() - start;
    sleep(Duration::from_secs(1)).await;
    assert_eq!(log.args(), [0, 1, 2, 2, 3, 4, 5]);
    let counts = replay.status().counts;
    assert_eq!((counts.replayed, counts.failed), (6, 1));
    assert!(closed_at >= Duration::from_secs(11));
}

#[tokio::test(start_paused = true)]
async fn a_failed_replay_that_leaves_the_breaker_closed_pauses_the_pass_for_its_backoff() {
    let breaker = breaker("pauses", 5);
    let log = Log::new();
    let failed_once = Arc::new(AtomicBool::new(false));
    let flag = failed_once.clone();
    let config = ReplayConfig::new()
        .rate(10)
        .backoff(Duration::from_secs(2), Duration::from_secs(60));
    let replay = replay_with(&breaker, config, &log, move |n| {
        n == 1 && !flag.swap(true, Ordering::SeqCst)
    });
    breaker.force_open();
    for n in 0..3 {
        journal(&replay, n);
    }
    log.restart();
    breaker.reset();
    sleep(Duration::from_secs(5)).await;
    assert_eq!(breaker.state(), State::Closed);
    // 1 fails at 100 ms; nothing runs until its backoff (2 s) is over, then it goes first.
    assert_eq!(log.times_ms(), [(0, 0), (1, 100), (1, 2100), (2, 2200)]);
}

#[tokio::test(start_paused = true)]
async fn an_entry_that_keeps_failing_is_retried_with_backoff_then_dead_lettered() {
    let breaker = breaker("dead", 100);
    let log = Log::new();
    let config = ReplayConfig::new()
        .attempts(3)
        .backoff(Duration::from_secs(1), Duration::from_secs(60));
    let always = Arc::new(AtomicBool::new(true));
    let failing = always.clone();
    let replay = replay_with(&breaker, config, &log, move |_| {
        failing.load(Ordering::SeqCst)
    });
    breaker.force_open();
    journal(&replay, 9);
    log.restart();
    breaker.reset();
    sleep(Duration::from_secs(60)).await;
    // Tried at 0, after 1 s, after 2 s more; then dead.
    assert_eq!(log.times_ms(), [(9, 0), (9, 1000), (9, 3000)]);
    let status = replay.status();
    assert_eq!((status.entries, status.dead_letters), (0, 1));
    assert_eq!((status.counts.failed, status.counts.dead_lettered), (3, 1));
    let dead = replay.dead_letters();
    assert_eq!((dead[0].id, dead[0].attempts), (1, 3));

    // Back in the queue by hand: replayed once the service works.
    always.store(false, Ordering::SeqCst);
    assert_eq!(replay.retry_dead_letters(), 1);
    sleep(Duration::from_secs(1)).await;
    assert_eq!(log.args(), [9, 9, 9, 9]);
    let status = replay.status();
    assert_eq!(
        (status.entries, status.dead_letters, status.counts.replayed),
        (0, 0, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn dead_letters_can_be_dropped() {
    let breaker = breaker("drop-dead", 100);
    let log = Log::new();
    let replay = replay_with(&breaker, ReplayConfig::new().attempts(1), &log, |_| true);
    breaker.force_open();
    journal(&replay, 1);
    journal(&replay, 2);
    breaker.reset();
    sleep(Duration::from_secs(10)).await;
    assert_eq!(replay.status().dead_letters, 2);
    assert_eq!(replay.drop_dead_letters(), 2);
    assert_eq!(replay.status().dead_letters, 0);
}

#[tokio::test(start_paused = true)]
async fn entries_older_than_the_ttl_expire_unreplayed() {
    let breaker = breaker("ttl", 1);
    let log = Log::new();
    let config = ReplayConfig::new().ttl(Duration::from_secs(10));
    let replay = replay_with(&breaker, config, &log, |_| false);
    breaker.force_open();
    for n in 0..3 {
        journal(&replay, n);
    }
    sleep(Duration::from_secs(8)).await;
    journal(&replay, 3);
    journal(&replay, 4);
    sleep(Duration::from_secs(4)).await; // 12 s: the first three are past their TTL
    breaker.reset();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(log.args(), [3, 4]);
    let counts = replay.status().counts;
    assert_eq!((counts.expired, counts.replayed), (3, 2));
}

#[tokio::test(start_paused = true)]
async fn a_full_journal_refuses_new_calls_by_default_and_counts_them() {
    let breaker = breaker("refuse", 1);
    let log = Log::new();
    let replay = replay_with(&breaker, ReplayConfig::new().max_entries(3), &log, |_| {
        false
    });
    breaker.force_open();
    let journaled: Vec<bool> = (0..5).map(|n| journal(&replay, n)).collect();
    assert_eq!(journaled, [true, true, true, false, false]);
    assert_eq!(replay.status().counts.refused, 2);
    breaker.reset();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(log.args(), [0, 1, 2]);
}

#[tokio::test(start_paused = true)]
async fn a_full_journal_that_drops_the_oldest_keeps_the_newest_and_counts_the_dropped() {
    let breaker = breaker("drop", 1);
    let log = Log::new();
    let config = ReplayConfig::new()
        .max_entries(3)
        .when_full(WhenFull::DropOldest);
    let replay = replay_with(&breaker, config, &log, |_| false);
    breaker.force_open();
    assert!((0..5).all(|n| journal(&replay, n)));
    assert_eq!(replay.status().counts.dropped, 2);
    breaker.reset();
    sleep(Duration::from_secs(2)).await;
    assert_eq!(log.args(), [2, 3, 4]);
}

#[tokio::test(start_paused = true)]
async fn the_journal_is_bounded_by_bytes_too() {
    let breaker = breaker("bytes", 1);
    let log = Log::new();
    // A `u32` entry weighs 4 + 64 bytes: two fit in 150.
    let replay = replay_with(&breaker, ReplayConfig::new().max_bytes(150), &log, |_| {
        false
    });
    breaker.force_open();
    let journaled: Vec<bool> = (0..3).map(|n| journal(&replay, n)).collect();
    assert_eq!(journaled, [true, true, false]);
    assert_eq!(replay.status().bytes, 136);
}

#[tokio::test(start_paused = true)]
async fn the_same_key_twice_keeps_one_entry() {
    let breaker = breaker("dedup", 1);
    let log = Log::new();
    let seen = log.clone();
    let replay = Replay::builder(&breaker)
        .clock(TokioClock)
        .key(|n: &u32| format!("order-{}", n % 10))
        .memory(move |n: u32| {
            seen.push(n);
            async { Ok::<(), String>(()) }
        })
        .unwrap();
    breaker.force_open();
    // 11 has 1's key: one entry stands for both, and the caller is told it is journaled.
    assert!(journal(&replay, 1));
    assert!(journal(&replay, 2));
    assert!(journal(&replay, 11));
    let status = replay.status();
    assert_eq!((status.entries, status.counts.deduplicated), (2, 1));
    assert_eq!(replay.entries()[0].key.as_deref(), Some("order-1"));
    breaker.reset();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(log.args(), [1, 2]);
    // Replayed, the key is free again.
    breaker.force_open();
    assert!(journal(&replay, 21));
    assert_eq!(replay.status().entries, 1);
}

#[tokio::test(start_paused = true)]
async fn a_replay_that_panics_is_a_failure_and_corrupts_neither_journal_nor_breaker() {
    let breaker = breaker("panics", 10);
    let log = Log::new();
    let seen = log.clone();
    let calls_of_1 = Arc::new(AtomicU32::new(0));
    let polls_of_2 = Arc::new(AtomicU32::new(0));
    let replay = Replay::builder(&breaker)
        .clock(TokioClock)
        .config(ReplayConfig::new().backoff(Duration::from_secs(1), Duration::from_secs(1)))
        .memory(move |n: u32| {
            seen.push(n);
            // 1 panics when called, 2 when its future is polled, each the first time only.
            if n == 1 && calls_of_1.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("replay of 1 panics");
            }
            let polls_of_2 = polls_of_2.clone();
            async move {
                if n == 2 && polls_of_2.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("replay of 2 panics");
                }
                Ok::<(), String>(())
            }
        })
        .unwrap();
    breaker.force_open();
    for n in 0..4 {
        journal(&replay, n);
    }
    breaker.reset();
    sleep(Duration::from_secs(30)).await;
    assert_eq!(log.args(), [0, 1, 1, 2, 2, 3]);
    let status = replay.status();
    assert_eq!(
        (status.entries, status.counts.replayed, status.counts.failed),
        (0, 4, 2)
    );
    let metrics = breaker.metrics();
    assert_eq!((metrics.successes, metrics.failures), (4, 2));
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(
        breaker.last_failure(),
        None,
        "a closed breaker keeps no trip message"
    );
    // The journal still takes and replays calls.
    breaker.force_open();
    journal(&replay, 5);
    breaker.reset();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(log.args().last(), Some(&5));
}

/// Arguments whose `Clone` panics while `PANIC` is set.
#[derive(Debug)]
struct Fragile(u32);

static PANIC: AtomicBool = AtomicBool::new(false);

impl Clone for Fragile {
    fn clone(&self) -> Self {
        if PANIC.swap(false, Ordering::SeqCst) {
            panic!("Fragile::clone panics");
        }
        Fragile(self.0)
    }
}

#[tokio::test(start_paused = true)]
async fn arguments_whose_clone_panics_fail_that_replay_only() {
    let breaker = breaker("clone-panics", 10);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let replay = Replay::builder(&breaker)
        .clock(TokioClock)
        .config(ReplayConfig::new().backoff(Duration::from_secs(1), Duration::from_secs(1)))
        .memory(move |f: Fragile| {
            log.lock().unwrap().push(f.0);
            async { Ok::<(), String>(()) }
        })
        .unwrap();
    breaker.force_open();
    for n in 0..2 {
        let r = replay.call(Fragile(n), |_| Ok::<(), String>(()));
        assert!(r.unwrap_err().rejected().unwrap().journaled());
    }
    PANIC.store(true, Ordering::SeqCst);
    breaker.reset();
    sleep(Duration::from_secs(10)).await;
    // The first copy panicked: entry 0 failed once and was replayed after its backoff.
    assert_eq!(*seen.lock().unwrap(), [1, 0]);
    let counts = replay.status().counts;
    assert_eq!((counts.failed, counts.replayed), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn a_key_function_that_panics_leaves_the_call_unjournaled() {
    let breaker = breaker("key-panics", 1);
    let replay = Replay::builder(&breaker)
        .clock(TokioClock)
        .key(|n: &u32| {
            assert_ne!(*n, 0, "no key for 0");
            n.to_string()
        })
        .memory(|_: u32| async { Ok::<(), String>(()) })
        .unwrap();
    breaker.force_open();
    assert!(!journal(&replay, 0));
    assert!(journal(&replay, 1));
    assert_eq!(replay.status().entries, 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_replay_stops_its_replayer() {
    let breaker = breaker("dropped", 1);
    let log = Log::new();
    let replay = replay_with(&breaker, ReplayConfig::new(), &log, |_| false);
    breaker.force_open();
    journal(&replay, 1);
    drop(replay);
    breaker.reset();
    sleep(Duration::from_secs(5)).await;
    assert!(log.args().is_empty());
}

#[test]
fn a_replayer_outside_a_tokio_runtime_is_an_error_not_a_panic() {
    let breaker = Breaker::new("no-runtime", Config::default());
    let started = Replay::builder(&breaker).memory(|_: u32| async { Ok::<(), String>(()) });
    assert!(matches!(
        started,
        Err(breakerbox_replay::StartError::NoRuntime)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_replay_refused_by_a_full_bulkhead_waits_and_is_not_counted_as_an_attempt() {
    let config = Config::builder()
        .max_concurrent(1)
        .clock(TokioClock)
        .build()
        .unwrap();
    let breaker = Breaker::new("bulkhead-replay", config);
    let log = Log::new();
    let replay = replay_with(&breaker, ReplayConfig::new().rate(10), &log, |_| false);
    breaker.force_open();
    journal(&replay, 1);
    breaker.reset();
    let held = breaker.try_acquire().unwrap();
    sleep(Duration::from_secs(1)).await;
    assert!(log.args().is_empty());
    // Tried about every 100 ms meanwhile, not in a busy loop, and no attempt counted.
    assert!(
        breaker.metrics().rejected <= 12,
        "{}",
        breaker.metrics().rejected
    );
    assert_eq!(replay.entries()[0].attempts, 0);
    drop(held);
    sleep(Duration::from_millis(200)).await;
    assert_eq!(log.args(), [1]);
}

/// The `Journal` methods a test journal passes to its `inner` memory journal as they are.
macro_rules! forward_to_inner {
    () => {
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
    };
}

/// A journal that, the first time it is asked for an entry, trips the breaker and lets its open
/// time pass: the breaker is half-open by the time the replayer holds the entry.
struct TripsWhileTaking {
    inner: breakerbox_replay::MemoryJournal<u32>,
    breaker: Breaker,
    clock: breakerbox_runtime::ManualClock,
    tripped: AtomicBool,
}

impl breakerbox_replay::Journal<u32> for TripsWhileTaking {
    fn push(
        &self,
        key: Option<String>,
        args: u32,
        now: Duration,
    ) -> Result<breakerbox_replay::Pushed, breakerbox_replay::NotJournaled> {
        self.inner.push(key, args, now)
    }
    fn take(&self, now: Duration) -> breakerbox_replay::Take<u32> {
        if !self.tripped.swap(true, Ordering::SeqCst) {
            self.breaker.try_acquire().unwrap().failure();
            assert_eq!(self.breaker.state(), State::Open);
            self.clock.advance(Duration::from_secs(5));
        }
        self.inner.take(now)
    }
    fn settle(&self, id: u64, how: breakerbox_replay::Settled, now: Duration) {
        self.inner.settle(id, how, now)
    }
    forward_to_inner!();
}

#[tokio::test(start_paused = true)]
async fn a_breaker_that_half_opens_while_an_entry_is_taken_never_gets_the_replay_as_its_probe() {
    let clock = breakerbox_runtime::ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(5))
        .half_open_calls(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let breaker = Breaker::new("replay.probe", config);
    let journal = Arc::new(TripsWhileTaking {
        inner: breakerbox_replay::MemoryJournal::new("replay.probe", &ReplayConfig::new()),
        breaker: breaker.clone(),
        clock,
        tripped: AtomicBool::new(false),
    });
    let now = breakerbox_runtime::Clock::now(&TokioClock);
    breakerbox_replay::Journal::push(&*journal, None, 7, now).unwrap();
    let replayed = Arc::new(AtomicU32::new(0));
    let count = replayed.clone();
    let _replay = Replay::builder(&breaker)
        .clock(TokioClock)
        .journal(journal.clone(), move |_: u32| {
            count.fetch_add(1, Ordering::SeqCst);
            async { Ok::<(), String>(()) }
        })
        .unwrap();
    sleep(Duration::from_secs(1)).await;
    assert_eq!(
        replayed.load(Ordering::SeqCst),
        0,
        "the replay ran as the probe"
    );
    assert_eq!(breaker.state(), State::HalfOpen);
    // The probe's place is free for a caller, and the entry waits for the breaker to close.
    assert!(breaker.try_acquire().unwrap().is_probe());
    assert_eq!(breakerbox_replay::Journal::status(&*journal).entries, 1);
}

/// A paused current-thread runtime of the test's own.
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn a_replay_whose_runtime_shut_down_replays_from_the_runtime_that_journals_next() {
    let log = Log::new();
    let first = paused_runtime();
    let (breaker, replay) = first.block_on(async {
        let breaker = breaker("runtime-gone", 1);
        let replay = replay_with(&breaker, ReplayConfig::new(), &log, |_| false);
        (breaker, replay)
    });
    // The runtime the replayer was started in ends (a `#[tokio::test]`, or a runtime built for
    // start-up); the replay lives on, as the attribute's does in its static.
    drop(first);
    paused_runtime().block_on(async {
        breaker.force_open();
        assert!(journal(&replay, 1));
        breaker.reset();
        sleep(Duration::from_secs(5)).await;
        assert_eq!(log.args(), [1]);
        assert_eq!(replay.status().entries, 0);
    });
}

#[test]
fn an_entry_taken_when_its_runtime_shut_down_is_replayed_by_the_next_runtime() {
    let log = Log::new();
    let first = paused_runtime();
    let started = Arc::new(AtomicU32::new(0));
    let (breaker, replay) = first.block_on(async {
        let breaker = breaker("runtime-gone-mid-replay", 1);
        let seen = log.clone();
        let runs = started.clone();
        let replay = Replay::builder(&breaker)
            .clock(TokioClock)
            .memory(move |n: u32| {
                let first_run = runs.fetch_add(1, Ordering::SeqCst) == 0;
                let seen = seen.clone();
                async move {
                    if first_run {
                        // Still running when its runtime shuts down.
                        std::future::pending::<()>().await;
                    }
                    seen.push(n);
                    Ok::<(), String>(())
                }
            })
            .unwrap();
        breaker.force_open();
        assert!(journal(&replay, 1));
        breaker.reset();
        sleep(Duration::from_millis(10)).await;
        assert_eq!(started.load(Ordering::SeqCst), 1);
        (breaker, replay)
    });
    drop(first);
    paused_runtime().block_on(async {
        breaker.force_open();
        assert!(journal(&replay, 2));
        breaker.reset();
        sleep(Duration::from_secs(5)).await;
        assert_eq!(log.args(), [1, 2]);
        assert_eq!(replay.status().entries, 0);
    });
}

/// Arguments whose `Clone` always panics.
#[derive(Debug)]
struct Unclonable;

impl Clone for Unclonable {
    fn clone(&self) -> Self {
        panic!("Unclonable::clone panics");
    }
}

#[test]
fn many_entries_whose_clone_panics_end_as_failures_without_overflowing_the_stack() {
    use breakerbox_replay::{Journal, MemoryJournal, Take};
    const N: usize = 5_000;
    let config = ReplayConfig::new().max_entries(N).attempts(1);
    let journal = MemoryJournal::<Unclonable>::new("clone-panics-many", &config);
    for _ in 0..N {
        journal.push(None, Unclonable, Duration::ZERO).unwrap();
    }
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // A small stack, as a runtime's worker thread has less to spare than a test's.
    let took = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let took = journal.take(Duration::ZERO);
            (matches!(took, Take::Empty), journal.status())
        })
        .unwrap()
        .join();
    std::panic::set_hook(hook);
    let (empty, status) = took.expect("the take overflowed its stack or panicked");
    assert!(empty);
    assert_eq!((status.entries, status.dead_letters), (0, N));
    assert_eq!(status.counts.failed, N as u64);
}

#[tokio::test(start_paused = true)]
async fn entries_are_replayed_while_the_breaker_is_disabled_as_every_call_runs() {
    let breaker = breaker("disabled", 1);
    let log = Log::new();
    let replay = replay_with(
        &breaker,
        ReplayConfig::new().ttl(Duration::from_secs(60)),
        &log,
        |_| false,
    );
    breaker.force_open();
    assert!(journal(&replay, 1));
    assert!(journal(&replay, 2));
    // Switched off by hand: every call runs, and so do the journaled ones, before they expire.
    breaker.disable();
    assert_eq!(breaker.state(), State::Disabled);
    sleep(Duration::from_secs(2)).await;
    assert_eq!(log.args(), [1, 2]);
    assert_eq!(replay.status().counts.replayed, 2);
}

#[tokio::test(start_paused = true)]
async fn a_ttl_of_zero_is_an_error_at_start_not_calls_told_journaled_and_expired() {
    let breaker = breaker("zero-ttl", 1);
    let started = Replay::builder(&breaker)
        .clock(TokioClock)
        .config(ReplayConfig::new().ttl(Duration::ZERO))
        .memory(|_: u32| async { Ok::<(), String>(()) });
    let Err(e) = started else {
        panic!("a replay whose every entry expires as it is journaled started")
    };
    assert!(matches!(e, breakerbox_replay::StartError::Config(_)));
    let message = e.to_string();
    assert!(
        message.contains("ttl") && message.contains("zero-ttl"),
        "{message}"
    );
}

#[test]
fn an_attribute_start_its_runtime_dropped_before_it_ran_is_started_again_not_waited_for() {
    use breakerbox_replay::__private::ReplaySlot;
    static SLOT: ReplaySlot<u32> = ReplaySlot::new();
    let first = paused_runtime();
    let handle = first.handle().clone();
    drop(first);
    // A call made in the context of a runtime that has shut down (code holding its handle):
    // the start handed to its blocking threads is dropped unrun.
    {
        let _inside = handle.enter();
        let breaker = breaker("start-never-ran", 1);
        SLOT.start(move || {
            Replay::builder(&breaker).memory(|_: u32| async { Ok::<(), String>(()) })
        });
    }
    paused_runtime().block_on(async {
        let waited = tokio::time::timeout(Duration::from_secs(5), SLOT.get_async()).await;
        assert!(
            matches!(waited, Ok(None)),
            "a start that never ran is waited for, for good"
        );
        let breaker = breaker("start-never-ran", 1);
        SLOT.start(move || {
            Replay::builder(&breaker).memory(|_: u32| async { Ok::<(), String>(()) })
        });
        assert!(SLOT.get_async().await.is_some());
    });
}

/// A journal that may block, whose first push waits for `gate`; each take is told on `took`.
struct GatedPush {
    inner: breakerbox_replay::MemoryJournal<u32>,
    gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    took: tokio::sync::mpsc::UnboundedSender<()>,
}

impl breakerbox_replay::Journal<u32> for GatedPush {
    fn push(
        &self,
        key: Option<String>,
        args: u32,
        now: Duration,
    ) -> Result<breakerbox_replay::Pushed, breakerbox_replay::NotJournaled> {
        let gate = self.gate.lock().unwrap().take();
        if let Some(gate) = gate {
            gate.recv().unwrap();
        }
        self.inner.push(key, args, now)
    }
    fn take(&self, now: Duration) -> breakerbox_replay::Take<u32> {
        let take = self.inner.take(now);
        let _ = self.took.send(());
        take
    }
    fn settle(&self, id: u64, how: breakerbox_replay::Settled, now: Duration) {
        self.inner.settle(id, how, now)
    }
    forward_to_inner!();
}

#[tokio::test(start_paused = true)]
async fn a_call_dropped_while_its_journaling_runs_is_replayed_once_its_entry_lands() {
    let breaker = breaker("dropped-while-journaling", 1);
    let (open_gate, gate) = std::sync::mpsc::channel();
    let (took_tx, mut took) = tokio::sync::mpsc::unbounded_channel();
    let journal = Arc::new(GatedPush {
        inner: breakerbox_replay::MemoryJournal::new(
            "dropped-while-journaling",
            &ReplayConfig::new(),
        ),
        gate: Mutex::new(Some(gate)),
        took: took_tx,
    });
    let log = Log::new();
    let seen = log.clone();
    let replay = Replay::builder(&breaker)
        .clock(TokioClock)
        .journal(journal, move |n: u32| {
            seen.push(n);
            async { Ok::<(), String>(()) }
        })
        .unwrap();
    // The replayer's first look: nothing.
    took.recv().await.unwrap();
    breaker.force_open();
    // A call with a timeout around it, given up while its journaling waits on the journal.
    {
        let call = replay.call_async(1, |_| async { Ok::<(), String>(()) });
        tokio::pin!(call);
        tokio::select! {
            biased;
            _ = &mut call => panic!("the journaling did not wait"),
            () = async {} => {}
        }
    }
    // The breaker closes; the replayer looks before the entry lands, and finds nothing.
    breaker.reset();
    took.recv().await.unwrap();
    // The entry lands: the journaling goes on without its caller.
    open_gate.send(()).unwrap();
    sleep(Duration::from_secs(5)).await;
    assert_eq!(log.args(), [1]);
    assert_eq!(replay.status().entries, 0);
}

/// A memory journal that may block, as a disk or fleet journal does, and whose first take
/// waits, once it has taken its entry, until the test lets it return.
struct SlowFirstTake {
    inner: breakerbox_replay::MemoryJournal<u32>,
    taking: Mutex<Option<std::sync::mpsc::Sender<()>>>,
    go: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    given_back: Mutex<Option<std::sync::mpsc::Sender<u64>>>,
}

impl breakerbox_replay::Journal<u32> for SlowFirstTake {
    fn push(
        &self,
        key: Option<String>,
        args: u32,
        now: Duration,
    ) -> Result<breakerbox_replay::Pushed, breakerbox_replay::NotJournaled> {
        self.inner.push(key, args, now)
    }
    fn take(&self, now: Duration) -> breakerbox_replay::Take<u32> {
        let take = self.inner.take(now);
        let first = self.taking.lock().unwrap().take();
        if let Some(taking) = first {
            taking.send(()).unwrap();
            let go = self.go.lock().unwrap().take().unwrap();
            go.recv().unwrap();
        }
        take
    }
    fn settle(&self, id: u64, how: breakerbox_replay::Settled, now: Duration) {
        self.inner.settle(id, how, now);
        if how == breakerbox_replay::Settled::NotRun
            && let Some(told) = &*self.given_back.lock().unwrap()
        {
            let _ = told.send(id);
        }
    }
    forward_to_inner!();
}

#[test]
fn an_entry_a_shut_down_runtime_takes_late_goes_back_to_the_replayer_after_it() {
    let log = Log::new();
    let (taking, taken) = std::sync::mpsc::channel();
    let (go, wait) = std::sync::mpsc::channel();
    let (given_back, back) = std::sync::mpsc::channel();
    let slow = Arc::new(SlowFirstTake {
        inner: breakerbox_replay::MemoryJournal::new("late-take", &ReplayConfig::new()),
        taking: Mutex::new(Some(taking)),
        go: Mutex::new(Some(wait)),
        given_back: Mutex::new(Some(given_back)),
    });
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let (breaker, replay) = first.block_on(async {
        let breaker = breaker("late-take", 1);
        let seen = log.clone();
        let replay = Replay::builder(&breaker)
            .clock(TokioClock)
            .journal(slow.clone(), move |n: u32| {
                seen.push(n);
                async { Ok::<(), String>(()) }
            })
            .unwrap();
        breaker.force_open();
        assert!(journal(&replay, 1));
        breaker.reset();
        // The replayer takes entry 1 on a blocking thread, which waits there.
        tokio::task::spawn_blocking(move || taken.recv_timeout(Duration::from_secs(60)))
            .await
            .unwrap()
            .expect("the replayer takes entry 1");
        (breaker, replay)
    });
    // Its runtime goes while the take is under way.
    first.shutdown_background();
    paused_runtime().block_on(async {
        breaker.force_open();
        assert!(journal(&replay, 2));
        breaker.reset();
        sleep(Duration::from_secs(5)).await;
        assert_eq!(log.args(), [2]);
        // The old take returns now, after the replayer that followed it looked for held
        // entries: entry 1 goes back to the queue, and that replayer replays it.
        go.send(()).unwrap();
        assert_eq!(back.recv_timeout(Duration::from_secs(60)), Ok(1));
        sleep(Duration::from_secs(5)).await;
        assert_eq!(log.args(), [2, 1]);
        assert_eq!(replay.status().entries, 0);
    });
}
