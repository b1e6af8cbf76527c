//! An opening's timer, and what wakes an open breaker through a [`WeakBreaker`]. The timer
//! is armed on the breaker's clock's timers (see `crate::timer`), asked outside every lock and
//! armed under the transition lock; fired, it half-opens the opening it was armed for, or
//! disarmed, it leaves the breaker's rejections to read the clock. A health probe that passed
//! (`probing.rs`) wakes the breaker the same way.

use std::sync::Arc;

use super::handle::{Breaker, WeakBreaker};
use super::inner::Inner;
use super::probing::Probed;
use crate::clock::ClockRef;
use crate::event::Reason;
use crate::state::State;
use crate::sync::{Ordering, lock};
use crate::timer::{Target, Timers};

/// Where an opening's timer is armed.
pub(super) enum TimerSource {
    #[cfg(not(loom))]
    System,
    Custom(Arc<Timers>),
}

impl Inner {
    /// The timers of this breaker's clock, if it has any; asked outside every lock (a user
    /// clock's `timers` is user code, and its panic means none).
    pub(super) fn timer_source(&self) -> Option<TimerSource> {
        match self.clock() {
            #[cfg(not(loom))]
            ClockRef::System => Some(TimerSource::System),
            #[cfg(loom)]
            ClockRef::System => None,
            ClockRef::Custom(c) => {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.timers()))
                    .unwrap_or_else(|payload| {
                        crate::event::discard(payload);
                        None
                    })
                    .map(TimerSource::Custom)
            }
        }
    }

    /// Arms a timer that moves the opening `generation` to half-open at `until`; returns
    /// whether it is armed and its rejections may rely on it (best-effort timers are armed,
    /// but the rejections read the clock). Under the transition lock: runs no user code.
    pub(super) fn arm(&self, timers: &TimerSource, until: u64, generation: u32) -> bool {
        let weak: Box<dyn Target> = Box::new(self.weak_handle());
        match timers {
            #[cfg(not(loom))]
            TimerSource::System => {
                crate::clock::timer_thread::timers().arm(until, generation, weak)
            }
            TimerSource::Custom(t) => t.arm(until, generation, weak).is_some() && t.relied_on(),
        }
    }
}

impl Target for WeakBreaker {
    fn wake(self: Box<Self>, generation: u32, at: u64, defer: bool) {
        let Some(breaker) = self.upgrade() else {
            return;
        };
        drop(self);
        if defer {
            // The system timer thread: the transition only. Its events, and the handle (whose
            // drop may be the last, running the listeners' own drops), go to the notifier.
            let _deferring = crate::timer::Deferring::enter();
            let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                breaker.inner().wake(generation, at)
            }));
            if let Err(payload) = fired {
                crate::event::discard(payload);
            }
            drop(_deferring);
            notify(breaker);
        } else {
            let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                breaker.inner().wake(generation, at);
                drop(breaker);
            }));
            if let Err(payload) = fired {
                tracing::error!(
                    target: "breakerbox",
                    panic = crate::event::panic_message(&*payload),
                    "telling a timed state change panicked (caught)"
                );
                crate::event::discard(payload);
            }
        }
    }

    fn disarm(self: Box<Self>, generation: u32, defer: bool) {
        if let Some(breaker) = self.upgrade() {
            breaker.inner().disarm(generation);
            if defer {
                notify(breaker);
            }
        }
    }
}

impl Probed for WeakBreaker {
    fn passed(&self, generation: u32) -> bool {
        self.upgrade()
            .is_some_and(|b| b.inner().health_probe_passed(generation))
    }
}

/// Hands a breaker to the notifier thread, which tells its queued events and drops the
/// handle. Without a notifier (it could not start) the events stay queued, and the next
/// transition of that breaker tells them.
#[cfg(not(loom))]
fn notify(breaker: Breaker) {
    use std::sync::mpsc::{Sender, channel};
    static NOTIFIER: std::sync::OnceLock<Option<std::sync::Mutex<Sender<Breaker>>>> =
        std::sync::OnceLock::new();
    let sender = NOTIFIER.get_or_init(|| {
        let (tx, rx) = channel::<Breaker>();
        std::thread::Builder::new()
            .name("breakerbox-notify".into())
            .spawn(move || {
                for breaker in rx {
                    let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        breaker.inner().tell_pending();
                        drop(breaker);
                    }));
                    if let Err(payload) = told {
                        crate::event::discard(payload);
                    }
                }
            })
            .ok()
            .map(|_| std::sync::Mutex::new(tx))
    });
    match sender {
        Some(tx) => {
            let tx = tx.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(back) = tx.send(breaker) {
                // The notifier is gone (it cannot be, short of the process ending): keep the
                // handle from being dropped here, on the timer thread.
                core::mem::forget(back.0);
            }
        }
        None => core::mem::forget(breaker),
    }
}

#[cfg(loom)]
fn notify(breaker: Breaker) {
    breaker.inner().tell_pending();
}

impl Inner {
    /// A timer armed for the opening `generation` fired at `at`: to half-open, if still in it.
    fn wake(&self, generation: u32, at: u64) -> bool {
        if self.probe_limit() == 0 {
            // A probe budget of none (`set_probe_budget`): it stays open, and its rejections
            // read the clock again, so the first call after the budget is lifted half-opens it.
            self.disarm(generation);
            return false;
        }
        self.transition(
            generation,
            &[State::Open],
            State::HalfOpen,
            Reason::OpenElapsed,
            None,
            at,
        )
    }

    /// The timer armed for the opening `generation` will not fire: if still in it, rejections
    /// read the clock again, and the first call after the open time half-opens it.
    fn disarm(&self, expect: u32) {
        let _guard = lock(&self.transition);
        let word = self.state.load(Ordering::Acquire);
        if word.generation() == expect && word.is_timed() {
            self.state.store(word.untimed(), Ordering::Release);
        }
    }

    /// Tells the events a deferred transition queued.
    fn tell_pending(&self) {
        if self.extras.get().is_some() {
            self.deliver();
        }
    }

    /// A health probe of the opening `generation` succeeded: to half-open, if still in it (and
    /// a probe budget of none, `set_probe_budget(Some(0))`, does not hold it open).
    fn health_probe_passed(&self, generation: u32) -> bool {
        if self.probe_limit() == 0 {
            return false;
        }
        let now = self.clock().coarse();
        self.transition(
            generation,
            &[State::Open],
            State::HalfOpen,
            Reason::HealthProbe,
            None,
            now,
        )
    }
}
