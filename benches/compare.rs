//! breakerbox against the direct call and the Rust peers, case by case.
//!
//! Each criterion group is one case; each function in it one contender. `scripts/bench` runs
//! this and `benches/memory.rs`, and rewrites the table in BENCHMARKS.md from
//! `target/criterion/<case>/<contender>/new/estimates.json`.
//!
//! Smoke run (CI): `cargo bench -p breakerbox-benches --bench compare -- --test` runs every case once.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use breakerbox::{Breaker, Config, Error, State, registry};
use criterion::{Criterion, criterion_group, criterion_main};
use failsafe::CircuitBreaker as _;

mod common;
use common::harness::{batch, one, tower_call, tower_one, tower_two, two};
use common::*;

/// The same protected call under `#[circuit_breaker]`, one function (so one breaker) per case,
/// each configured as the runtime-API contender of its case.
mod attr {
    use super::common::{CallError, fallback, protected};
    use breakerbox::circuit_breaker;

    #[circuit_breaker(name = "bench.attr.closed_ok", failures = 5, open_for = "1h")]
    pub fn closed_ok(x: u64) -> Result<u64, CallError> {
        protected(x)
    }

    #[circuit_breaker(name = "bench.attr.closed_10pct", failures = 5, open_for = "1h")]
    pub fn closed_10pct(x: u64) -> Result<u64, CallError> {
        protected(x)
    }

    #[circuit_breaker(name = "bench.attr.closed_2t", failures = 5, open_for = "1h")]
    pub fn closed_2t(x: u64) -> Result<u64, CallError> {
        protected(x)
    }

    #[circuit_breaker(name = "bench.attr.open_1t", failures = 1, open_for = "1h")]
    pub fn open_1t(x: u64) -> Result<u64, CallError> {
        protected(x)
    }

    #[circuit_breaker(name = "bench.attr.open_2t", failures = 1, open_for = "1h")]
    pub fn open_2t(x: u64) -> Result<u64, CallError> {
        protected(x)
    }

    #[circuit_breaker(
        name = "bench.attr.open_fallback",
        failures = 1,
        open_for = "1h",
        fallback = fallback
    )]
    pub fn open_fallback(x: u64) -> Result<u64, CallError> {
        protected(x)
    }

    #[circuit_breaker(
        name = "bench.attr.rate_time_10s",
        failure_rate = 50,
        window = "10s",
        open_for = "1h"
    )]
    pub fn rate_time_10s(x: u64) -> Result<u64, CallError> {
        protected(x)
    }

    #[circuit_breaker(
        name = "bench.attr.rate_count_100",
        failure_rate = 50,
        window = 100,
        open_for = "1h"
    )]
    pub fn rate_count_100(x: u64) -> Result<u64, CallError> {
        protected(x)
    }

    #[circuit_breaker(name = "bench.attr.async", failures = 5, open_for = "1h")]
    pub async fn async_call(x: u64) -> Result<u64, CallError> {
        protected(x)
    }
}

/// Trips an annotated function's breaker (its config opens on the first failure).
fn tripped_attr(name: &str, f: fn(u64) -> Result<u64, CallError>) {
    let _ = f(FAIL);
    let b = registry()
        .get(name)
        .expect("the attribute registered its breaker");
    assert_eq!(b.state(), State::Open, "{name}");
}

/// Checks an annotated function's breaker did not trip (absent: its case was filtered out).
fn assert_attr_closed(name: &str) {
    if let Some(b) = registry().get(name) {
        assert_closed(&b);
    }
}

/// The permit API, as a hand-written caller uses it.
#[inline(always)]
fn bb_permit(breaker: &Breaker, x: u64) -> Result<u64, CallError> {
    let permit = breaker.try_acquire()?;
    let result = protected(x);
    match &result {
        Ok(_) => permit.success(),
        Err(e) => permit.failure_with(e),
    }
    result
}

fn assert_closed(breaker: &Breaker) {
    assert_eq!(breaker.state(), State::Closed, "{} tripped", breaker.name());
}

