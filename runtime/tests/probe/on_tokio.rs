//! Health probes on tokio: async probes as tasks on the runtime the breaker opened in, timed
//! by `TokioClock`'s timers on tokio's paused clock (or by a `ManualClock`'s); what happens
//! outside a runtime; and `TokioClock`'s own timers (open to half-open without a call, and
//! back to reading the clock when the runtime shuts down).
#![cfg(feature = "tokio")]

use breakerbox_runtime::{
    Breaker, Config, ConfigBuilder, HealthProbes, ManualClock, Reason, State, TokioClock,
    WeakBreaker,
};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::time::sleep;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn on_tokio() -> ConfigBuilder {
    Config::builder()
        .failures(1)
        .open_for(secs(60))
        .probe_every(secs(1))
        .clock(TokioClock)
}

fn trip(breaker: &Breaker) {
    breaker.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
}

/// Lets the runtime's other tasks (and probe threads) run until `started` probes were
/// started and all of them handled. Paused time does not move while this task yields.
async fn settled(breaker: &Breaker, started: u64) -> HealthProbes {
    loop {
        let p = breaker.health_probes();
        if p.started >= started && p.running == 0 {
            return p;
        }
        tokio::task::yield_now().await;
    }
}

async fn healthy() -> Result<(), std::io::Error> {
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_async_probe_half_opens_on_paused_time() {
    let breaker = Breaker::new("tokio-probe-ok", on_tokio().probe(healthy).build().unwrap());
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let log = reasons.clone();
    breaker.on_state_change(move |e| log.lock().unwrap().push(e.reason));
    trip(&breaker);
    sleep(ms(999)).await;
    assert_eq!(breaker.health_probes().started, 0);
    sleep(ms(2)).await;
    let p = settled(&breaker, 1).await;
    assert_eq!((p.started, p.passed), (1, 1));
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(
        *reasons.lock().unwrap().last().unwrap(),
        Reason::HealthProbe
    );
}

/// `TokioClock` has timers: an open breaker turns half-open at its open time on paused
/// time, without a call (no probe configured).
#[tokio::test(start_paused = true)]
async fn tokio_clock_half_opens_without_a_call() {
    let config = Config::builder()
        .failures(1)
        .open_for(secs(30))
        .clock(TokioClock)
        .build()
        .unwrap();
    let breaker = Breaker::new("tokio-timer", config);
    trip(&breaker);
    sleep(secs(29)).await;
    assert_eq!(breaker.state(), State::Open);
    sleep(secs(1)).await;
    // The timer task and this one wake at the same instant; let it run.
    tokio::task::yield_now().await;
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.metrics().calls, 1);
}

