//! What wakes an open breaker through a [`WeakBreaker`]: an opening's timer (armed in
//! `timer_source.rs`) fired to half-open the opening it was armed for, or disarmed; and a health
//! probe that passed (`probing.rs`).

use super::{Breaker, WeakBreaker};
use crate::event::Reason;
use crate::state::State;
use crate::sync::{Ordering, lock};
use crate::timer::Target;

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
                breaker.wake(generation, at)
            }));
            if let Err(payload) = fired {
                crate::event::discard(payload);
            }
            drop(_deferring);
            notify(breaker);
        } else {
            let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                breaker.wake(generation, at);
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
            breaker.disarm(generation);
            if defer {
                notify(breaker);
            }
        }
    }
}

impl super::probing::Probed for WeakBreaker {
    fn passed(&self, generation: u32) -> bool {
        self.upgrade()
            .is_some_and(|b| b.health_probe_passed(generation))
    }
}

/// Hands a breaker to the notifier thread, which tells its queued events and drops the
/// handle. Without a notifier (it could not start) the events stay queued, and the next
/// transition of that breaker tells them.
#[cfg(not(loom))]
fn notify(breaker: crate::Breaker) {
    use std::sync::mpsc::{Sender, channel};
    static NOTIFIER: std::sync::OnceLock<Option<std::sync::Mutex<Sender<crate::Breaker>>>> =
        std::sync::OnceLock::new();
    let sender = NOTIFIER.get_or_init(|| {
        let (tx, rx) = channel::<crate::Breaker>();
        std::thread::Builder::new()
            .name("breakerbox-notify".into())
            .spawn(move || {
                for breaker in rx {
                    let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        breaker.tell_pending();
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
fn notify(breaker: crate::Breaker) {
    breaker.tell_pending();
}

impl Breaker {
    /// A timer armed for the opening `generation` fired at `at`: to half-open, if still in it.
    pub(crate) fn wake(&self, generation: u32, at: u64) -> bool {
        if self.inner().probe_limit() == 0 {
            // A probe budget of none (`set_probe_budget`): it stays open, and its rejections
            // read the clock again, so the first call after the budget is lifted half-opens it.
            self.disarm(generation);
            return false;
        }
        self.inner().transition(
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
    pub(crate) fn disarm(&self, expect: u32) {
        let inner = self.inner();
        let _guard = lock(&inner.transition);
        let word = inner.state.load(Ordering::Acquire);
        if word.generation() == expect && word.is_timed() {
            inner.state.store(word.untimed(), Ordering::Release);
        }
    }

    /// Tells the events a deferred transition queued.
    pub(crate) fn tell_pending(&self) {
        if self.inner().extras.get().is_some() {
            self.inner().deliver();
        }
    }
}
