//! The state machine: every transition, made under the transition lock, and how it is told:
//! the queue of events not yet told, delivered in order by one thread at a time, to the
//! breaker's listeners, then the registry's, and to `tracing` with the breaker's explanation.

use core::fmt;
use core::time::Duration;

use super::inner::{Inner, Pending};
use super::open_timer::TimerSource;
use super::probing::{Retired, Start, Wheel};
use super::rejected::message;
use crate::clock::nanos;
use crate::error::NO_RETRY;
use crate::event::{Event, Reason};
use crate::explain::{Explanation, Parts};
use crate::probe::Probe;
use crate::state::{Round, State, Streak, Word};
use crate::sync::{Mutex, Ordering, lock};

/// One transition to make: from one of `from` (in generation `expect`, if given) to `to`.
struct Change<'a> {
    /// The generation the caller saw; `None` for a change by hand, from whatever generation.
    expect: Option<u32>,
    from: &'a [State],
    to: State,
    reason: Reason,
    /// The failure that caused it, whose message is kept if it opens the breaker.
    cause: Option<&'a dyn fmt::Display>,
    /// When, on the breaker's clock.
    now: u64,
    /// How long to stay open; `None` for the policy's time (`next_open_for`).
    open_for: Option<Duration>,
    /// For a state taken on from a store: who changed it and why, as the store tells it.
    told: Option<&'a str>,
}

impl Inner {
    /// How many times `manual` ran (see `Extras::manual`); 0 before any did.
    pub(super) fn manual_changes(&self) -> u32 {
        self.extras
            .get()
            .map_or(0, |c| c.manual.load(std::sync::atomic::Ordering::Relaxed))
    }

    pub(super) fn manual(&self, to: State, open_for: Option<Duration>) {
        self.extras()
            .manual
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = self.clock().coarse();
        let reason = match (to, open_for) {
            (State::Open, Some(d)) => Reason::TripFor(d),
            (State::ForcedOpen, _) => Reason::ForcedOpen,
            (State::Disabled, _) => Reason::Disabled,
            _ => Reason::Reset,
        };
        self.transition_any(&State::ALL, to, reason, None, now, open_for, None);
    }

    /// Moves from one of `from` in `generation` to `to`. Returns whether it did.
    pub(super) fn transition(
        &self,
        generation: u32,
        from: &[State],
        to: State,
        reason: Reason,
        cause: Option<&dyn fmt::Display>,
        now: u64,
    ) -> bool {
        self.change(Change {
            expect: Some(generation),
            from,
            to,
            reason,
            cause,
            now,
            open_for: None,
            told: None,
        })
    }

