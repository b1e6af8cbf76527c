//! Fault injection wherever user code runs inside a breaker: state-change listeners (per
//! breaker and registry-wide), `classify`, an error's `Display`, the registry's config
//! closures, and clocks. Each one panics, re-enters the breaker and the registry, acts on the
//! breaker, and blocks on another thread that uses them — in every state, and while the
//! protected call itself is panicking where a call is admitted. After each, the breaker must
//! still be right: its state, its counts, its events, and it still trips and closes.
//!
//! Every test runs on `ManualClock`s; nothing sleeps. A test that could deadlock runs under
//! [`within`], whose limit only turns a hang into a failure: every case here takes
//! milliseconds.

use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, mpsc};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Clock, Config, ConfigBuilder, Error, Event, ManualClock, Outcome, RejectReason,
    SharedState, State, WeakBreaker, Window, registry,
};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Runs `f` on a thread of its own and waits for it. A deadlock fails the test rather than
/// hanging it; the limit is a failure detector, not a timing assertion.
#[track_caller]
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(secs(120)) {
        Ok(()) => match t.join().expect("caught above") {
            Ok(v) => v,
            Err(panic) => resume_unwind(panic),
        },
        Err(_) => panic!("{what}: deadlocked"),
    }
}

/// A registry name no other test uses.
fn fresh(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("faults.{prefix}.{}", N.fetch_add(1, SeqCst))
}

fn message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(not a string)".to_owned()
    }
}

/// `failures(1)`, open for 1 s: one failure trips, one success after a second closes.
fn config(clock: &ManualClock) -> ConfigBuilder {
    Config::builder()
        .failures(1)
        .open_for(secs(1))
        .clock(clock.clone())
}

// ------------------------------------------------------------------------------ states

#[derive(Clone, Copy, Debug, PartialEq)]
enum Start {
    Closed,
    Open,
    HalfOpen,
    ForcedOpen,
    Disabled,
}

const STARTS: [Start; 5] = [
    Start::Closed,
    Start::Open,
    Start::HalfOpen,
    Start::ForcedOpen,
    Start::Disabled,
];

impl Start {
    fn state(self) -> State {
        match self {
            Start::Closed => State::Closed,
            Start::Open => State::Open,
            Start::HalfOpen => State::HalfOpen,
            Start::ForcedOpen => State::ForcedOpen,
            Start::Disabled => State::Disabled,
        }
    }

    /// Whether a call is admitted in this state.
    fn admits(self) -> bool {
        matches!(self, Start::Closed | Start::HalfOpen | Start::Disabled)
    }
}

/// Puts a `config` breaker into `s`, fresh from a reset.
fn enter(b: &Breaker, s: Start) {
    b.reset();
    match s {
        Start::Closed => {}
        Start::Open => {
            b.call(|| Err::<(), _>("down")).unwrap_err();
        }
        Start::HalfOpen => b.import_state(&SharedState::new(State::HalfOpen, None, 0)),
        Start::ForcedOpen => b.force_open(),
        Start::Disabled => b.disable(),
    }
    assert_eq!(b.state(), s.state());
}

/// One call through `b`: a success, a failure, or a panic, which must come back out as the
/// call's own panic whatever user code did meanwhile. Returns whether it was admitted.
fn attempt(b: &Breaker, ok: bool, panicking: bool) -> bool {
    let run = AssertUnwindSafe(|| {
        b.call(|| -> Result<(), &str> {
            if panicking {
                panic!("the protected call");
            }
            if ok { Ok(()) } else { Err("down") }
        })
    });
    match catch_unwind(run) {
        Ok(Err(Error::Rejected(_))) => false,
        Ok(_) => true,
        Err(panic) => {
            assert_eq!(
                message(&*panic),
                "the protected call",
                "another panic got out"
            );
            true
        }
    }
}