/// Closed, one thread: all successes (`closed_ok`) and one failure in ten (`closed_10pct`).
fn closed(c: &mut Criterion) {
    for (case, period) in [("closed_ok", 0), ("closed_10pct", 10)] {
        let inputs = || Inputs::every(period);
        let mut g = c.benchmark_group(case);
        one(&mut g, "direct", inputs(), protected);

        let b = bb_consecutive(&format!("{case}.call"));
        one(&mut g, "bb_call", inputs(), |x| b.call(|| protected(x)));
        assert_closed(&b);

        let b = bb_consecutive(&format!("{case}.permit"));
        one(&mut g, "bb_permit", inputs(), |x| bb_permit(&b, x));
        assert_closed(&b);

        // The handle `#[circuit_breaker]` resolves to: a registry breaker, no reference count.
        let b = registry().get_or_create(&format!("{case}.call_static"), bb_consecutive_config);
        one(&mut g, "bb_call_static", inputs(), |x| {
            b.call(|| protected(x))
        });
        assert_closed(&b);

        // Each function item passed as itself: an `if` choosing between the two would coerce
        // them to one `fn` pointer, and the row would pay an indirect call no other row pays.
        if period == 0 {
            one(&mut g, "bb_attr", inputs(), attr::closed_ok);
        } else {
            one(&mut g, "bb_attr", inputs(), attr::closed_10pct);
        }
        assert_attr_closed(&format!("bench.attr.{case}"));

        let fs = failsafe_consecutive(5);
        one(&mut g, "failsafe_consecutive", inputs(), |x| {
            fs.call(|| protected(x))
        });
        assert!(fs.is_call_permitted(), "failsafe tripped");

        let fs = failsafe_default();
        one(&mut g, "failsafe_default", inputs(), |x| {
            fs.call(|| protected(x))
        });
        assert!(fs.is_call_permitted(), "failsafe (default) tripped");

        let rc = recloser(100);
        one(&mut g, "recloser", inputs(), |x| rc.call(|| protected(x)));
        assert!(rc.call(|| Ok::<_, ()>(())).is_ok(), "recloser tripped");

        tower_one(&mut g, "tower_service_fn", inputs(), tower_base());
        // A control: the direct call with a shared handle cloned and dropped around it (two
        // locked read-modify-writes), as the tower layer's owned permit clones a `Breaker::new`
        // breaker's handle; a registry breaker's handle has no count.
        let handle = std::sync::Arc::new(0u64);
        one(&mut g, "handle_clone_drop", inputs(), |x| {
            let h = std::hint::black_box(handle.clone());
            drop(h);
            protected(x)
        });
        // breakerbox's own layer over the same `service_fn`, read against `tower_service_fn`.
        let b = bb_consecutive(&format!("{case}.tower"));
        tower_one(&mut g, "bb_tower", inputs(), bb_tower(&b));
        assert_closed(&b);
        let b = registry().get_or_create(&format!("{case}.tower_static"), bb_consecutive_config);
        tower_one(&mut g, "bb_tower_static", inputs(), bb_tower(&b));
        assert_closed(&b);
        let svc = tower_consecutive(5);
        tower_one(&mut g, "tower_resilience", inputs(), svc.clone());
        assert!(!svc.is_open(), "tower-resilience tripped");
        g.finish();
    }
}