    /// Moves from one of `from`, whatever the generation, to `to` (`told`: who changed it and
    /// why, for a state taken on from a store). Returns whether it did.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn transition_any(
        &self,
        from: &[State],
        to: State,
        reason: Reason,
        cause: Option<&dyn fmt::Display>,
        now: u64,
        open_for: Option<Duration>,
        told: Option<&str>,
    ) -> bool {
        self.change(Change {
            expect: None,
            from,
            to,
            reason,
            cause,
            now,
            open_for,
            told,
        })
    }

    /// Makes `change` if the breaker is still where it expects. Returns whether it did.
    #[cold]
    fn change(&self, change: Change<'_>) -> bool {
        let Change {
            expect,
            from,
            to,
            reason,
            cause,
            now,
            open_for,
            told,
        } = change;
        // The user's `Display` runs here, before the lock and outside the protocol below: no
        // user code may run between sealing the window and publishing the state, nor under
        // the lock. A panic in it gives a placeholder message, not a half-made transition.
        let message = match (to, cause) {
            (State::Open, Some(cause)) => Some(message(cause)),
            (State::Open, None) if matches!(reason, Reason::FailureRate(_)) => {
                self.failure_behind(expect)
            }
            _ => None,
        };
        // Where a timer can be armed for an opening: asked here, outside the lock (a user
        // clock's `timers` is user code).
        let timers = if to == State::Open {
            self.timer_source()
        } else {
            None
        };
        // A stopped or replaced health-probe episode, dropped after the lock (it holds the
        // user's probe function).
        let mut probing = Retired::default();
        let guard = lock(&self.transition);
        let word = self.state.load(Ordering::Acquire);
        let was = word.state();
        if expect.is_some_and(|g| g != word.generation()) || !from.contains(&was) {
            return false;
        }
        let next = word.generation().wrapping_add(1);
        if let Some(w) = &self.window {
            // Records of the generation that ends here are finished, and later ones refused,
            // before the window is cleared or the new state published.
            w.seal(next);
            if was == State::Closed {
                w.freeze();
            }
        }
        if was == State::Open
            && let Some(extras) = self.extras.get()
        {
            // Leaving this opening, by any path: its health probes stop.
            extras.probing.stop(&mut probing);
        }
        let mut timed = false;
        let mut why = crate::explain::Why {
            reason: Some(reason),
            wall: Some(std::time::SystemTime::now()),
            told: told.map(Into::into),
            ..Default::default()
        };
        // Prepare everything the new state reads before publishing it.
        match to {
            State::Open => {
                let d = match open_for {
                    Some(d) => d,
                    None => self.next_open_for(),
                };
                // Below `NO_RETRY`, so that `until - now` never reads as "no retry time".
                let until = now.saturating_add(nanos(d)).min(NO_RETRY - 1);
                self.open_until.store(until, Ordering::Relaxed);
                if let Some(timers) = &timers {
                    // An opening already due (`trip_for(Duration::ZERO)`, say) is armed but not
                    // marked timed: its rejections read the clock, so the next call half-opens
                    // it at once rather than waiting for the timer thread to be scheduled.
                    timed = self.arm(timers, until, next) && until > now;
                    if let Some(probe) = &self.config.probe {
                        self.start_probing(probe, timers, next, now, &mut probing);
                    }
                }
                why.open_for = Some(d);
                if matches!(reason, Reason::FailureRate(_) | Reason::SlowRate(_)) {
                    let mut tally = self
                        .extras()
                        .tally
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    why.tally = tally
                        .take()
                        .filter(|(g, _, _)| Some(*g) == expect)
                        .map(|(_, bad, calls)| (bad, calls));
                }
                if was != State::Open {
                    // A re-trip of an open breaker (a `TripFor` while open) moves its deadline
                    // but opens nothing: like the event, it is not counted.
                    self.times_opened.fetch_add(1, Ordering::Relaxed);
                }
                // The message of the failure that tripped it this time; none if it had none,
                // rather than an earlier trip's (allocating the extras only to store one).
                self.set_last_failure(message.clone());
            }
            State::HalfOpen => self.probe.store(Round::new(next), Ordering::Relaxed),
            State::Closed => {
                self.streak.store(Streak::new(next), Ordering::Relaxed);
                if let Some(w) = &self.window {
                    w.clear(next);
                }
                self.reopens.store(0, Ordering::Relaxed);
            }
            State::ForcedOpen | State::Disabled => {}
        }
        if matches!(to, State::Closed | State::ForcedOpen | State::Disabled) {
            // Whatever happened before a close or a manual state, the next trip starts over.
            self.streak.store(Streak::new(next), Ordering::Relaxed);
        }
        self.state_since.store(now, Ordering::Relaxed);
        let wall = why.wall.unwrap_or_else(std::time::SystemTime::now);
        *self.extras().why.lock().unwrap_or_else(|e| e.into_inner()) = why;
        let word = Word::new(next, to);
        // An armed timer lets rejections skip the clock (see `crate::timer`).
        let word = if timed { word.timed() } else { word };
        self.state.store(word, Ordering::Release);
        // A reset of a closed breaker, say, clears counts but has no state change to tell.
        let changed = was != to;
        if changed {
            lock(&self.extras().pending).events.push_back(Event {
                name: self.name().to_string(),
                key: self.key().map(str::to_owned),
                failure: message.as_deref().map(str::to_owned),
                origin: told.map(str::to_owned),
                from: was,
                to,
                reason,
                at: Duration::from_nanos(now),
                wall,
            });
        }
        drop(guard);
        drop(timers);
        drop(probing);
        // The system timer thread leaves telling to its notifier: it never waits on user code.
        if changed && !crate::timer::deferring() {
            self.deliver();
        }
        true
    }

    /// The open time for this opening: `open_for × backoff^reopens`, capped, with jitter.
    pub(super) fn next_open_for(&self) -> Duration {
        let c = &self.config;
        let level = self.reopens.fetch_add(1, Ordering::Relaxed);
        let mut secs = c.open_for.as_secs_f64() * c.backoff.powi(level.min(1024) as i32);
        secs = secs.min(c.max_open_for.as_secs_f64());
        if c.jitter > 0.0 {
            let r =
                splitmix(self.times_opened.load(Ordering::Relaxed) ^ (self as *const Inner as u64));
            let unit = (r >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
            // Around the capped time, both ways: capping again would clip every lengthening
            // to the cap, and a fleet that backed off to `max_open_for` (or runs with the
            // default cap, `open_for`) would probe in step at exactly that time.
            secs *= 1.0 + c.jitter * (2.0 * unit - 1.0);
        }
        Duration::try_from_secs_f64(secs)
            .unwrap_or(c.max_open_for)
            .max(Duration::from_nanos(1))
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

// Health probes (`crate::probe`): the hook that starts them with an opening.
impl Inner {
    /// Starts probing the opening `generation` on the clock's timers. Under the transition
    /// lock: runs no user code; what to drop or log after it goes to `retired`.
    fn start_probing(
        &self,
        probe: &Probe,
        timers: &TimerSource,
        generation: u32,
        now: u64,
        retired: &mut Retired,
    ) {
        let wheel = match timers {
            #[cfg(not(loom))]
            TimerSource::System => Wheel::System,
            TimerSource::Custom(t) => Wheel::Custom(std::sync::Arc::downgrade(t)),
        };
        self.extras().probing.start(
            Start {
                breaker: Box::new(self.weak_handle()),
                generation,
                probe: probe.clone(),
                every: self.config.probe_every,
                now,
                wheel,
            },
            retired,
        )
    }
}

/// Clears `delivering` if telling an event unwinds, so that a later transition delivers what is
/// left. Listeners' panics are caught (`event::tell`); a `tracing` subscriber's are not.
struct Delivering<'a>(&'a Mutex<Pending>);

impl Drop for Delivering<'_> {
    fn drop(&mut self) {
        lock(self.0).delivering = false;
    }
}