/// Makes a breaker leave `s` — by a call where one is admitted (a panicking one if
/// `panicking`), by hand otherwise — and returns the transitions and final state this makes
/// when no user code interferes.
fn leave(
    b: &Breaker,
    clock: &ManualClock,
    s: Start,
    panicking: bool,
) -> (Vec<(State, State)>, State) {
    use State::*;
    let ok = !panicking;
    match s {
        Start::Closed => {
            attempt(b, false, panicking);
            (vec![(Closed, Open)], Open)
        }
        Start::Open => {
            clock.advance(secs(1));
            attempt(b, ok, panicking);
            let end = if ok { Closed } else { Open };
            (vec![(Open, HalfOpen), (HalfOpen, end)], end)
        }
        Start::HalfOpen => {
            attempt(b, ok, panicking);
            let end = if ok { Closed } else { Open };
            (vec![(HalfOpen, end)], end)
        }
        Start::ForcedOpen => {
            assert!(!attempt(b, ok, panicking), "admitted while forced open");
            b.reset();
            (vec![(ForcedOpen, Closed)], Closed)
        }
        Start::Disabled => {
            attempt(b, ok, panicking);
            b.force_open();
            (vec![(Disabled, ForcedOpen)], ForcedOpen)
        }
    }
}

/// The breaker still works: from a reset, one success, one failure that trips it, one
/// rejection, and a success after `open_for` that closes it, each counted once.
#[track_caller]
fn still_works(b: &Breaker, clock: &ManualClock) {
    b.reset();
    assert_eq!(b.state(), State::Closed);
    let before = b.metrics();
    b.call(|| Ok::<_, &str>(())).unwrap();
    b.call(|| Err::<(), _>("down again")).unwrap_err();
    assert_eq!(b.state(), State::Open);
    let rejected = b.try_acquire().unwrap_err();
    assert_eq!(rejected.reason(), RejectReason::Open);
    assert_eq!(b.last_failure().as_deref(), Some("down again"));
    clock.advance(secs(1));
    b.call(|| Ok::<_, &str>(())).unwrap();
    assert_eq!(b.state(), State::Closed);
    let after = b.metrics();
    let delta = |f: fn(&breakerbox_runtime::Metrics) -> u64| f(&after) - f(&before);
    assert_eq!(
        (
            delta(|m| m.successes),
            delta(|m| m.failures),
            delta(|m| m.rejected),
            delta(|m| m.ignored),
            delta(|m| m.times_opened),
        ),
        (2, 1, 1, 0, 1),
        "counts after the fault"
    );
}

// ------------------------------------------------------------------------------ faults

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None = 0,
    /// Panics.
    Panic,
    /// Calls the breaker's and the registry's read paths, creates breakers.
    ReEnter,
    /// Forces the breaker open itself, once.
    Act,
    /// Waits for another thread that uses the breaker and the registry and forces the breaker
    /// open, once.
    Block,
}

const FAULTS: [Fault; 4] = [Fault::Panic, Fault::ReEnter, Fault::Act, Fault::Block];

impl Fault {
    fn from(n: u8) -> Fault {
        [
            Fault::None,
            Fault::Panic,
            Fault::ReEnter,
            Fault::Act,
            Fault::Block,
        ][usize::from(n)]
    }

    /// Whether the fault forces the breaker open, so that it ends forced open.
    fn forces_open(self) -> bool {
        matches!(self, Fault::Act | Fault::Block)
    }
}

/// A fault armed on one breaker: what user code does when it runs, and what went wrong
/// inside it that a caught panic would otherwise hide.
#[derive(Default)]
struct Arm {
    fault: AtomicU8,
    breaker: OnceLock<WeakBreaker>,
    once: AtomicBool,
    ran: AtomicUsize,
    problems: Mutex<Vec<String>>,
}

impl Arm {
    fn new(b: &Breaker) -> Arc<Arm> {
        let arm = Arm::default();
        arm.breaker.set(b.downgrade()).unwrap();
        Arc::new(arm)
    }

    fn set(&self, fault: Fault) {
        self.fault.store(fault as u8, SeqCst);
    }

    fn problem(&self, p: String) {
        self.problems.lock().unwrap().push(p);
    }

    #[track_caller]
    fn assert_clean(&self, case: &str) {
        let problems = self.problems.lock().unwrap();
        assert!(problems.is_empty(), "{case}: {problems:#?}");
    }

