//! Fault injection in the user code that `#[circuit_breaker]` runs: `fallback` and
//! `classify`. Each one panics, re-enters (the breaker, the registry, and the annotated
//! function itself), acts on the breaker, and blocks on another thread that calls the same
//! function — in every state, and while the protected call itself is panicking. After each,
//! the breaker's state and counts are right and it still trips and closes.
//!
//! Each test has a breaker of its own and a `ManualClock`; nothing sleeps. [`within`] turns a
//! deadlock into a failure; its limit is not a timing assertion.

use std::cell::Cell;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc;
use std::time::Duration;

use breakerbox::{
    Breaker, Config, ManualClock, Outcome, Rejected, SharedState, State, circuit_breaker, registry,
};

#[derive(Debug)]
enum ApiError {
    Down,
    Rejected(#[allow(dead_code)] Rejected),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Down => f.write_str("down"),
            ApiError::Rejected(r) => r.fmt(f),
        }
    }
}

impl From<Rejected> for ApiError {
    fn from(r: Rejected) -> Self {
        ApiError::Rejected(r)
    }
}

#[track_caller]
fn within(what: &str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(()) => {
            if let Err(panic) = t.join().expect("caught above") {
                resume_unwind(panic);
            }
        }
        Err(_) => panic!("{what}: deadlocked"),
    }
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

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None = 0,
    Panic,
    ReEnter,
    Act,
    Block,
}

const FAULTS: [Fault; 4] = [Fault::Panic, Fault::ReEnter, Fault::Act, Fault::Block];

/// What the user code of one test does, and whether it is running now (on any thread): user
/// code reached again from inside itself behaves plainly, or it would recurse for ever.
struct Arm {
    name: &'static str,
    fault: AtomicU8,
    busy: AtomicBool,
    ran: AtomicUsize,
}

impl Arm {
    const fn new(name: &'static str) -> Arm {
        Arm {
            name,
            fault: AtomicU8::new(0),
            busy: AtomicBool::new(false),
            ran: AtomicUsize::new(0),
        }
    }

    fn set(&self, fault: Fault) {
        if fault != Fault::None {
            self.ran.store(0, SeqCst);
        }
        self.fault.store(fault as u8, SeqCst);
    }

    fn breaker(&self) -> Breaker {
        registry()
            .get(self.name)
            .expect("created by the first call")
    }

