//! Health probes on the manual clock: a probe's success half-opens an open breaker before its
//! open time ends, a failure (or a panic, or a probe that outlives `probe_every`) keeps it
//! open without counting a call, at most one probe runs at a time, and probing stops when the
//! breaker leaves open by any path. Blocking probes run on their own thread: each test waits
//! for a probe to be fully handled (`started` reached and nothing `running`), never for time.

use breakerbox_runtime::{
    Breaker, Cause, Config, ConfigBuilder, Event, HealthProbes, ManualClock, Reason, State,
    WeakBreaker,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A breaker that trips on one failure, stays open a minute and probes every second.
fn config(clock: &ManualClock) -> ConfigBuilder {
    Config::builder()
        .failures(1)
        .open_for(secs(60))
        .probe_every(secs(1))
        .clock(clock.clone())
}

/// Waits until `started` probes were started and every one of them was handled. Fails,
/// rather than hangs, if that has not happened within a minute: a probe counted as running for
/// good (the wait ends as soon as the probes are handled, which takes microseconds).
fn settled(breaker: &Breaker, started: u64) -> HealthProbes {
    let give_up = std::time::Instant::now() + secs(60);
    loop {
        let p = breaker.health_probes();
        if p.started >= started && p.running == 0 {
            return p;
        }
        assert!(std::time::Instant::now() < give_up, "never settled: {p:?}");
        std::thread::yield_now();
    }
}

fn events(breaker: &Breaker) -> Arc<Mutex<Vec<Event>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    breaker.on_state_change(move |e| log.lock().unwrap().push(e.clone()));
    seen
}

fn trip(breaker: &Breaker) {
    breaker.call(|| Err::<(), _>("down")).unwrap_err();
    assert_eq!(breaker.state(), State::Open);
}

fn healthy() -> Result<(), std::io::Error> {
    Ok(())
}

#[test]
fn a_healthy_probe_half_opens_before_open_for_ends() {
    let clock = ManualClock::new();
    let breaker = Breaker::new("probe-ok", config(&clock).probe(healthy).build().unwrap());
    let seen = events(&breaker);
    trip(&breaker);
    clock.advance(Duration::from_millis(999));
    assert_eq!(breaker.health_probes().started, 0, "not before probe_every");
    clock.advance(Duration::from_millis(1));
    let p = settled(&breaker, 1);
    assert_eq!((p.started, p.passed, p.failed), (1, 1, 0));
    assert_eq!(breaker.state(), State::HalfOpen);
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (last.from, last.to, last.reason),
        (State::Open, State::HalfOpen, Reason::HealthProbe)
    );
    assert_eq!(last.at, secs(1), "on the breaker's clock, at the tick");
    assert_eq!(last.reason.to_string(), "health probe succeeded");
    let explained = breaker.explain();
    assert_eq!(explained.cause, Cause::HealthProbe);
    assert!(
        explained.to_string().contains("a health probe succeeded"),
        "{explained}"
    );
    // The probe was not a call; real calls then confirm.
    assert_eq!(breaker.metrics().calls, 1);
    breaker.call(|| Ok::<_, &str>(())).unwrap();
    assert_eq!(breaker.state(), State::Closed);
    // Closed: no more probes.
    clock.advance(secs(10));
    assert_eq!(breaker.health_probes().started, 1);
}