    /// Runs the armed fault; `event` is what the user code was told, if it is a listener.
    fn run(&self, event: Option<&Event>) {
        let fault = Fault::from(self.fault.load(SeqCst));
        if fault == Fault::None {
            return;
        }
        self.ran.fetch_add(1, SeqCst);
        let Some(b) = self.breaker.get().and_then(WeakBreaker::upgrade) else {
            self.problem("the breaker is gone".into());
            return;
        };
        match fault {
            Fault::None => {}
            Fault::Panic => panic!("injected fault in {}", b.name()),
            Fault::ReEnter => self.re_enter(&b, event),
            Fault::Act => {
                if !self.once.swap(true, SeqCst) {
                    b.force_open();
                }
            }
            Fault::Block => {
                if !self.once.swap(true, SeqCst) {
                    let other = b.clone();
                    let t = std::thread::spawn(move || {
                        let _ = (other.state(), other.metrics(), other.export_state());
                        let made = registry().get_or_create(&fresh("block"), Config::default);
                        assert!(registry().get(made.name()).is_some());
                        other.on_state_change(|_| {});
                        other.force_open();
                    });
                    if let Err(panic) = t.join() {
                        self.problem(format!("the other thread: {}", message(&*panic)));
                    }
                }
            }
        }
    }

    fn re_enter(&self, b: &Breaker, event: Option<&Event>) {
        let m = b.metrics();
        if let Some(e) = event
            && (b.state() != e.to || m.state != e.to || m.name != e.name)
        {
            self.problem(format!("told {e:?}, read {:?} / {m:?}", b.state()));
        }
        let _ = (b.last_failure(), b.export_state(), b.config().failures());
        let made = registry().get_or_create(&fresh("reenter"), Config::default);
        if !registry().breakers().iter().any(|x| x.ptr_eq(&made)) {
            self.problem("a breaker created inside is not listed".into());
        }
        if registry().get(made.name()).is_none() {
            self.problem("a breaker created inside is not found".into());
        }
        let inner = Breaker::new(
            "faults.inner",
            Config::builder().failures(1).build().unwrap(),
        );
        inner.call(|| Err::<(), _>("inner")).unwrap_err();
        if inner.state() != State::Open {
            self.problem("a breaker created inside does not trip".into());
        }
    }
}

// ------------------------------------------------------------------------------ listeners

/// The registry listener, installed once for the process: it runs the fault armed on the
/// breaker the event is about, if any.
fn registry_arms() -> &'static Mutex<HashMap<String, Arc<Arm>>> {
    static ARMS: LazyLock<Mutex<HashMap<String, Arc<Arm>>>> = LazyLock::new(|| {
        registry().on_state_change(|e| {
            let arm = registry_arms().lock().unwrap().get(&e.name).cloned();
            if let Some(arm) = arm {
                arm.run(Some(e));
            }
        });
        Mutex::default()
    });
    &ARMS
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Site {
    /// A listener of the breaker's own.
    Breaker,
    /// A registry-wide listener.
    Registry,
}

/// One case: a listener at `site` with `fault`, while the breaker leaves `start` (by a
/// panicking call if `panicking`).
fn listener_case(site: Site, fault: Fault, start: Start, panicking: bool) {
    let case = format!("{site:?} listener, {fault:?}, from {start:?}, panicking call: {panicking}");
    let clock = ManualClock::new();
    let b = match site {
        Site::Breaker => Breaker::new("faults.listener", config(&clock).build().unwrap()),
        Site::Registry => {
            let name = fresh("listener");
            registry().set_clock(&name, clock.clone());
            registry().get_or_create(&name, || config(&clock).build().unwrap())
        }
    };
    let arm = Arm::new(&b);
    match site {
        Site::Breaker => {
            let a = arm.clone();
            b.on_state_change(move |e| a.run(Some(e)));
        }
        Site::Registry => {
            registry_arms()
                .lock()
                .unwrap()
                .insert(b.name().to_owned(), arm.clone());
        }
    }
    // Told after the faulty listener (before it, for a registry one: a breaker's own
    // listeners are told first).
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    b.on_state_change(move |e| log.lock().unwrap().push((e.from, e.to)));

    enter(&b, start);
    seen.lock().unwrap().clear();
    let before = b.metrics();
    arm.set(fault);
    let (mut want, mut end) = leave(&b, &clock, start, panicking);
    arm.set(Fault::None);
    assert!(arm.ran.load(SeqCst) > 0, "{case}: the listener did not run");
    if fault.forces_open() {
        // Forced open at the first event, told right after it; a call after that is refused.
        let first = want[0];
        want.truncate(1);
        if first.1 != State::ForcedOpen {
            want.push((first.1, State::ForcedOpen));
        }
        end = State::ForcedOpen;
    }
    assert_eq!(*seen.lock().unwrap(), want, "{case}: events");
    assert_eq!(b.state(), end, "{case}: state");
    let after = b.metrics();
    let calls = after.calls - before.calls;
    assert!(calls <= 1, "{case}: {calls} calls counted for one");
    if start != Start::Disabled {
        assert_eq!(calls, 1, "{case}: the call was not counted once");
    }
    arm.assert_clean(&case);
    still_works(&b, &clock);
    if site == Site::Registry {
        registry_arms().lock().unwrap().remove(b.name());
    }
}