    /// Runs the armed fault; `again` calls the annotated function once more.
    fn run(&'static self, again: fn()) {
        let fault = [
            Fault::None,
            Fault::Panic,
            Fault::ReEnter,
            Fault::Act,
            Fault::Block,
        ][usize::from(self.fault.load(SeqCst))];
        if fault == Fault::None || self.busy.swap(true, SeqCst) {
            return;
        }
        self.ran.fetch_add(1, SeqCst);
        let r = catch_unwind(AssertUnwindSafe(|| {
            let b = self.breaker();
            match fault {
                Fault::None => {}
                Fault::Panic => panic!("injected fault in {}", self.name),
                Fault::ReEnter => {
                    let (state, m) = (b.state(), b.metrics());
                    assert_eq!(m.state, state);
                    assert!(registry().get(self.name).unwrap().ptr_eq(&b));
                    let made = registry().get_or_create("faults-attr-made", Config::default);
                    assert_eq!(made.name(), "faults-attr-made");
                    again();
                }
                Fault::Act => b.force_open(),
                Fault::Block => {
                    std::thread::spawn(move || {
                        again();
                        let b = registry().get(self.name).unwrap();
                        let _ = b.metrics();
                        b.force_open();
                    })
                    .join()
                    .unwrap();
                }
            }
        }));
        self.busy.store(false, SeqCst);
        if let Err(panic) = r {
            resume_unwind(panic);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Start {
    Closed,
    Open,
    /// Half-open with its one probe slot taken: calls are refused.
    HalfOpenFull,
    /// Half-open with its probe slot free: the next call probes.
    HalfOpen,
    ForcedOpen,
    Disabled,
}

const STARTS: [Start; 6] = [
    Start::Closed,
    Start::Open,
    Start::HalfOpenFull,
    Start::HalfOpen,
    Start::ForcedOpen,
    Start::Disabled,
];

impl Start {
    fn admits(self) -> bool {
        matches!(self, Start::Closed | Start::HalfOpen | Start::Disabled)
    }
}

/// Puts `b` (`failures = 1`, `half_open_calls = 1`) into `start`; a probe permit is returned
/// for `HalfOpenFull`, which holds the slot.
fn enter(b: &'static Breaker, start: Start) -> Option<breakerbox::Permit<'static>> {
    b.reset();
    let half_open = || b.import_state(&SharedState::new(State::HalfOpen, None, 0));
    match start {
        Start::Closed => {}
        Start::Open => b.trip_for(Duration::from_secs(1)),
        Start::HalfOpenFull => {
            half_open();
            return Some(b.try_acquire().expect("the probe slot"));
        }
        Start::HalfOpen => half_open(),
        Start::ForcedOpen => b.force_open(),
        Start::Disabled => b.disable(),
    }
    None
}

/// From a reset: a success, a failure that trips, a rejection, and a success after a second
/// that closes, each counted once.
#[track_caller]
fn still_works(b: &Breaker, clock: &ManualClock, call: impl Fn(bool) -> bool) {
    b.reset();
    let before = b.metrics();
    assert!(call(true));
    assert!(!call(false));
    assert_eq!(b.state(), State::Open);
    let _ = call(true);
    clock.advance(Duration::from_secs(1));
    assert!(call(true));
    assert_eq!(b.state(), State::Closed);
    let after = b.metrics();
    assert_eq!(
        (
            after.successes - before.successes,
            after.failures - before.failures,
            after.rejected - before.rejected,
            after.times_opened - before.times_opened,
        ),
        (2, 1, 1, 1)
    );
}

fn leak(b: Breaker) -> &'static Breaker {
    Box::leak(Box::new(b))
}

// ------------------------------------------------------------------------------ fallback

static FALLBACK: Arm = Arm::new("faults-attr-fallback");

thread_local!(static PANICKING: Cell<bool> = const { Cell::new(false) });

fn answer_from_cache(ok: bool) -> Result<u32, ApiError> {
    FALLBACK.run(|| {
        let _ = guarded(true);
    });
    let _ = ok;
    Ok(99)
}

#[circuit_breaker(name = "faults-attr-fallback", failures = 1, open_for = "1s", fallback = answer_from_cache)]
fn guarded(ok: bool) -> Result<u32, ApiError> {
    if PANICKING.with(Cell::get) {
        panic!("the protected call");
    }
    if ok { Ok(1) } else { Err(ApiError::Down) }
}

#[test]
fn fallback_faults_in_every_state_leave_the_breaker_working() {
    within("fallback faults", || {
        let clock = ManualClock::new();
        assert!(registry().set_clock(FALLBACK.name, clock.clone()));
        let _ = guarded(true);
        let b = leak(FALLBACK.breaker());
        for fault in FAULTS {
            for start in STARTS {
                for panicking in [false, true] {
                    let case = format!("fallback, {fault:?}, in {start:?}, panicking {panicking}");
                    let probe = enter(b, start);
                    let before = b.metrics();
                    FALLBACK.set(fault);
                    PANICKING.with(|p| p.set(panicking));
                    let r = catch_unwind(|| guarded(true));
                    PANICKING.with(|p| p.set(false));
                    FALLBACK.set(Fault::None);
                    let after = b.metrics();
                    if start.admits() {
                        // The fallback does not run for an admitted call.
                        assert_eq!(FALLBACK.ran.load(SeqCst), 0, "{case}");
                        match r {
                            Err(panic) => {
                                assert!(panicking, "{case}");
                                assert_eq!(message(&*panic), "the protected call", "{case}");
                            }
                            Ok(r) => assert_eq!(r.unwrap(), 1, "{case}"),
                        }
                        let want = match start {
                            Start::Disabled => State::Disabled,
                            _ if panicking => State::Open,
                            _ => State::Closed,
                        };
                        assert_eq!(b.state(), want, "{case}");
                        if start != Start::Disabled {
                            assert_eq!(after.calls - before.calls, 1, "{case}");
                        }
                    } else {
                        // Refused: the fallback answers (or panics, its panic the caller's).
                        assert_eq!(FALLBACK.ran.load(SeqCst), 1, "{case}");
                        // A re-entering fallback, or the thread it waits for, calls once more: refused too.
                        let again = u64::from(matches!(fault, Fault::ReEnter | Fault::Block));
                        assert_eq!(after.rejected - before.rejected, 1 + again, "{case}");
                        match (fault, r) {
                            (Fault::Panic, Err(panic)) => assert_eq!(
                                message(&*panic),
                                "injected fault in faults-attr-fallback",
                                "{case}"
                            ),
                            (Fault::Panic, Ok(_)) => panic!("{case}: swallowed"),
                            (_, Ok(r)) => assert_eq!(r.unwrap(), 99, "{case}"),
                            (_, Err(panic)) => panic!("{case}: {}", message(&*panic)),
                        }
                        let want = match (fault, start) {
                            (Fault::Act | Fault::Block, _) => State::ForcedOpen,
                            (_, Start::Open) => State::Open,
                            (_, Start::HalfOpenFull) => State::HalfOpen,
                            _ => State::ForcedOpen,
                        };
                        assert_eq!(b.state(), want, "{case}");
                    }
                    if let Some(p) = probe {
                        p.ignore();
                    }
                    still_works(b, &clock, |ok| matches!(guarded(ok), Ok(1)));
                }
            }
        }
    });
}

// ------------------------------------------------------------------------------ classify

static CLASSIFY: Arm = Arm::new("faults-attr-classify");

fn judge(result: &Result<u32, ApiError>) -> Outcome {
    CLASSIFY.run(|| {
        let _ = classified(true);
    });
    match result {
        Ok(_) => Outcome::Success,
        Err(ApiError::Down) => Outcome::Failure,
        Err(ApiError::Rejected(_)) => Outcome::Ignored,
    }
}

#[circuit_breaker(name = "faults-attr-classify", failures = 1, open_for = "1s", classify = judge)]
fn classified(ok: bool) -> Result<u32, ApiError> {
    if PANICKING.with(Cell::get) {
        panic!("the protected call");
    }
    if ok { Ok(1) } else { Err(ApiError::Down) }
}

#[test]
fn classify_faults_in_every_state_leave_the_breaker_working() {
    within("classify faults", || {
        let clock = ManualClock::new();
        assert!(registry().set_clock(CLASSIFY.name, clock.clone()));
        let _ = classified(true);
        let b = leak(CLASSIFY.breaker());
        for fault in FAULTS {
            for start in STARTS {
                for panicking in [false, true] {
                    let case = format!("classify, {fault:?}, in {start:?}, panicking {panicking}");
                    let probe = enter(b, start);
                    let before = b.metrics();
                    CLASSIFY.set(fault);
                    PANICKING.with(|p| p.set(panicking));
                    // A failing call, classified `Failure`: it trips where it counts.
                    let r = catch_unwind(|| classified(false));
                    PANICKING.with(|p| p.set(false));
                    CLASSIFY.set(Fault::None);
                    let after = b.metrics();
                    let ran = CLASSIFY.ran.load(SeqCst);
                    if !start.admits() || panicking {
                        // Refused, or no result to classify.
                        assert_eq!(ran, 0, "{case}");
                    } else {
                        assert_eq!(ran, 1, "{case}");
                    }
                    if !start.admits() {
                        assert!(matches!(r, Ok(Err(ApiError::Rejected(_)))), "{case}");
                        assert_eq!(after.rejected - before.rejected, 1, "{case}");
                    } else {
                        match r {
                            Err(panic) => {
                                let m = message(&*panic);
                                assert!(
                                    (panicking && m == "the protected call")
                                        || (fault == Fault::Panic
                                            && m == "injected fault in faults-attr-classify"),
                                    "{case}: {m}"
                                );
                            }
                            Ok(r) => {
                                assert!(!panicking && fault != Fault::Panic, "{case}");
                                assert!(matches!(r, Err(ApiError::Down)), "{case}");
                            }
                        }
                        let forced = ran == 1 && matches!(fault, Fault::Act | Fault::Block);
                        let want = match start {
                            _ if forced => State::ForcedOpen,
                            Start::Disabled => State::Disabled,
                            _ => State::Open,
                        };
                        assert_eq!(b.state(), want, "{case}");
                        if start != Start::Disabled {
                            // One failure, whether classified or counted by a panic; a
                            // re-entering classify adds its own call, refused or counted.
                            assert!(after.failures - before.failures >= 1, "{case}");
                            let calls = after.calls - before.calls;
                            let extra =
                                u64::from(ran == 1 && fault != Fault::Panic && fault != Fault::Act);
                            assert_eq!(calls, 1 + extra, "{case}");
                        }
                    }
                    if let Some(p) = probe {
                        p.ignore();
                    }
                    still_works(b, &clock, |ok| matches!(classified(ok), Ok(1)));
                }
            }
        }
    });
}