/// Closed, all successes, two threads on one shared breaker.
fn closed_2t(c: &mut Criterion) {
    let mut g = c.benchmark_group("closed_2t");
    two(&mut g, "direct", |_| batch(Inputs::all_ok(), protected));

    let b = bb_consecutive("closed_2t.call");
    let h = b.clone();
    two(&mut g, "bb_call", move |_| {
        let b = h.clone();
        batch(Inputs::all_ok(), move |x| b.call(|| protected(x)))
    });
    assert_closed(&b);

    let b = bb_consecutive("closed_2t.permit");
    let h = b.clone();
    two(&mut g, "bb_permit", move |_| {
        let b = h.clone();
        batch(Inputs::all_ok(), move |x| bb_permit(&b, x))
    });
    assert_closed(&b);

    // A control: the same on two threads, each with a breaker of its own. What `bb_call` costs
    // beyond this is the sharing; what this costs beyond one thread is the machine (two busy
    // vCPUs slow each other down here even on code that shares nothing).
    two(&mut g, "bb_call_unshared", move |i| {
        let b = bb_consecutive(&format!("closed_2t.unshared.{i}"));
        batch(Inputs::all_ok(), move |x| b.call(|| protected(x)))
    });

    two(&mut g, "bb_attr", |_| {
        batch(Inputs::all_ok(), attr::closed_2t)
    });
    assert_attr_closed("bench.attr.closed_2t");

    let fs = failsafe_consecutive(5);
    two(&mut g, "failsafe_consecutive", move |_| {
        let fs = fs.clone();
        batch(Inputs::all_ok(), move |x| fs.call(|| protected(x)))
    });

    let fs = failsafe_default();
    two(&mut g, "failsafe_default", move |_| {
        let fs = fs.clone();
        batch(Inputs::all_ok(), move |x| fs.call(|| protected(x)))
    });

    let rc = std::sync::Arc::new(recloser(100));
    two(&mut g, "recloser", move |_| {
        let rc = rc.clone();
        batch(Inputs::all_ok(), move |x| rc.call(|| protected(x)))
    });

    tower_two(&mut g, "tower_service_fn", tower_base());
    tower_two(&mut g, "tower_resilience", tower_consecutive(5));
    g.finish();
}

/// Trips each contender (one failure opens it for an hour) and returns it.
fn tripped_bb(name: &str) -> Breaker {
    let b = Breaker::new(name, bb_trip_once_config());
    let _ = b.call(|| protected(FAIL));
    assert_eq!(b.state(), State::Open);
    b
}

/// A tripped `Breaker::new` breaker whose first thread (the one that tripped it) stays alive
/// until the returned sender is dropped, so that the caller's thread counts on a later line.
fn tripped_bb_elsewhere(name: &str) -> (Breaker, std::sync::mpsc::Sender<()>) {
    let b = Breaker::new(name, bb_trip_once_config());
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let first = b.clone();
    std::thread::spawn(move || {
        let _ = first.call(|| protected(FAIL));
        drop(first);
        ready_tx.send(()).unwrap();
        let _ = rx.recv();
    });
    ready.recv().unwrap();
    assert_eq!(b.state(), State::Open);
    (b, tx)
}

/// A tripped breaker from the registry: the handle `#[circuit_breaker]` uses (no reference
/// count to touch).
fn tripped_bb_static(name: &str) -> Breaker {
    let b = registry().get_or_create(name, bb_trip_once_config);
    let _ = b.call(|| protected(FAIL));
    assert_eq!(b.state(), State::Open);
    b
}

fn tripped_failsafe() -> FailsafeConsecutive {
    let fs = failsafe_consecutive(1);
    let _ = fs.call(|| protected(FAIL));
    assert!(!fs.is_call_permitted());
    fs
}

fn tripped_failsafe_default() -> impl failsafe::CircuitBreaker + Clone + Send + Sync + 'static {
    let fs = failsafe_default();
    for _ in 0..5 {
        let _ = fs.call(|| protected(FAIL));
    }
    assert!(!fs.is_call_permitted());
    fs
}

fn tripped_recloser() -> recloser::Recloser {
    // Its ring must fill before it judges: one call more than its length.
    let rc = recloser(1);
    for _ in 0..2 {
        let _ = rc.call(|| protected(FAIL));
    }
    assert!(matches!(
        rc.call(|| protected(1)),
        Err(recloser::Error::Rejected)
    ));
    rc
}

fn tripped_tower() -> TowerBreaker {
    let mut svc = tower_consecutive(1);
    let rt = tokio_rt();
    let _ = rt.block_on(tower_call(&mut svc, FAIL));
    assert!(svc.is_open());
    svc
}