fn listener_faults(site: Site, fault: Fault) {
    within("listener faults", move || {
        for start in STARTS {
            for panicking in [false, true] {
                listener_case(site, fault, start, panicking);
            }
        }
    });
}

#[test]
fn a_panicking_listener_disturbs_nothing_in_any_state() {
    listener_faults(Site::Breaker, Fault::Panic);
}

#[test]
fn a_re_entering_listener_disturbs_nothing_in_any_state() {
    listener_faults(Site::Breaker, Fault::ReEnter);
}

#[test]
fn a_listener_acting_on_its_breaker_is_told_in_order_in_any_state() {
    listener_faults(Site::Breaker, Fault::Act);
}

#[test]
fn a_listener_blocking_on_a_thread_that_uses_the_breaker_does_not_deadlock() {
    listener_faults(Site::Breaker, Fault::Block);
}

#[test]
fn a_panicking_registry_listener_disturbs_nothing_in_any_state() {
    listener_faults(Site::Registry, Fault::Panic);
}

#[test]
fn a_re_entering_registry_listener_disturbs_nothing_in_any_state() {
    listener_faults(Site::Registry, Fault::ReEnter);
}

#[test]
fn a_registry_listener_acting_on_the_breaker_is_told_in_order_in_any_state() {
    listener_faults(Site::Registry, Fault::Act);
}

#[test]
fn a_registry_listener_blocking_on_a_thread_that_uses_the_registry_does_not_deadlock() {
    listener_faults(Site::Registry, Fault::Block);
}

/// D03: a listener that panics while the call that trips the breaker is itself panicking
/// (its permit records the failure during the unwind) used to abort the process — this test
/// binary with it. Now the listener's panic is caught: the call's own panic comes out, and
/// the listeners after it, and the registry's, are told.
#[test]
fn repro_a_listener_panicking_during_a_panicking_call_does_not_abort() {
    let clock = ManualClock::new();
    let name = fresh("d03");
    registry().set_clock(&name, clock.clone());
    let b = registry().get_or_create(&name, || config(&clock).build().unwrap());
    let told = Arc::new(Mutex::new(Vec::new()));
    let log = told.clone();
    b.on_state_change(move |e| log.lock().unwrap().push(("before", e.to)));
    b.on_state_change(|e| panic!("listener on {}", e.name));
    let log = told.clone();
    b.on_state_change(move |e| log.lock().unwrap().push(("after", e.to)));
    let log = told.clone();
    let mine = name.clone();
    registry().on_state_change(move |e| {
        if e.name == mine {
            log.lock().unwrap().push(("registry", e.to));
        }
    });
    let r = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), &str> { panic!("the protected call") })
    }));
    assert_eq!(message(&*r.unwrap_err()), "the protected call");
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        *told.lock().unwrap(),
        [
            ("before", State::Open),
            ("after", State::Open),
            ("registry", State::Open)
        ]
    );
    assert_eq!(b.metrics().failures, 1);
    // A panicking registry listener, too, during a panicking probe.
    let mine = name.clone();
    registry().on_state_change(move |e| {
        if e.name == mine && e.to == State::Closed {
            panic!("registry listener on {}", e.name);
        }
    });
    clock.advance(secs(1));
    let r = catch_unwind(AssertUnwindSafe(|| {
        b.call(|| -> Result<(), &str> { panic!("the probe") })
    }));
    assert_eq!(message(&*r.unwrap_err()), "the probe");
    assert_eq!(b.state(), State::Open, "the panicking probe re-opened it");
    clock.advance(secs(1));
    b.call(|| Ok::<_, &str>(())).unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        told.lock().unwrap()[3..],
        [
            ("before", State::HalfOpen),
            ("after", State::HalfOpen),
            ("registry", State::HalfOpen),
            ("before", State::Open),
            ("after", State::Open),
            ("registry", State::Open),
            ("before", State::HalfOpen),
            ("after", State::HalfOpen),
            ("registry", State::HalfOpen),
            ("before", State::Closed),
            ("after", State::Closed),
            ("registry", State::Closed),
        ]
    );
}

