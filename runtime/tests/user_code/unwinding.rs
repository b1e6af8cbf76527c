//! User code that panics in awkward places (a clock while unwinding, a payload that panics on
//! drop, a future behind a catcher) and family clocks that re-enter the registry.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use breakerbox_runtime::{
    Breaker, BreakerMap, Config, Error, ManualClock, RejectReason, State, registry,
};

use crate::calls::{BombDisplay, S, clocked, fail, ok, rejected, within};

// A clock that panics while the protected call is itself panicking. An abort would kill the
// test binary, so each case runs in a child process of this binary.
/// A manual clock that panics when read while the thread is unwinding.
struct UnwindPanicClock(ManualClock);
impl breakerbox_runtime::Clock for UnwindPanicClock {
    fn now(&self) -> Duration {
        if std::thread::panicking() {
            panic!("clock read while unwinding panics");
        }
        self.0.now()
    }
}

fn unwind_clock_case(shape: &str) {
    let clock = ManualClock::new();
    let base = Config::builder()
        .clock(UnwindPanicClock(clock.clone()))
        .open_for(S);
    let config = match shape {
        "slow" => base.failures(1).slow(S),
        "failures_within" => base.failures(1).failures_within(S),
        "time_window" => base
            .failure_rate(50)
            .window(breakerbox_runtime::Window::Time(10 * S))
            .min_calls(1),
        "probe" => base.failures(1),
        other => panic!("no shape {other}"),
    }
    .build()
    .unwrap();
    let b = Breaker::new("adv-unwind-clock", config);
    if shape == "probe" {
        b.trip_for(S);
        clock.advance(S);
    }
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _: Result<(), Error<&str>> = b.call(|| panic!("the protected call panics"));
    }));
    let payload = caught.expect_err("the call's panic resumes");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the protected call panics")
    );
    if shape == "probe" {
        // The probe's failure could not be dated: its slot is held until probe_timeout (60 s
        // by default) from entering half-open, then the round re-opens.
        assert_eq!(b.state(), State::HalfOpen);
        assert_eq!(rejected(&b), RejectReason::HalfOpenFull);
        clock.advance(60 * S);
        assert_eq!(rejected(&b), RejectReason::Open);
    }
    // The breaker still works afterwards.
    b.reset();
    ok(&b);
}