/// Sets its flag when dropped: tells whether a probe's future was dropped.
struct Dropped(Arc<AtomicBool>);
impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// An async probe that outlives `probe_every` counts as failed and is dropped; the next one
/// starts at once (an async probe is not waited for).
#[tokio::test(start_paused = true)]
async fn a_hung_async_probe_is_dropped_and_counts_as_failed() {
    let dropped = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU32::new(0));
    let (flag, counted) = (dropped.clone(), calls.clone());
    let probe = move || {
        let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
        let guard = Dropped(flag.clone());
        async move {
            if first {
                std::future::pending::<()>().await;
            }
            drop(guard);
            false
        }
    };
    let breaker = Breaker::new(
        "tokio-probe-hangs",
        on_tokio().probe(probe).build().unwrap(),
    );
    trip(&breaker);
    sleep(ms(1001)).await;
    let p = breaker.health_probes();
    assert_eq!((p.started, p.running, p.failed), (1, 1, 0));
    assert!(!dropped.load(Ordering::SeqCst));
    sleep(secs(1)).await;
    let p = settled(&breaker, 2).await;
    assert!(dropped.load(Ordering::SeqCst), "the hung probe was dropped");
    assert_eq!((p.started, p.timed_out, p.failed), (2, 1, 2));
    assert_eq!(breaker.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn a_panicking_async_probe_counts_as_failed() {
    let probe = || async {
        panic!("async probe panics");
        #[allow(unreachable_code)]
        true
    };
    let breaker = Breaker::new(
        "tokio-probe-panics",
        on_tokio().probe(probe).build().unwrap(),
    );
    trip(&breaker);
    sleep(ms(1001)).await;
    let p = settled(&breaker, 1).await;
    assert_eq!((p.failed, p.panicked, p.passed), (1, 1, 0));
    assert_eq!(breaker.state(), State::Open);
}

/// A reset stops probing, and the running async probe is dropped.
#[tokio::test(start_paused = true)]
async fn a_reset_drops_the_running_async_probe() {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let probe = move || {
        let guard = Dropped(flag.clone());
        async move {
            std::future::pending::<()>().await;
            drop(guard);
            true
        }
    };
    let breaker = Breaker::new(
        "tokio-probe-reset",
        on_tokio().probe(probe).build().unwrap(),
    );
    trip(&breaker);
    sleep(ms(1001)).await;
    assert_eq!(breaker.health_probes().running, 1);
    breaker.reset();
    let p = settled(&breaker, 1).await;
    assert!(dropped.load(Ordering::SeqCst));
    assert_eq!(p.abandoned, 1);
    sleep(secs(10)).await;
    assert_eq!(
        breaker.health_probes().started,
        1,
        "no probe after the reset"
    );
    assert_eq!(breaker.state(), State::Closed);
}

/// An async probe runs under no lock of ours: it may drive its own breaker and the registry.
#[tokio::test(start_paused = true)]
async fn an_async_probe_may_re_enter() {
    let cell: Arc<OnceLock<WeakBreaker>> = Arc::new(OnceLock::new());
    let me = cell.clone();
    let probe = move || {
        let me = me.clone();
        async move {
            let breaker = me.get().unwrap().upgrade().unwrap();
            let _ = breaker.explain().to_string();
            let _ = breaker_names();
            breaker.trip_for(secs(5));
            true
        }
    };
    let breaker = Breaker::new(
        "tokio-probe-reenter",
        on_tokio().probe(probe).build().unwrap(),
    );
    cell.set(breaker.downgrade()).ok().unwrap();
    trip(&breaker);
    sleep(ms(1001)).await;
    let p = settled(&breaker, 1).await;
    assert_eq!(
        (p.passed, p.abandoned),
        (0, 1),
        "its own re-trip ended its opening"
    );
    assert_eq!(breaker.state(), State::Open);
    // The re-trip's opening is probed in turn.
    sleep(secs(1)).await;
    settled(&breaker, 2).await;
}

fn breaker_names() -> Vec<String> {
    breakerbox_runtime::registry().names()
}

/// A blocking probe on tokio runs on a thread of its own, not on the runtime: this one blocks
/// until the test, on the runtime's only thread, lets it go.
#[tokio::test(start_paused = true)]
async fn a_blocking_probe_does_not_block_the_runtime() {
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let blocked = Mutex::new(blocked);
    let probe = move || {
        let _ = blocked.lock().unwrap().recv();
        true
    };
    let breaker = Breaker::new(
        "tokio-probe-blocking",
        on_tokio().probe(probe).build().unwrap(),
    );
    trip(&breaker);
    sleep(ms(1001)).await;
    assert_eq!(breaker.health_probes().running, 1);
    sleep(secs(5)).await;
    assert_eq!(breaker.health_probes().started, 1, "never two at once");
    release.send(()).unwrap();
    drop(release);
    let p = settled(&breaker, 1).await;
    assert_eq!((p.timed_out, p.passed), (1, 0), "it outlived probe_every");
    sleep(secs(1)).await;
    let p = settled(&breaker, 2).await;
    assert_eq!(p.passed, 1);
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// On a multi-thread runtime, timed by a `ManualClock`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_probe_on_the_manual_clock() {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(secs(60))
        .probe_every(secs(1))
        .clock(clock.clone())
        .probe(healthy)
        .build()
        .unwrap();
    let breaker = Breaker::new("manual-async-probe", config);
    trip(&breaker);
    clock.advance(secs(1));
    let p = settled(&breaker, 1).await;
    assert_eq!(p.passed, 1);
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// Outside a runtime an async probe cannot run: the breaker opens, no probe starts, and it
/// half-opens when its open time ends, as without a probe. A blocking probe needs no runtime
/// (`manual_clock`).
#[test]
fn an_async_probe_opened_outside_a_runtime_does_not_run() {
    let clock = ManualClock::new();
    let config = Config::builder()
        .failures(1)
        .open_for(secs(3))
        .probe_every(secs(1))
        .clock(clock.clone())
        .probe(healthy)
        .build()
        .unwrap();
    let breaker = Breaker::new("async-probe-no-runtime", config);
    trip(&breaker);
    clock.advance(secs(2));
    assert_eq!(breaker.health_probes().started, 0);
    assert_eq!(breaker.state(), State::Open);
    clock.advance(secs(1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// When the runtime whose timers hold an open breaker shuts down, the breaker goes back to
/// reading the clock on each rejection: a call after its open time half-opens it (on another
/// runtime's paused time here). Without that, its rejections would wait for a timer that is
/// gone.
#[test]
fn a_runtime_shutdown_leaves_no_breaker_open_for_good() {
    let paused = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    };
    let config = Config::builder()
        .failures(1)
        .open_for(secs(30))
        .clock(TokioClock)
        .build()
        .unwrap();
    let breaker = Breaker::new("tokio-shutdown", config);
    paused().block_on(async {
        trip(&breaker);
        tokio::task::yield_now().await;
    });
    paused().block_on(async {
        tokio::time::advance(secs(31)).await;
        breaker.call(|| Ok::<_, &str>(())).unwrap();
    });
    assert_eq!(breaker.state(), State::Closed);
}

/// A runtime that shuts down with an async probe running drops it: the probe is abandoned,
/// nothing is left running.
#[test]
fn a_runtime_shutdown_abandons_its_running_probe() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let probe = || std::future::pending::<bool>();
    let breaker = Breaker::new(
        "tokio-probe-shutdown",
        on_tokio().probe(probe).build().unwrap(),
    );
    runtime.block_on(async {
        trip(&breaker);
        sleep(ms(1001)).await;
        assert_eq!(breaker.health_probes().running, 1);
    });
    drop(runtime);
    let p = breaker.health_probes();
    assert_eq!((p.started, p.running, p.abandoned), (1, 0, 1));
    assert_eq!(breaker.state(), State::Open);
}