// ------------------------------------------------------------------------------ classify

/// `classify` (through `call_with`) faults in every state: where a call is admitted it runs
/// after the call, with the permit held; where not, it never runs.
fn classify_faults(fault: Fault) {
    within("classify faults", move || {
        for start in STARTS {
            let case = format!("classify, {fault:?}, in {start:?}");
            let clock = ManualClock::new();
            let b = Breaker::new("faults.classify", config(&clock).build().unwrap());
            let arm = Arm::new(&b);
            enter(&b, start);
            let before = b.metrics();
            arm.set(fault);
            let r = catch_unwind(AssertUnwindSafe(|| {
                b.call_with(
                    || 42,
                    |_| {
                        arm.run(None);
                        Outcome::Failure
                    },
                )
            }));
            arm.set(Fault::None);
            let after = b.metrics();
            if !start.admits() {
                assert!(matches!(r, Ok(Err(_))), "{case}: admitted");
                assert_eq!(arm.ran.load(SeqCst), 0, "{case}: classify ran");
                assert_eq!(after.rejected - before.rejected, 1, "{case}");
                assert_eq!(b.state(), start.state(), "{case}");
                still_works(&b, &clock);
                continue;
            }
            match (fault, r) {
                (Fault::Panic, Err(panic)) => {
                    assert_eq!(message(&*panic), "injected fault in faults.classify")
                }
                (Fault::Panic, Ok(_)) => panic!("{case}: the panic was swallowed"),
                (_, Ok(Ok(42))) => {}
                (_, other) => panic!("{case}: {other:?}"),
            }
            // A panicking classify counts the call a failure (its permit drops while
            // panicking); otherwise it said `Failure`. Either way, one failure.
            let want = match (start, fault.forces_open()) {
                (Start::Disabled, true) => State::ForcedOpen,
                (Start::Disabled, false) => State::Disabled,
                (_, true) => State::ForcedOpen,
                (_, false) => State::Open,
            };
            assert_eq!(b.state(), want, "{case}");
            if start != Start::Disabled {
                assert_eq!(after.failures - before.failures, 1, "{case}");
                assert_eq!(after.calls - before.calls, 1, "{case}");
            }
            arm.assert_clean(&case);
            still_works(&b, &clock);
        }
    });
}

#[test]
fn a_panicking_classify_counts_a_failure_in_any_state() {
    classify_faults(Fault::Panic);
}

#[test]
fn a_re_entering_classify_disturbs_nothing() {
    classify_faults(Fault::ReEnter);
}

#[test]
fn a_classify_acting_on_its_breaker_wins_over_its_stale_verdict() {
    classify_faults(Fault::Act);
}

#[test]
fn a_classify_blocking_on_a_thread_that_uses_the_breaker_does_not_deadlock() {
    classify_faults(Fault::Block);
}

// ------------------------------------------------------------------------------ Display

/// An error whose `Display` runs the armed fault. It is formatted when its failure trips the
/// breaker (closed, or a failing probe); in the other states it is never formatted.
struct Faulty(Arc<Arm>);

impl fmt::Display for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.run(None);
        f.write_str("faulty error")
    }
}

fn display_faults(fault: Fault) {
    within("Display faults", move || {
        for start in STARTS {
            let case = format!("Display, {fault:?}, in {start:?}");
            let clock = ManualClock::new();
            let b = Breaker::new("faults.display", config(&clock).build().unwrap());
            let arm = Arm::new(&b);
            enter(&b, start);
            let before = b.metrics();
            arm.set(fault);
            let r = catch_unwind(AssertUnwindSafe(|| {
                b.call(|| Err::<(), _>(Faulty(arm.clone())))
            }));
            arm.set(Fault::None);
            let after = b.metrics();
            if fault != Fault::Panic {
                assert!(r.is_ok(), "{case}: a panic got out");
            }
            match start {
                Start::Open | Start::ForcedOpen => {
                    assert!(matches!(r, Ok(Err(Error::Rejected(_)))), "{case}");
                    assert_eq!(arm.ran.load(SeqCst), 0, "{case}: formatted");
                    assert_eq!(b.state(), start.state(), "{case}");
                }
                Start::Disabled => assert_eq!(b.state(), State::Disabled, "{case}"),
                Start::Closed | Start::HalfOpen => {
                    let want = if fault.forces_open() {
                        State::ForcedOpen
                    } else {
                        State::Open
                    };
                    assert_eq!(b.state(), want, "{case}");
                    assert_eq!(after.failures - before.failures, 1, "{case}");
                    // The message is formatted before the transition: a `Display` that
                    // forces the breaker open acts first, and the trip then finds the state
                    // moved on and opens nothing.
                    let opened = u64::from(!fault.forces_open());
                    assert_eq!(after.times_opened - before.times_opened, opened, "{case}");
                    if fault != Fault::Panic && !fault.forces_open() {
                        assert_eq!(b.last_failure().as_deref(), Some("faulty error"), "{case}");
                    }
                }
            }
            arm.assert_clean(&case);
            still_works(&b, &clock);
        }
    });
}