/// Open: every call rejected, one and two threads.
fn open(c: &mut Criterion) {
    let mut g = c.benchmark_group("open_1t");
    let all = Inputs::all_ok;
    one(&mut g, "direct", all(), protected);
    // A control: the direct call with one full barrier before it (a store, `fence(SeqCst)`, a
    // load): what one locked instruction adds, as a `Breaker::new` breaker's rejection pays two
    // (its report's reference count, taken and given back); a registry breaker's pays none.
    let (line, flag) = (AtomicU64::new(0), AtomicU64::new(0));
    one(&mut g, "full_barrier", all(), |x| {
        line.store(x, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        std::hint::black_box(flag.load(Ordering::Relaxed));
        protected(x)
    });
    let b = tripped_bb("open_1t.call");
    one(&mut g, "bb_call", all(), |x| b.call(|| protected(x)));
    let b = tripped_bb_static("open_1t.call_static");
    one(&mut g, "bb_call_static", all(), |x| b.call(|| protected(x)));
    // A control: the same rejection on a thread that is not the breaker's first, whose counts
    // sit on a later thread's line, as the counts of both of `open_2t`'s threads do.
    let (b, _first) = tripped_bb_elsewhere("open_1t.call_second");
    one(&mut g, "bb_call_second_thread", all(), |x| {
        b.call(|| protected(x))
    });
    let b = tripped_bb("open_1t.permit");
    one(&mut g, "bb_permit", all(), |x| bb_permit(&b, x));
    tripped_attr("bench.attr.open_1t", attr::open_1t);
    one(&mut g, "bb_attr", all(), attr::open_1t);
    let b = tripped_bb("open_1t.is_err");
    // What the rejection costs when the caller only looks at it: no `Rejected` kept.
    one(&mut g, "bb_try_acquire_is_err", all(), |_| {
        b.try_acquire().is_err()
    });
    let fs = tripped_failsafe();
    one(&mut g, "failsafe_consecutive", all(), |x| {
        fs.call(|| protected(x))
    });
    let fs = tripped_failsafe_default();
    one(&mut g, "failsafe_default", all(), |x| {
        fs.call(|| protected(x))
    });
    let rc = tripped_recloser();
    one(&mut g, "recloser", all(), |x| rc.call(|| protected(x)));
    tower_one(&mut g, "tower_service_fn", all(), tower_base());
    let b = tripped_bb("open_1t.tower");
    tower_one(&mut g, "bb_tower", all(), bb_tower(&b));
    let b = tripped_bb_static("open_1t.tower_static");
    tower_one(&mut g, "bb_tower_static", all(), bb_tower(&b));
    tower_one(&mut g, "tower_resilience", all(), tripped_tower());
    g.finish();

    let mut g = c.benchmark_group("open_2t");
    two(&mut g, "direct", |_| batch(Inputs::all_ok(), protected));
    for (id, b) in [
        ("bb_call", tripped_bb("open_2t.call")),
        ("bb_call_static", tripped_bb_static("open_2t.call_static")),
    ] {
        two(&mut g, id, move |_| {
            let b = b.clone();
            batch(Inputs::all_ok(), move |x| b.call(|| protected(x)))
        });
    }
    let b = tripped_bb("open_2t.permit");
    two(&mut g, "bb_permit", move |_| {
        let b = b.clone();
        batch(Inputs::all_ok(), move |x| bb_permit(&b, x))
    });
    tripped_attr("bench.attr.open_2t", attr::open_2t);
    two(&mut g, "bb_attr", |_| {
        batch(Inputs::all_ok(), attr::open_2t)
    });
    let fs = tripped_failsafe();
    two(&mut g, "failsafe_consecutive", move |_| {
        let fs = fs.clone();
        batch(Inputs::all_ok(), move |x| fs.call(|| protected(x)))
    });
    let fs = tripped_failsafe_default();
    two(&mut g, "failsafe_default", move |_| {
        let fs = fs.clone();
        batch(Inputs::all_ok(), move |x| fs.call(|| protected(x)))
    });
    let rc = std::sync::Arc::new(tripped_recloser());
    two(&mut g, "recloser", move |_| {
        let rc = rc.clone();
        batch(Inputs::all_ok(), move |x| rc.call(|| protected(x)))
    });
    tower_two(&mut g, "tower_service_fn", tower_base());
    tower_two(&mut g, "tower_resilience", tripped_tower());
    g.finish();
}

/// Open, and the rejection answered by a fallback, as a caller writes it with each crate.
fn open_fallback(c: &mut Criterion) {
    let mut g = c.benchmark_group("open_fallback");
    let all = Inputs::all_ok;
    // The baseline: what the fallback itself costs.
    one(&mut g, "direct", all(), fallback);
    let b = tripped_bb("open_fallback.call");
    one(&mut g, "bb_call", all(), |x| {
        match b.call(|| protected(x)) {
            Err(Error::Rejected(_)) => fallback(x),
            Err(Error::Inner(e)) => Err(e),
            Ok(v) => Ok(v),
        }
    });
    let b = tripped_bb_static("open_fallback.call_static");
    one(&mut g, "bb_call_static", all(), |x| {
        match b.call(|| protected(x)) {
            Err(Error::Rejected(_)) => fallback(x),
            Err(Error::Inner(e)) => Err(e),
            Ok(v) => Ok(v),
        }
    });
    let b = tripped_bb("open_fallback.permit");
    one(&mut g, "bb_permit", all(), |x| match b.try_acquire() {
        Err(_) => fallback(x),
        Ok(permit) => {
            let result = protected(x);
            match &result {
                Ok(_) => permit.success(),
                Err(e) => permit.failure_with(e),
            }
            result
        }
    });
    tripped_attr("bench.attr.open_fallback", attr::open_fallback);
    one(&mut g, "bb_attr", all(), attr::open_fallback);
    let fs = tripped_failsafe();
    one(&mut g, "failsafe_consecutive", all(), |x| {
        match fs.call(|| protected(x)) {
            Err(failsafe::Error::Rejected) => fallback(x),
            Err(failsafe::Error::Inner(e)) => Err(e),
            Ok(v) => Ok(v),
        }
    });
    let rc = tripped_recloser();
    one(&mut g, "recloser", all(), |x| {
        match rc.call(|| protected(x)) {
            Err(recloser::Error::Rejected) => fallback(x),
            Err(recloser::Error::Inner(e)) => Err(e),
            Ok(v) => Ok(v),
        }
    });
    tower_one(&mut g, "tower_service_fn", all(), tower_base());
    let svc = tripped_tower().with_fallback(|x: u64| Box::pin(async move { fallback(x) }));
    tower_one(&mut g, "tower_resilience", all(), svc);
    g.finish();
}

/// Closed, all successes, under a failure-rate policy: over 10 s in buckets, and over the last
/// 100 calls.
fn rate(c: &mut Criterion) {
    let mut g = c.benchmark_group("rate_time_10s");
    let all = Inputs::all_ok;
    one(&mut g, "direct", all(), protected);
    let b = Breaker::new("rate_time_10s.call", bb_time_window_config());
    one(&mut g, "bb_call", all(), |x| b.call(|| protected(x)));
    assert_closed(&b);
    let b = Breaker::new("rate_time_10s.permit", bb_time_window_config());
    one(&mut g, "bb_permit", all(), |x| bb_permit(&b, x));
    one(&mut g, "bb_attr", all(), attr::rate_time_10s);
    assert_attr_closed("bench.attr.rate_time_10s");
    let fs = failsafe_time_window();
    one(&mut g, "failsafe_rate", all(), |x| fs.call(|| protected(x)));
    tower_one(&mut g, "tower_service_fn", all(), tower_base());
    tower_one(&mut g, "tower_resilience", all(), tower_time_window());
    g.finish();

    let mut g = c.benchmark_group("rate_count_100");
    one(&mut g, "direct", all(), protected);
    let b = Breaker::new("rate_count_100.call", bb_count_window_config());
    one(&mut g, "bb_call", all(), |x| b.call(|| protected(x)));
    assert_closed(&b);
    let b = Breaker::new("rate_count_100.permit", bb_count_window_config());
    one(&mut g, "bb_permit", all(), |x| bb_permit(&b, x));
    one(&mut g, "bb_attr", all(), attr::rate_count_100);
    assert_attr_closed("bench.attr.rate_count_100");
    let rc = recloser(100);
    one(&mut g, "recloser", all(), |x| rc.call(|| protected(x)));
    tower_one(&mut g, "tower_service_fn", all(), tower_base());
    tower_one(&mut g, "tower_resilience", all(), tower_count_window());
    g.finish();

    // A slow-call rate over the last 100 calls (every call fast): each call is timed against
    // the threshold, and its place in the window marked. `bb_call_failure_rate` is the
    // failure-rate window of `rate_count_100`, the control in the same group.
    let mut g = c.benchmark_group("rate_slow_count_100");
    one(&mut g, "direct", all(), protected);
    let b = Breaker::new("rate_slow_count_100.call", bb_slow_count_window_config());
    one(&mut g, "bb_call", all(), |x| b.call(|| protected(x)));
    assert_closed(&b);
    let b = Breaker::new("rate_slow_count_100.permit", bb_slow_count_window_config());
    one(&mut g, "bb_permit", all(), |x| bb_permit(&b, x));
    assert_closed(&b);
    let b = Breaker::new("rate_slow_count_100.failure_rate", bb_count_window_config());
    one(&mut g, "bb_call_failure_rate", all(), |x| {
        b.call(|| protected(x))
    });
    let rc = recloser(100);
    one(&mut g, "recloser", all(), |x| rc.call(|| protected(x)));
    // The one peer with a slow-call rate, tower-resilience, is a tower layer: both layers over
    // the same `service_fn`, each timing every call against the same 1 s threshold.
    tower_one(&mut g, "tower_service_fn", all(), tower_base());
    let b = Breaker::new("rate_slow_count_100.tower", bb_slow_count_window_config());
    tower_one(&mut g, "bb_tower", all(), bb_tower(&b));
    assert_closed(&b);
    tower_one(&mut g, "tower_resilience", all(), tower_slow_count_window());
    // The controls: what timing a call costs by itself, two readings around the direct call
    // and nothing else. `two_timer_reads` reads the timer a breaker on the system clock times
    // its calls by (quanta's, the CPU's time-stamp counter here); `two_clock_reads` reads
    // `CLOCK_MONOTONIC` (`SystemClock::now`, what `std::time::Instant` reads).
    let timer = quanta::Clock::new();
    one(&mut g, "two_timer_reads", all(), |x| {
        let started = timer.raw();
        let r = protected(x);
        std::hint::black_box(timer.delta_as_nanos(started, timer.raw()));
        r
    });
    one(&mut g, "two_clock_reads", all(), |x| {
        use breakerbox::Clock as _;
        let started = breakerbox::SystemClock.now();
        let r = protected(x);
        std::hint::black_box(breakerbox::SystemClock.now().saturating_sub(started));
        r
    });
    g.finish();
}

/// breakerbox's tower layer over the plain `service_fn` the tower-resilience rows wrap.
fn bb_tower(b: &Breaker) -> breakerbox::tower::CircuitBreaker<TowerBase> {
    use tower::Layer;
    breakerbox::tower::CircuitBreakerLayer::from_breaker(b.clone()).layer(tower_base())
}

/// The failure-rate windows with two threads on one breaker, all successes. Both windows are
/// shared by every thread (the rate is over all calls), so this is what the window's atomics
/// cost under contention; the control gives each thread a breaker of its own.
fn rate_2t(c: &mut Criterion) {
    for (case, config) in [
        ("rate_time_10s_2t", bb_time_window_config as fn() -> Config),
        ("rate_count_100_2t", bb_count_window_config),
        ("rate_slow_count_100_2t", bb_slow_count_window_config),
    ] {
        let mut g = c.benchmark_group(case);
        two(&mut g, "direct", |_| batch(Inputs::all_ok(), protected));
        let b = Breaker::new(format!("{case}.call"), config());
        let h = b.clone();
        two(&mut g, "bb_call", move |_| {
            let b = h.clone();
            batch(Inputs::all_ok(), move |x| b.call(|| protected(x)))
        });
        assert_closed(&b);
        two(&mut g, "bb_call_unshared", move |i| {
            let b = Breaker::new(format!("{case}.unshared.{i}"), config());
            batch(Inputs::all_ok(), move |x| b.call(|| protected(x)))
        });
        g.finish();
    }
}

/// Thread churn: two threads on one shared breaker, closed, all successes. The same two
/// threads every round (`same_threads`, like `closed_2t`'s `bb_call`), against two new threads
/// every round (`new_threads`: a pool that grows and shrinks, `spawn_blocking`). A thread that
/// exits leaves its counter stripe to the next; the target is new / same ≤ 1.1.
fn churn_2t(c: &mut Criterion) {
    let mut g = c.benchmark_group("churn_2t");
    let b = bb_consecutive("churn_2t.same");
    let h = b.clone();
    two(&mut g, "same_threads", move |_| {
        let b = h.clone();
        batch(Inputs::all_ok(), move |x| b.call(|| protected(x)))
    });
    assert_closed(&b);
    let b = bb_consecutive("churn_2t.new");
    g.bench_function("new_threads", |bench| {
        bench.iter_custom(|n| {
            let start = std::sync::Barrier::new(2);
            let took: Vec<Duration> = std::thread::scope(|s| {
                let threads: Vec<_> = (0..2)
                    .map(|_| {
                        let (b, start) = (&b, &start);
                        s.spawn(move || {
                            let mut run = batch(Inputs::all_ok(), |x| b.call(|| protected(x)));
                            start.wait();
                            let t = Instant::now();
                            run(n);
                            t.elapsed()
                        })
                    })
                    .collect();
                // Joined one by one: only then have their thread-locals (seats) been released.
                threads.into_iter().map(|t| t.join().unwrap()).collect()
            });
            (took[0] + took[1]) / 2
        })
    });
    assert_closed(&b);
    g.finish();
}

/// An async call polled to completion (a no-op waker; the futures are ready at once).
fn async_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("async");
    let all = Inputs::all_ok;
    one(&mut g, "direct", all(), |x| poll_now(protected_async(x)));
    let b = bb_consecutive("async.call_async");
    one(&mut g, "bb_call_async", all(), |x| {
        poll_now(b.call_async(protected_async(x)))
    });
    assert_closed(&b);
    one(&mut g, "bb_attr", all(), |x| poll_now(attr::async_call(x)));
    assert_attr_closed("bench.attr.async");
    let fs = failsafe_consecutive(5);
    one(&mut g, "failsafe_consecutive", all(), |x| {
        poll_now(failsafe::futures::CircuitBreaker::call(
            &fs,
            protected_async(x),
        ))
    });
    let rc = recloser::AsyncRecloser::from(recloser(100));
    one(&mut g, "recloser", all(), |x| {
        poll_now(rc.call(protected_async(x)))
    });
    g.finish();
}

/// Closed, one thread, all successes: what timing a call costs. `bb_call` times nothing (the
/// `closed_ok` contender), `bb_latency` opts in with `latency = true`, and `bb_slow` has a
/// `slow` threshold, which times its calls against it and into the histogram.
fn latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("latency");
    let inputs = || Inputs::every(0);
    let base = || Config::builder().failures(5).open_for(LONG);
    for (contender, config) in [
        ("bb_call", base()),
        ("bb_latency", base().latency(true)),
        ("bb_slow", base().slow(Duration::from_secs(1))),
    ] {
        let b = Breaker::new(format!("latency.{contender}"), config.build().unwrap());
        one(&mut g, contender, inputs(), |x| b.call(|| protected(x)));
        assert_closed(&b);
        // Only a case that ran (criterion's filter may have left it out: `scripts/bench-pair`
        // runs one case at a time) has calls to time.
        if b.metrics().calls > 0 {
            assert_eq!(
                b.latency().map_or(0, |l| l.calls) > 0,
                contender != "bb_call"
            );
        }
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = closed, closed_2t, churn_2t, open, open_fallback, rate, rate_2t, async_call, latency
}
criterion_main!(benches);
