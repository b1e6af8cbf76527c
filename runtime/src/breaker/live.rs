//! The live control plane's hooks into the breaker: the open timer (see `crate::timer`) and
//! `explain`.

use core::time::Duration;
use std::sync::Arc;

use super::inner::Inner;
use super::{Breaker, WeakBreaker};
use crate::clock::ClockRef;
use crate::config::Config;
use crate::event::Reason;
use crate::explain::{Explanation, Parts};
use crate::reload::ReconfigureError;
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
            TimerSource::System => crate::clock::system::timers().arm(until, generation, weak),
            TimerSource::Custom(t) => t.arm(until, generation, weak).is_some() && t.relied_on(),
        }
    }

    /// What `Breaker::explain` says now.
    fn explain(&self) -> Explanation {
        let m = self.metrics();
        let now = self.clock().coarse();
        let why = match self.cold.get() {
            Some(cold) => cold.why.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            None => Default::default(),
        };
        let window = self.window.as_ref().map(|w| {
            let t = w.tally(now, || self.window_calls());
            (t.failures, t.slow, t.calls)
        });
        Explanation::new(Parts {
            name: m.name,
            key: self.key().map(str::to_owned),
            state: m.state,
            now: Duration::from_nanos(now),
            since: Duration::from_nanos(self.state_since.load(Ordering::Relaxed)),
            why,
            last_failure: self.last_failure(),
            open_until: (m.state == State::Open)
                .then(|| Duration::from_nanos(self.open_until.load(Ordering::Relaxed))),
            reopens: self.reopens_since_close(),
            consecutive_failures: m.consecutive_failures,
            probe_successes: m.consecutive_successes,
            window,
            config: (*self.config).clone(),
        })
    }

    /// The short explanation for the `tracing` event of an opening. It reads the clock, which
    /// may be the user's and panic: caught, as a listener's panic is (empty then).
    pub(super) fn short_why(&self) -> String {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.explain().short().to_string()
        }))
        .unwrap_or_else(|payload| {
            crate::event::discard(payload);
            String::new()
        })
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
    /// Why the breaker is in its state, as data and (through `Display`) as a sentence; see
    /// [`Explanation`]. For a keyed family's entry, ask its breaker
    /// ([`BreakerMap::get`](crate::BreakerMap::get)).
    ///
    /// Reads the clock, and allocates: meant for dashboards, logs and admin endpoints, not
    /// for the call path.
    pub fn explain(&self) -> Explanation {
        self.inner().explain()
    }

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
        if self.inner().cold.get().is_some() {
            self.inner().deliver();
        }
    }
}

impl Breaker {
    /// Applies `config` to this live breaker without losing its state, counts, window or open
    /// time: the new thresholds judge the calls already in the window from the next call on,
    /// a new `open_for` (or backoff, jitter, cap) applies from the next opening (an open
    /// breaker keeps its deadline), and a new `half_open_calls` or `successes` applies to
    /// the round under way. The breaker's clock stays its own (`config`'s is not used), and
    /// so does its health probe if `config` has none (a new `probe_every` applies from the
    /// next opening).
    ///
    /// Refused, with nothing changed, for a config that changes what shapes the breaker's
    /// window or call path: the window's kind or size, adding or removing `failure_rate`,
    /// `slow_rate`, `slow`, `max_concurrent` or `failures_within`. Those apply only to a new
    /// breaker. Returns whether the config differed.
    ///
    /// A call under way while the config changes may read some values from the old config
    /// and some from the new. Each replaced config is kept (a couple of hundred bytes) until
    /// the breaker is dropped, since such a call may still read it; a registry breaker keeps
    /// them for the process, so reload on a change, not on a timer.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, State};
    ///
    /// let breaker = Breaker::new("users", Config::builder().failures(3).build()?);
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// breaker.reconfigure(Config::builder().failures(2).build()?).unwrap();
    /// let _ = breaker.call(|| Err::<(), _>("down"));
    /// assert_eq!(breaker.state(), State::Open, "the streak was kept, and judged by 2");
    /// # Ok::<(), breakerbox_runtime::ConfigError>(())
    /// ```
    pub fn reconfigure(&self, config: Config) -> Result<bool, ReconfigureError> {
        let inner = self.inner();
        crate::reload::compatible(&inner.config, &config)?;
        let mut config = config;
        config.clock = inner.config.clock.clone();
        if config.probe.is_none() {
            // A config from a file has no probe: the code's stays.
            config.probe = inner.config.probe.clone();
        }
        if *inner.config == config {
            return Ok(false);
        }
        // Interned outside the lock (the pool may drop a config, and with it a clock).
        let config = crate::config::intern(config);
        let old = {
            let _guard = lock(&inner.transition);
            // SAFETY: the old config goes to `retired`, which lives as long as the breaker.
            unsafe { inner.config.swap(config) }
        };
        inner
            .cold()
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(old);
        Ok(true)
    }

    /// Whether `config` can be applied by [`reconfigure`](Breaker::reconfigure). For the
    /// TOML loader's all-or-nothing reload.
    #[cfg(feature = "serde")]
    pub(crate) fn can_reconfigure(&self, config: &Config) -> Result<(), ReconfigureError> {
        crate::reload::compatible(&self.inner().config, config)
    }
}