#[test]
fn a_panicking_display_disturbs_nothing_in_any_state() {
    display_faults(Fault::Panic);
}

#[test]
fn a_re_entering_display_disturbs_nothing_in_any_state() {
    display_faults(Fault::ReEnter);
}

#[test]
fn a_display_acting_on_its_breaker_does_not_deadlock() {
    display_faults(Fault::Act);
}

#[test]
fn a_display_blocking_on_a_thread_that_uses_the_breaker_does_not_deadlock() {
    display_faults(Fault::Block);
}

// ------------------------------------------------------------------------------ config closures

/// D09: the config closure of `get_or_create` runs under no registry lock, whether the name
/// exists or not: it may read the registry, create breakers, and wait for another thread that
/// creates one. This deadlocked when the name existed (the closure ran under the read lock,
/// and the other thread's creation waited for the write lock).
#[test]
fn repro_a_config_closure_may_wait_for_a_thread_that_creates_a_breaker() {
    within("config closure", || {
        let existing = fresh("d09");
        registry().get_or_create(&existing, Config::default);
        for name in [existing, fresh("d09")] {
            let b = registry().get_or_create(&name, || {
                let other = std::thread::spawn(|| {
                    registry().get_or_create(&fresh("d09.other"), Config::default)
                });
                let made = other.join().unwrap();
                assert!(registry().get(made.name()).is_some());
                assert!(registry().breakers().iter().any(|x| x.ptr_eq(&made)));
                // On this thread too.
                let mine = registry().get_or_create(&fresh("d09.nested"), Config::default);
                assert!(registry().get(mine.name()).unwrap().ptr_eq(&mine));
                Config::default()
            });
            assert!(registry().get(&name).unwrap().ptr_eq(&b));
        }
    });
}

/// A config closure that panics, re-enters or blocks, for a new name and for one that exists
/// in each state. A panic leaves no breaker behind and the registry usable.
#[test]
fn config_closure_faults_leave_the_registry_working() {
    within("config closure faults", || {
        // A panic creating a new name: nothing is created, the name stays free.
        let name = fresh("cfg.panic");
        let r = catch_unwind(|| registry().get_or_create(&name, || panic!("config closure")));
        assert_eq!(message(&*r.unwrap_err()), "config closure");
        assert!(registry().get(&name).is_none());
        let clock = ManualClock::new();
        registry().set_clock(&name, clock.clone());
        let b = registry().get_or_create(&name, || config(&clock).build().unwrap());
        still_works(&b, &clock);

        for start in STARTS {
            let clock = ManualClock::new();
            let name = fresh("cfg.state");
            registry().set_clock(&name, clock.clone());
            let b = registry().get_or_create(&name, || config(&clock).build().unwrap());
            enter(&b, start);
            let arm = Arm::new(&b);
            for fault in FAULTS {
                let case = format!("config closure, {fault:?}, in {start:?}");
                arm.once.store(false, SeqCst);
                arm.set(fault);
                let r = catch_unwind(AssertUnwindSafe(|| {
                    registry().get_or_create(&name, || {
                        arm.run(None);
                        config(&clock).build().unwrap()
                    })
                }));
                arm.set(Fault::None);
                match r {
                    Ok(got) => assert!(got.ptr_eq(&b), "{case}"),
                    Err(panic) => {
                        assert_eq!(fault, Fault::Panic, "{case}");
                        assert_eq!(message(&*panic), format!("injected fault in {name}"));
                    }
                }
                let want = if fault.forces_open() {
                    State::ForcedOpen
                } else {
                    start.state()
                };
                assert_eq!(b.state(), want, "{case}");
                arm.assert_clean(&case);
                enter(&b, start);
            }
            still_works(&b, &clock);
        }
    });
}