#[test]
fn clock_panicking_during_a_panicking_protected_call_does_not_abort() {
    if let Ok(shape) = std::env::var("ADV_UNWIND_CLOCK_SHAPE") {
        unwind_clock_case(&shape);
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut failed = Vec::new();
    for shape in ["slow", "failures_within", "time_window", "probe"] {
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "unwinding::clock_panicking_during_a_panicking_protected_call_does_not_abort",
                "--test-threads=1",
            ])
            .env("ADV_UNWIND_CLOCK_SHAPE", shape)
            .output()
            .unwrap();
        // The child runs exactly this test, so a renamed test cannot pass by running nothing.
        let ran = String::from_utf8_lossy(&out.stdout).contains("test result: ok. 1 passed");
        if !out.status.success() || !ran {
            failed.push(format!(
                "{shape}: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .filter(|l| l.contains("panicked") || l.contains("abort"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn display_panicking_with_a_payload_that_panics_on_drop_is_contained() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-bomb-display",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    let r = catch_unwind(AssertUnwindSafe(|| fail(&b, BombDisplay)));
    assert!(r.is_ok(), "a panic got out of the breaker");
    assert_eq!(
        b.state(),
        State::Open,
        "the failure that trips it opened it"
    );
    assert_eq!(b.metrics().times_opened, 1);
    // A rate trip, whose message is kept while the window is short.
    let w = Breaker::new(
        "adv-bomb-display-rate",
        clocked(&clock)
            .failure_rate(100)
            .window(breakerbox_runtime::Window::Calls(2))
            .min_calls(2)
            .build()
            .unwrap(),
    );
    let r = catch_unwind(AssertUnwindSafe(|| {
        fail(&w, BombDisplay);
        fail(&w, BombDisplay);
    }));
    assert!(r.is_ok(), "a panic got out of the breaker");
    assert_eq!(w.state(), State::Open);
}

thread_local!(static IN_CLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });

/// Runs `f` unless this thread is already in it: a clock that lists families reads the clocks
/// of every family, its own included, and must not recurse for ever.
fn once_per_thread(f: impl FnOnce()) {
    if !IN_CLOCK.with(|c| c.replace(true)) {
        let r = catch_unwind(AssertUnwindSafe(f));
        IN_CLOCK.with(|c| c.set(false));
        if let Err(p) = r {
            std::panic::resume_unwind(p);
        }
    }
}

/// A clock that lists the registry's families when read.
struct FamiliesClock(ManualClock);
impl breakerbox_runtime::Clock for FamiliesClock {
    fn now(&self) -> Duration {
        once_per_thread(|| {
            let _ = registry().families();
        });
        self.0.now()
    }
}

#[test]
fn family_clock_may_use_the_registry_while_the_family_is_made() {
    within("a family's clock lists families at creation", || {
        let config = Config::builder()
            .clock(FamiliesClock(ManualClock::new()))
            .build()
            .unwrap();
        let fam = registry()
            .family::<String>("adv-family-clock", move || config)
            .unwrap();
        fam.call("k", || Ok::<_, &str>(())).unwrap();
        assert_eq!(fam.len(), 1);
    });
}

/// A manual clock that lists the registry's families when read, once armed.
struct ArmedFamiliesClock(ManualClock, Arc<AtomicBool>);
impl breakerbox_runtime::Clock for ArmedFamiliesClock {
    fn now(&self) -> Duration {
        if self.1.load(Ordering::SeqCst) {
            once_per_thread(|| {
                let _ = registry().families();
            });
        }
        self.0.now()
    }
}

#[test]
fn family_clock_may_list_families_while_an_evicted_key_still_records() {
    within(
        "a family's clock lists families while a key is evicted",
        || {
            let time = ManualClock::new();
            let armed = Arc::new(AtomicBool::new(false));
            let config = Config::builder()
                .clock(ArmedFamiliesClock(time.clone(), armed.clone()))
                .idle_for(S)
                .build()
                .unwrap();
            let fam = registry()
                .family::<String>("adv-family-clock-evicted", move || config)
                .unwrap();
            // A call admitted before its key is evicted, still running: its breaker is evicted
            // but not yet freed.
            let running = fam.try_acquire("slow").unwrap();
            time.advance(2 * S);
            assert_eq!(fam.sweep(), 1);
            armed.store(true, Ordering::SeqCst);
            let listed = registry().families();
            let me = listed
                .iter()
                .find(|f| f.name == "adv-family-clock-evicted")
                .unwrap();
            assert_eq!(me.evicted.keys, 1);
            armed.store(false, Ordering::SeqCst);
            running.success();
            let gone = fam.evicted();
            assert_eq!((gone.keys, gone.calls, gone.successes), (1, 1, 1));
        },
    );
}

// The tower layer's case for call_async: a panic in the awaited future, caught around the poll, the
// future dropped afterwards.
fn poll_catching<F: std::future::Future>(
    fut: &mut std::pin::Pin<Box<F>>,
) -> Result<std::task::Poll<F::Output>, ()> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))).map_err(|_| ())
}

#[test]
fn call_async_panic_behind_a_catcher_counts_as_failure() {
    let clock = ManualClock::new();
    let b = Breaker::new(
        "adv-async-panic",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    let mut fut = Box::pin(b.call_async(async {
        if true {
            panic!("awaited future panics");
        }
        Ok::<(), &str>(())
    }));
    assert!(poll_catching(&mut fut).is_err());
    drop(fut);
    assert_eq!(b.metrics().failures, 1);
    assert_eq!(b.state(), State::Open);
    // A keyed family's, as a probe.
    let hosts: BreakerMap<String> = BreakerMap::new(
        "adv-async-keyed",
        clocked(&clock).failures(1).open_for(S).build().unwrap(),
    );
    hosts.breaker("h").trip_for(S);
    clock.advance(S);
    let mut fut = Box::pin(hosts.call_async("h", async {
        if true {
            panic!("probe panics");
        }
        Ok::<(), &str>(())
    }));
    assert!(poll_catching(&mut fut).is_err());
    drop(fut);
    assert_eq!(
        hosts.get("h").unwrap().state(),
        State::Open,
        "the panicking probe re-opened it"
    );
}
