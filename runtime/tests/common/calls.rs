//! What the tests of user code and racing calls share: clocked configs, user code that panics or re-enters, calls
//! of each outcome, and a deadlock guard.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, panic_any};
use std::time::Duration;

use breakerbox_runtime::{Breaker, Config, Error, ManualClock, RejectReason};

pub const S: Duration = Duration::from_secs(1);

pub fn clocked(clock: &ManualClock) -> breakerbox_runtime::ConfigBuilder {
    Config::builder().clock(clock.clone())
}

/// An error whose `Display` always panics.
pub struct PanickyDisplay;
impl fmt::Display for PanickyDisplay {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        panic!("Display panicked on purpose")
    }
}

/// An error whose `Display` runs `f` (which may re-enter the breaker) and writes "reentered".
pub struct Reentrant<F: Fn()>(pub F);
impl<F: Fn()> fmt::Display for Reentrant<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (self.0)();
        f.write_str("reentered")
    }
}

pub fn fail<E: fmt::Display>(b: &Breaker, e: E) {
    let r: Result<(), Error<E>> = b.call(|| Err(e));
    assert!(matches!(r, Err(Error::Inner(_))), "the call was not run");
}

pub fn ok(b: &Breaker) {
    let r: Result<(), Error<&str>> = b.call(|| Ok(()));
    assert!(r.is_ok(), "rejected: {:?}", r.err());
}

pub fn rejected(b: &Breaker) -> RejectReason {
    match b.try_acquire() {
        Ok(p) => {
            p.ignore();
            panic!("admitted, state {:?}", b.state())
        }
        Err(r) => r.reason(),
    }
}

/// A panic payload whose own Drop panics.
pub struct BombPayload;
impl Drop for BombPayload {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("payload drop panics");
        }
    }
}

/// A Display that panics with a payload whose own Drop panics.
pub struct BombDisplay;
impl fmt::Display for BombDisplay {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        panic_any(BombPayload)
    }
}

/// Runs `f` on a thread of its own; a deadlock fails the test instead of hanging it (the limit
/// detects a failure; it times nothing).
pub fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(f));
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => match t.join().unwrap() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(_) => panic!("{what}: deadlocked"),
    }
}