/// Config closures now run outside the registry's locks, so creators race: every thread gets
/// the one breaker that was inserted first, and a `configure` racing a creation either wins
/// (returns `true`, and the breaker has its config) or finds the breaker there (`false`).
#[test]
fn racing_creators_and_configure_agree_on_one_breaker() {
    within("racing creators", || {
        for _ in 0..200 {
            let name = fresh("race");
            let got: Vec<(Breaker, u32)> = std::thread::scope(|s| {
                let configure = s.spawn(|| {
                    let preset = Config::builder().failures(99).build().unwrap();
                    registry().configure(&name, preset)
                });
                let creators: Vec<_> = (1..=3u32)
                    .map(|n| {
                        let name = &name;
                        s.spawn(move || {
                            let c = || Config::builder().failures(n).build().unwrap();
                            (registry().get_or_create(name, c), n)
                        })
                    })
                    .collect();
                let configured = configure.join().unwrap();
                let got: Vec<_> = creators.into_iter().map(|t| t.join().unwrap()).collect();
                let failures = got[0].0.config().failures().unwrap();
                if configured {
                    assert_eq!(failures, 99, "configure returned true but was not used");
                } else {
                    assert!((1..=3).contains(&failures), "{failures}");
                }
                got
            });
            assert!(
                got.iter().all(|(b, _)| b.ptr_eq(&got[0].0)),
                "two breakers for one name"
            );
            assert!(registry().get(&name).unwrap().ptr_eq(&got[0].0));
        }
    });
}

/// A new breaker reads its clock while it is built, outside the registry's locks, after the
/// registry read which preset applies: a clock that `configure`s the name right then (as
/// another thread could) must not have its preset lost — `configure` said `true`.
#[test]
fn repro_a_configure_while_a_breaker_is_built_is_not_lost() {
    struct Configures {
        name: String,
        done: AtomicBool,
    }
    impl Clock for Configures {
        fn now(&self) -> Duration {
            if !self.done.swap(true, SeqCst) {
                let preset = Config::builder().failures(99).build().unwrap();
                assert!(registry().configure(&self.name, preset));
            }
            Duration::ZERO
        }
    }
    within("configure while building", || {
        let name = fresh("configure-between");
        let clock = Configures {
            name: name.clone(),
            done: AtomicBool::new(false),
        };
        let b = registry().get_or_create(&name, || {
            Config::builder().failures(3).clock(clock).build().unwrap()
        });
        assert_eq!(b.config().failures(), Some(99), "the preset was lost");
        assert!(!registry().configure(&name, Config::default()));
    });
}

// ------------------------------------------------------------------------------ clocks

/// A manual clock that runs the armed fault when read. Reads made while the fault runs (on
/// any thread) are plain, or a re-entering clock would recurse for ever.
struct FaultyClock {
    time: ManualClock,
    arm: Arc<OnceLock<Arc<Arm>>>,
    busy: Arc<AtomicBool>,
}

impl Clock for FaultyClock {
    fn now(&self) -> Duration {
        if let Some(arm) = self.arm.get()
            && !self.busy.swap(true, SeqCst)
        {
            let r = catch_unwind(AssertUnwindSafe(|| arm.run(None)));
            self.busy.store(false, SeqCst);
            if let Err(panic) = r {
                resume_unwind(panic);
            }
        }
        self.time.now()
    }
}

/// A breaker on a faulty clock, its manual time, and the arm that drives its faults.
fn on_faulty_clock(builder: ConfigBuilder) -> (Breaker, ManualClock, Arc<Arm>) {
    let time = ManualClock::new();
    let slot = Arc::new(OnceLock::new());
    let clock = FaultyClock {
        time: time.clone(),
        arm: slot.clone(),
        busy: Arc::default(),
    };
    let b = Breaker::new("faults.clock", builder.clock(clock).build().unwrap());
    let arm = Arm::new(&b);
    slot.set(arm.clone()).ok().unwrap();
    (b, time, arm)
}

