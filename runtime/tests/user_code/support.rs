//! What the fault tests share: the states a breaker is put in ([`Start`]), the faults user
//! code injects ([`Fault`], armed through an [`Arm`]), and the checks that the breaker still
//! works afterwards.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, Config, ConfigBuilder, Error, Event, ManualClock, RejectReason, SharedState, State,
    WeakBreaker, registry,
};

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Runs `f` on a thread of its own and waits for it. A deadlock fails the test rather than
/// hanging it; the limit is a failure detector, not a timing assertion.
#[track_caller]
pub fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
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
pub fn fresh(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("faults.{prefix}.{}", N.fetch_add(1, SeqCst))
}

pub fn message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(not a string)".to_owned()
    }
}

/// `failures(1)`, open for 1 s: one failure trips, one success after a second closes.
pub fn config(clock: &ManualClock) -> ConfigBuilder {
    Config::builder()
        .failures(1)
        .open_for(secs(1))
        .clock(clock.clone())
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Start {
    Closed,
    Open,
    HalfOpen,
    ForcedOpen,
    Disabled,
}

pub const STARTS: [Start; 5] = [
    Start::Closed,
    Start::Open,
    Start::HalfOpen,
    Start::ForcedOpen,
    Start::Disabled,
];

impl Start {
    pub fn state(self) -> State {
        match self {
            Start::Closed => State::Closed,
            Start::Open => State::Open,
            Start::HalfOpen => State::HalfOpen,
            Start::ForcedOpen => State::ForcedOpen,
            Start::Disabled => State::Disabled,
        }
    }

    /// Whether a call is admitted in this state.
    pub fn admits(self) -> bool {
        matches!(self, Start::Closed | Start::HalfOpen | Start::Disabled)
    }
}

/// Puts a `config` breaker into `s`, fresh from a reset.
pub fn enter(b: &Breaker, s: Start) {
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
pub fn attempt(b: &Breaker, ok: bool, panicking: bool) -> bool {
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
pub fn leave(
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
pub fn still_works(b: &Breaker, clock: &ManualClock) {
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

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
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

pub const FAULTS: [Fault; 4] = [Fault::Panic, Fault::ReEnter, Fault::Act, Fault::Block];

impl Fault {
    pub fn from(n: u8) -> Fault {
        [
            Fault::None,
            Fault::Panic,
            Fault::ReEnter,
            Fault::Act,
            Fault::Block,
        ][usize::from(n)]
    }

    /// Whether the fault forces the breaker open, so that it ends forced open.
    pub fn forces_open(self) -> bool {
        matches!(self, Fault::Act | Fault::Block)
    }
}

/// A fault armed on one breaker: what user code does when it runs, and what went wrong
/// inside it that a caught panic would otherwise hide.
#[derive(Default)]
pub struct Arm {
    pub fault: AtomicU8,
    pub breaker: OnceLock<WeakBreaker>,
    pub once: AtomicBool,
    pub ran: AtomicUsize,
    pub problems: Mutex<Vec<String>>,
}

impl Arm {
    pub fn new(b: &Breaker) -> Arc<Arm> {
        let arm = Arm::default();
        arm.breaker.set(b.downgrade()).unwrap();
        Arc::new(arm)
    }

    pub fn set(&self, fault: Fault) {
        self.fault.store(fault as u8, SeqCst);
    }

    pub fn problem(&self, p: String) {
        self.problems.lock().unwrap().push(p);
    }

    #[track_caller]
    pub fn assert_clean(&self, case: &str) {
        let problems = self.problems.lock().unwrap();
        assert!(problems.is_empty(), "{case}: {problems:#?}");
    }

    /// Runs the armed fault; `event` is what the user code was told, if it is a listener.
    pub fn run(&self, event: Option<&Event>) {
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

    pub fn re_enter(&self, b: &Breaker, event: Option<&Event>) {
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