impl Inner {
    /// Tells queued events, unless another thread is at it: that one will tell ours too.
    pub(super) fn deliver(&self) {
        let pending = &self.extras().pending;
        {
            let mut p = lock(pending);
            if p.delivering {
                return;
            }
            p.delivering = true;
        }
        let on_panic = Delivering(pending);
        loop {
            let next = {
                let mut p = lock(pending);
                let next = p.events.pop_front();
                p.delivering = next.is_some();
                next
            };
            let Some(event) = next else { break };
            self.emit(&event);
        }
        core::mem::forget(on_panic);
    }

    fn emit(&self, event: &Event) {
        let level_warn = event.to == State::Open || event.to == State::ForcedOpen;
        if event.to == State::Open {
            // With the short explanation: why it opened, and the failure that did it.
            // Built only for a subscriber that wants it: it reads the breaker's counts.
            let why = if tracing::enabled!(target: "breakerbox", tracing::Level::WARN) {
                self.short_why()
            } else {
                String::new()
            };
            tracing::warn!(target: "breakerbox", name = %event.name, key = event.key.as_deref(), from = %event.from, to = %event.to, reason = %event.reason, origin = event.origin.as_deref(), failure = event.failure.as_deref(), why = %why, "circuit breaker state changed");
        } else if level_warn {
            tracing::warn!(target: "breakerbox", name = %event.name, key = event.key.as_deref(), from = %event.from, to = %event.to, reason = %event.reason, origin = event.origin.as_deref(), "circuit breaker state changed");
        } else {
            tracing::info!(target: "breakerbox", name = %event.name, key = event.key.as_deref(), from = %event.from, to = %event.to, reason = %event.reason, origin = event.origin.as_deref(), "circuit breaker state changed");
        }
        // Each listener's panic is caught (see `event::tell`): one that panics while this
        // thread is unwinding (a permit recording a panicking call's failure) would otherwise
        // abort.
        if let Some(extras) = self.extras.get() {
            extras.listeners.notify(event);
        }
        if self.tells_registry {
            crate::event::registry_wide().notify(event);
        }
    }

    /// What `Breaker::explain` says now.
    pub(super) fn explain(&self) -> Explanation {
        let m = self.metrics();
        let now = self.clock().coarse();
        let why = match self.extras.get() {
            Some(extras) => extras.why.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            None => Default::default(),
        };
        let window = self.window.as_ref().map(|w| {
            let t = w.tally(now);
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
            open_until: (m.state == State::Open).then(|| {
                Duration::from_nanos(self.report.shown(self.open_until.load(Ordering::Relaxed)))
            }),
            reopens: self.reopens_since_close(),
            consecutive_failures: m.consecutive_failures,
            probe_successes: m.consecutive_successes,
            window,
            config: (*self.config).clone(),
        })
    }

    /// The short explanation for the `tracing` event of an opening. It reads the clock, which
    /// may be the user's and panic: caught, as a listener's panic is (empty then).
    fn short_why(&self) -> String {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.explain().short().to_string()
        }))
        .unwrap_or_else(|payload| {
            crate::event::discard(payload);
            String::new()
        })
    }
}