#[test]
fn a_failing_probe_keeps_it_open_and_is_not_a_call() {
    let clock = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let probe = move || {
        counted.fetch_add(1, Ordering::SeqCst);
        false
    };
    let breaker = Breaker::new("probe-fails", config(&clock).probe(probe).build().unwrap());
    let seen = events(&breaker);
    trip(&breaker);
    for n in 1..=3 {
        clock.advance(secs(1));
        let p = settled(&breaker, n);
        assert_eq!((p.started, p.failed, p.passed), (n, n, 0));
        assert_eq!(breaker.state(), State::Open);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let m = breaker.metrics();
    assert_eq!(
        (m.calls, m.failures, m.rejected),
        (1, 1, 0),
        "probes are not calls"
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "only the opening was told");
    // The open time still ends as it would have.
    clock.set(secs(60));
    settled(&breaker, 0);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(
        seen.lock().unwrap().last().unwrap().reason,
        Reason::OpenElapsed
    );
}

#[test]
fn a_panicking_probe_counts_as_failed() {
    let clock = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let probe = move || {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            panic!("probe panics");
        }
        true
    };
    let breaker = Breaker::new("probe-panics", config(&clock).probe(probe).build().unwrap());
    trip(&breaker);
    clock.advance(secs(1));
    let p = settled(&breaker, 1);
    assert_eq!((p.failed, p.panicked, p.passed), (1, 1, 0));
    assert_eq!(breaker.state(), State::Open, "a panic is a failed probe");
    clock.advance(secs(1));
    let p = settled(&breaker, 2);
    assert_eq!((p.failed, p.panicked, p.passed), (1, 1, 1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// A probe that blocks until the test releases it, telling the test when it started.
struct Gate {
    entered: mpsc::Receiver<u32>,
    release: mpsc::Sender<bool>,
}

fn gated() -> (Gate, impl Fn() -> bool + Send + Sync + 'static) {
    let (entered_tx, entered) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<bool>();
    let entered_tx = Mutex::new(entered_tx);
    let release_rx = Mutex::new(release_rx);
    let n = AtomicU32::new(0);
    let probe = move || {
        let call = n.fetch_add(1, Ordering::SeqCst) + 1;
        entered_tx.lock().unwrap().send(call).unwrap();
        release_rx.lock().unwrap().recv().unwrap_or(false)
    };
    (Gate { entered, release }, probe)
}

#[test]
fn a_blocking_probe_that_outlives_probe_every_fails_and_no_second_starts() {
    let clock = ManualClock::new();
    let (gate, probe) = gated();
    let breaker = Breaker::new("probe-blocks", config(&clock).probe(probe).build().unwrap());
    trip(&breaker);
    clock.advance(secs(1));
    assert_eq!(gate.entered.recv().unwrap(), 1);
    // Its time is up at the next tick: failed, and no second probe while it runs.
    clock.advance(secs(1));
    let p = breaker.health_probes();
    assert_eq!((p.started, p.running, p.failed, p.timed_out), (1, 1, 1, 1));
    clock.advance(secs(3));
    assert_eq!(breaker.health_probes().started, 1, "never two at once");
    // It returns "healthy", too late: ignored.
    gate.release.send(true).unwrap();
    let p = settled(&breaker, 1);
    assert_eq!((p.passed, p.failed), (0, 1));
    assert_eq!(breaker.state(), State::Open);
    // The next tick starts a new one.
    clock.advance(secs(1));
    assert_eq!(gate.entered.recv().unwrap(), 2);
    gate.release.send(true).unwrap();
    let p = settled(&breaker, 2);
    assert_eq!((p.started, p.passed), (2, 1));
    assert_eq!(breaker.state(), State::HalfOpen);
}

#[test]
fn probing_stops_on_reset_and_a_running_probe_is_ignored() {
    let clock = ManualClock::new();
    let (gate, probe) = gated();
    let breaker = Breaker::new("probe-reset", config(&clock).probe(probe).build().unwrap());
    trip(&breaker);
    clock.advance(secs(1));
    assert_eq!(gate.entered.recv().unwrap(), 1);
    breaker.reset();
    gate.release.send(true).unwrap();
    let p = settled(&breaker, 1);
    assert_eq!((p.passed, p.abandoned), (0, 1));
    assert_eq!(breaker.state(), State::Closed);
    clock.advance(secs(10));
    assert_eq!(
        breaker.health_probes().started,
        1,
        "no probe after the reset"
    );
}

#[test]
fn probing_stops_when_forced_open_or_when_the_open_time_ends() {
    let clock = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let probe = move || {
        counted.fetch_add(1, Ordering::SeqCst);
        false
    };
    let config = config(&clock)
        .open_for(secs(3))
        .probe(probe)
        .build()
        .unwrap();
    let breaker = Breaker::new("probe-stops", config);
    trip(&breaker);
    clock.advance(secs(1));
    settled(&breaker, 1);
    breaker.force_open();
    clock.advance(secs(10));
    assert_eq!(breaker.health_probes().started, 1, "forced open: no probe");
    assert_eq!(breaker.state(), State::ForcedOpen);

    breaker.reset();
    trip(&breaker);
    let before = breaker.health_probes().started;
    // Ticks at 1 s and 2 s; at 3 s the open timer (armed first) half-opens it first.
    clock.advance(secs(1));
    settled(&breaker, before + 1);
    clock.advance(secs(1));
    settled(&breaker, before + 2);
    clock.advance(secs(1));
    assert_eq!(breaker.state(), State::HalfOpen);
    clock.advance(secs(10));
    assert_eq!(breaker.health_probes().started, before + 2);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A re-trip while open (`trip_for`) is a new opening: the old one's probing stops and a
/// new one starts from the re-trip.
#[test]
fn a_re_trip_starts_probing_over() {
    let clock = ManualClock::new();
    let (gate, probe) = gated();
    let breaker = Breaker::new("probe-retrip", config(&clock).probe(probe).build().unwrap());
    trip(&breaker);
    clock.advance(secs(1));
    assert_eq!(gate.entered.recv().unwrap(), 1);
    clock.advance(Duration::from_millis(500));
    breaker.trip_for(secs(30));
    gate.release.send(true).unwrap();
    let p = settled(&breaker, 1);
    assert_eq!(
        (p.passed, p.abandoned),
        (0, 1),
        "the old opening's probe is ignored"
    );
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_millis(500));
    assert_eq!(breaker.health_probes().started, 1, "the old ticks are gone");
    clock.advance(Duration::from_millis(500));
    assert_eq!(gate.entered.recv().unwrap(), 2);
    gate.release.send(true).unwrap();
    settled(&breaker, 2);
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// The probe runs under no lock of ours: it may read and drive its own breaker.
#[test]
fn a_probe_may_re_enter_its_breaker() {
    let clock = ManualClock::new();
    let cell: Arc<OnceLock<WeakBreaker>> = Arc::new(OnceLock::new());
    let me = cell.clone();
    let probe = move || {
        let breaker = me.get().unwrap().upgrade().unwrap();
        assert_eq!(breaker.state(), State::Open);
        let _ = breaker.metrics();
        let _ = breaker.explain().to_string();
        let _ = breaker_names();
        // A call through the open breaker is rejected, as any other.
        assert!(breaker.call(|| Ok::<_, &str>(())).is_err());
        true
    };
    let breaker = Breaker::new(
        "probe-reenter",
        config(&clock).probe(probe).build().unwrap(),
    );
    cell.set(breaker.downgrade()).ok().unwrap();
    trip(&breaker);
    clock.advance(secs(1));
    let p = settled(&breaker, 1);
    assert_eq!(p.passed, 1);
    assert_eq!(breaker.state(), State::HalfOpen);
    assert_eq!(breaker.metrics().rejected, 1, "the probe's own call");
}

fn breaker_names() -> Vec<String> {
    breakerbox_runtime::registry().names()
}

/// A probe that resets its own breaker: the reset stands, and its own result is ignored.
#[test]
fn a_probe_may_reset_its_breaker() {
    let clock = ManualClock::new();
    let cell: Arc<OnceLock<WeakBreaker>> = Arc::new(OnceLock::new());
    let me = cell.clone();
    let probe = move || {
        me.get().unwrap().upgrade().unwrap().reset();
        true
    };
    let breaker = Breaker::new("probe-resets", config(&clock).probe(probe).build().unwrap());
    cell.set(breaker.downgrade()).ok().unwrap();
    let seen = events(&breaker);
    trip(&breaker);
    clock.advance(secs(1));
    let p = settled(&breaker, 1);
    assert_eq!((p.passed, p.abandoned), (0, 1));
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(seen.lock().unwrap().last().unwrap().reason, Reason::Reset);
}

/// On a clock without timers nothing ticks: no probe runs, as documented.
#[test]
fn a_clock_without_timers_runs_no_probe() {
    let clock = ManualClock::without_timers();
    let config = Config::builder()
        .failures(1)
        .open_for(secs(60))
        .probe(healthy)
        .probe_every(secs(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    let breaker = Breaker::new("probe-untimed", config);
    trip(&breaker);
    clock.advance(secs(5));
    assert_eq!(breaker.health_probes().started, 0);
    assert_eq!(breaker.state(), State::Open);
}

/// A breaker dropped while open leaves its ticks nothing to do.
#[test]
fn a_dropped_breaker_is_not_probed() {
    let clock = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let probe = move || {
        counted.fetch_add(1, Ordering::SeqCst);
        true
    };
    let breaker = Breaker::new(
        "probe-dropped",
        config(&clock).probe(probe).build().unwrap(),
    );
    trip(&breaker);
    drop(breaker);
    clock.advance(secs(5));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    // Its first tick did not arm another: only the open timer is left.
    let timers = breakerbox_runtime::Clock::timers(&clock).unwrap();
    assert_eq!(timers.next_due(), Some(secs(60)));
}

#[test]
fn config_probe_keys() {
    let err = Config::builder()
        .probe_every(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "probe_every");
    assert_eq!(
        err.to_string(),
        "`probe_every` must be longer than zero, got 0ns"
    );
    let a = Config::builder().probe(healthy).build().unwrap();
    let b = Config::builder().probe(healthy).build().unwrap();
    assert_eq!(a, b, "the same function: equal configs");
    assert_eq!(a.probe_every(), secs(5), "the default");
    assert!(a.probe().unwrap().name().ends_with("healthy"));
    let flag = Arc::new(AtomicU32::new(0));
    let c = Config::builder()
        .probe(move || flag.load(Ordering::Relaxed) == 0)
        .build()
        .unwrap();
    assert_ne!(a, c);
    assert_eq!(c.clone(), c, "a clone is the same probe");
    assert_ne!(a, Config::default());
}

/// A new config without a probe (a reload from a file, say) keeps the breaker's probe and
/// takes its `probe_every`.
#[test]
fn a_reconfigure_without_a_probe_keeps_the_probe() {
    let breaker = Breaker::new(
        "probe-reconfigure",
        Config::builder().probe(healthy).build().unwrap(),
    );
    let changed = breaker
        .reconfigure(Config::builder().probe_every(secs(2)).build().unwrap())
        .unwrap();
    assert!(changed);
    let config = breaker.config();
    assert!(
        config
            .probe()
            .is_some_and(|p| p.name().ends_with("healthy"))
    );
    assert_eq!(config.probe_every(), secs(2));
}

/// `probe_every` is a config file's key like any other: parsed, checked, suggested; `probe`
/// belongs to the code.
#[cfg(feature = "serde")]
#[test]
fn probe_every_in_a_config_file() {
    use breakerbox_runtime::registry;
    let names = registry()
        .load_toml_str(
            "p.toml",
            "[breakers.probe-toml]\ndynamic = true\nprobe_every = \"250ms\"\n",
        )
        .unwrap();
    assert_eq!(names, ["probe-toml"]);
    let breaker = registry().get_or_create("probe-toml", Config::default);
    assert_eq!(breaker.config().probe_every(), Duration::from_millis(250));
    let err = |text: &str| {
        registry()
            .load_toml_str("bad.toml", text)
            .unwrap_err()
            .to_string()
    };
    let zero = err("[breakers.probe-toml-0]\ndynamic = true\nprobe_every = \"0s\"\n");
    assert!(
        zero.contains("`probe_every`") && zero.contains("zero"),
        "{zero}"
    );
    let typo = err("[breakers.probe-toml-1]\ndynamic = true\nprobe_evry = \"1s\"\n");
    assert!(typo.contains("did you mean `probe_every`?"), "{typo}");
    let code = err("[breakers.probe-toml-2]\ndynamic = true\nprobe = \"ping\"\n");
    assert!(code.contains("`probe` belongs to the function's"), "{code}");
}

/// On the system clock: the timer thread ticks, the probe runs on a `breakerbox-probe` thread
/// (never on the timer thread), and its success half-opens the breaker long before its hour
/// is up. (This waits on the event, not on a time: a loaded machine makes it slower, never
/// wrong.)
#[test]
fn the_system_timer_ticks_probes_on_their_own_thread() {
    let ran_on = Arc::new(Mutex::new(None));
    let seen = ran_on.clone();
    let probe = move || {
        *seen.lock().unwrap() = std::thread::current().name().map(str::to_owned);
        true
    };
    let config = Config::builder()
        .failures(1)
        .open_for(Duration::from_secs(3600))
        // Long enough for a thread to start and answer on a loaded machine (a probe still
        // running at the next tick times out; the test would only take longer).
        .probe_every(Duration::from_millis(100))
        .probe(probe)
        .build()
        .unwrap();
    let breaker = Breaker::new("probe-system", config);
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    breaker.on_state_change(move |e| {
        let _ = tx.lock().unwrap().send((e.to, e.reason));
    });
    trip(&breaker);
    assert_eq!(rx.recv().unwrap().0, State::Open);
    assert_eq!(rx.recv().unwrap(), (State::HalfOpen, Reason::HealthProbe));
    assert_eq!(ran_on.lock().unwrap().as_deref(), Some("breakerbox-probe"));
}

/// A probe budget of none holds the breaker open: a healthy probe does not move it (its
/// result is ignored), as the open time's end does not.
#[test]
fn a_probe_budget_of_none_holds_it_open() {
    let clock = ManualClock::new();
    let breaker = Breaker::new(
        "probe-budget",
        config(&clock).probe(healthy).build().unwrap(),
    );
    breaker.set_probe_budget(Some(0));
    trip(&breaker);
    clock.advance(secs(1));
    let p = settled(&breaker, 1);
    assert_eq!((p.passed, p.abandoned), (0, 1));
    assert_eq!(breaker.state(), State::Open);
    breaker.set_probe_budget(None);
    clock.advance(secs(1));
    let p = settled(&breaker, 2);
    assert_eq!(p.passed, 1);
    assert_eq!(breaker.state(), State::HalfOpen);
}

/// A clock that panics once, at its first reading after `armed` is set.
struct PanicsOnce {
    time: ManualClock,
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl breakerbox_runtime::Clock for PanicsOnce {
    fn now(&self) -> Duration {
        assert!(
            !self.armed.swap(false, Ordering::SeqCst),
            "clock read failed"
        );
        self.time.now()
    }

    fn timers(&self) -> Option<Arc<breakerbox_runtime::Timers>> {
        self.time.timers()
    }
}

/// A panic while a passed probe is counted (the breaker moving reads the user's clock, which
/// panics) ends that probe but not probing: the next tick starts another, which half-opens
/// the breaker.
#[test]
fn a_panic_while_a_passed_probe_is_counted_leaves_probing_working() {
    let time = ManualClock::new();
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clock = PanicsOnce {
        time: time.clone(),
        armed: armed.clone(),
    };
    let arm = armed.clone();
    let first = Arc::new(AtomicU32::new(0));
    let probe = move || {
        // The first probe arms the clock: its pass reads it, and panics.
        if first.fetch_add(1, Ordering::SeqCst) == 0 {
            arm.store(true, Ordering::SeqCst);
        }
        Ok::<(), std::io::Error>(())
    };
    let config = Config::builder()
        .failures(1)
        .open_for(secs(60))
        .probe_every(secs(1))
        .clock(clock)
        .probe(probe);
    let breaker = Breaker::new("probe-clock-panic", config.build().unwrap());
    trip(&breaker);
    time.advance(secs(1));
    let p = settled(&breaker, 1);
    assert_eq!((p.started, p.running), (1, 0));
    assert_eq!(breaker.state(), State::Open);
    time.advance(secs(1));
    let p = settled(&breaker, 2);
    assert_eq!((p.started, p.passed), (2, 1));
    assert_eq!(breaker.state(), State::HalfOpen);
}