/// Every config shape that reads the clock somewhere else: plain (open deadlines, probes),
/// `failures_within`, a time window, and `slow`.
fn clock_configs() -> Vec<(&'static str, ConfigBuilder)> {
    let base = || Config::builder().failures(1).open_for(secs(1));
    let window = Config::builder()
        .open_for(secs(1))
        .failure_rate(50)
        .window(Window::Time(secs(10)))
        .min_calls(1);
    vec![
        ("plain", base()),
        ("failures_within", base().failures_within(secs(10))),
        ("time window", window),
        ("slow", base().slow(secs(5))),
    ]
}

/// Reads the clock wherever the API does, with the fault armed, catching what comes out.
/// Returns the panics that got out.
fn exercise_clock(b: &Breaker, time: &ManualClock, start: Start) -> usize {
    let mut panics = 0;
    let mut step = |f: &dyn Fn()| {
        if catch_unwind(AssertUnwindSafe(f)).is_err() {
            panics += 1;
        }
    };
    step(&|| {
        let _ = b.metrics();
    });
    step(&|| {
        let _ = b.export_state();
    });
    if start == Start::Open {
        time.advance(secs(1));
    }
    step(&|| {
        let _ = b.call(|| Ok::<_, &str>(()));
    });
    panics
}

fn clock_faults(fault: Fault, shapes: Vec<(&'static str, ConfigBuilder)>) {
    within("clock faults", move || {
        for (shape, builder) in shapes {
            for start in STARTS {
                let case = format!("clock, {fault:?}, {shape}, in {start:?}");
                let (b, time, arm) = on_faulty_clock(builder.clone());
                enter(&b, start);
                let before = b.metrics();
                arm.set(fault);
                let panics = exercise_clock(&b, &time, start);
                arm.set(Fault::None);
                if fault != Fault::Panic {
                    assert_eq!(panics, 0, "{case}");
                }
                let after = b.metrics();
                // At most the one call is counted, once.
                assert!(after.calls - before.calls <= 1, "{case}");
                if !fault.forces_open() && start == Start::ForcedOpen {
                    assert_eq!(b.state(), State::ForcedOpen, "{case}");
                }
                arm.assert_clean(&case);
                still_works(&b, &time);
            }
        }
    });
}

#[test]
fn a_panicking_clock_leaves_the_breaker_working_in_any_state() {
    clock_faults(Fault::Panic, clock_configs());
}

/// With a bulkhead and `slow`, the clock is read after the bulkhead place is taken: a panic
/// there leaves the place taken, and calls are refused as `BulkheadFull` even after a reset.
#[test]
fn a_panicking_clock_leaves_a_bulkhead_working() {
    let bulkhead = Config::builder()
        .failures(1)
        .open_for(secs(1))
        .slow(secs(5))
        .max_concurrent(1);
    clock_faults(Fault::Panic, vec![("slow, bulkhead", bulkhead)]);
}

#[test]
fn a_re_entering_clock_disturbs_nothing_in_any_state() {
    clock_faults(Fault::ReEnter, clock_configs());
}

#[test]
fn a_clock_acting_on_its_breaker_leaves_it_working() {
    clock_faults(Fault::Act, clock_configs());
}

#[test]
fn a_clock_blocking_on_a_thread_that_uses_the_breaker_does_not_deadlock() {
    clock_faults(Fault::Block, clock_configs());
}

/// A clock that panics when the registry creates its breaker: the creation fails, the name
/// stays free and the registry usable; the next creation with a working clock succeeds.
#[test]
fn a_clock_panicking_at_creation_leaves_the_registry_working() {
    within("clock at creation", || {
        struct Broken;
        impl Clock for Broken {
            fn now(&self) -> Duration {
                panic!("broken clock")
            }
        }
        let name = fresh("clock.create");
        let r = catch_unwind(|| {
            registry().get_or_create(&name, || Config::builder().clock(Broken).build().unwrap())
        });
        assert_eq!(message(&*r.unwrap_err()), "broken clock");
        assert!(registry().get(&name).is_none());
        let clock = ManualClock::new();
        let b = registry().get_or_create(&name, || config(&clock).build().unwrap());
        still_works(&b, &clock);
        let r = catch_unwind(|| {
            Breaker::new(
                "faults.broken",
                Config::builder().clock(Broken).build().unwrap(),
            )
        });
        assert_eq!(message(&*r.unwrap_err()), "broken clock");
    });
}
