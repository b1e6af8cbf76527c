//! Running health probes: an opening's `Episode`, its ticks on the clock's timers, where each
//! probe runs, and how its end is counted.
//!
//! # The protocol
//!
//! * An opening of a breaker whose config has a probe starts an `Episode` (below) under the
//!   transition lock (no user code there): it arms a *tick* on the breaker's clock's timers
//!   (the same [`Timers`] as the open timer) at `now + probe_every`, and is kept in the
//!   breaker's extras. Any transition out of that opening (the open timer, a call, a reset,
//!   `force_open`, a re-trip, a probe's success) stops it, under the same lock: no probe
//!   starts after that, a running async probe is aborted, and a late result is ignored.
//! * Each tick (on whatever thread fires the clock's timers) runs no user code: if the probe
//!   started at the previous tick is still running, it has outlived its time (`probe_every`)
//!   and counts as failed — an async one is aborted (its future dropped) and a new one starts;
//!   a blocking one cannot be stopped, so no new one starts until it returns. Then it arms the
//!   next tick.
//! * A probe runs on a thread of its own (`breakerbox-probe`, blocking probes) or as a task on
//!   the tokio runtime that was current when the breaker opened (async probes). Its panic is
//!   caught and counts as a failed probe. A success asks the breaker to move from that very
//!   opening (its generation) to half-open, with [`Reason::HealthProbe`]; the transition lock
//!   decides against a concurrent change. A failure changes nothing and is not a call: no
//!   count, no metric, no event.
//!
//! Lock order: the transition lock, then an episode's `flight`, then the timers' heap. A
//! probe's result is handled with no lock held while the breaker moves.
//!
//! [`Reason::HealthProbe`]: crate::Reason::HealthProbe

use core::fmt;
use core::time::Duration;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::probe::{HealthProbes, Probe, Run};
use crate::timer::{Target, Timers};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A breaker's probing: the opening being probed, and the counts.
#[derive(Default)]
pub(crate) struct ProbeSlot {
    episode: Mutex<Option<Arc<Episode>>>,
    stats: Arc<Stats>,
}

#[derive(Default)]
struct Stats {
    started: AtomicU64,
    passed: AtomicU64,
    failed: AtomicU64,
    panicked: AtomicU64,
    timed_out: AtomicU64,
    abandoned: AtomicU64,
    running: AtomicU64,
}

impl Stats {
    fn add(counter: &AtomicU64) {
        // SeqCst, as every update of the counts: see `snapshot`.
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

impl ProbeSlot {
    pub(crate) fn snapshot(&self) -> HealthProbes {
        let s = &self.stats;
        let r = |c: &AtomicU64| c.load(Ordering::SeqCst);
        // In this order: a probe counts as running before it counts as started, and stops
        // running after its end is counted; so a snapshot that sees `started` probes and none
        // running sees every one of their ends.
        let started = r(&s.started);
        let running = r(&s.running);
        HealthProbes {
            started,
            passed: r(&s.passed),
            failed: r(&s.failed),
            panicked: r(&s.panicked),
            timed_out: r(&s.timed_out),
            abandoned: r(&s.abandoned),
            running,
        }
    }

    /// Stops probing the opening being probed, if any. Under the transition lock; the episode
    /// goes to `retired`, for the caller to drop after the lock (it holds the user's function).
    pub(crate) fn stop(&self, retired: &mut Retired) {
        if let Some(episode) = lock(&self.episode).take() {
            episode.stop();
            retired.keep(episode);
        }
    }

    /// Starts probing the opening `generation`, which began at `now`: arms its first tick at
    /// `now + every`. Under the transition lock: runs no user code (what it has to log waits
    /// in `retired`). The episode it replaces, stopped, goes to `retired`.
    pub(crate) fn start(&self, start: Start, retired: &mut Retired) {
        self.stop(retired);
        let Start {
            breaker,
            generation,
            probe,
            every,
            now,
            wheel,
        } = start;
        let every = crate::clock::nanos(every).max(1);
        #[cfg(feature = "tokio")]
        let handle = tokio::runtime::Handle::try_current().ok();
        #[cfg(feature = "tokio")]
        if probe.is_async() && handle.is_none() {
            retired.no_runtime = Some(probe.name());
            return;
        }
        let episode = Arc::new(Episode {
            breaker,
            generation,
            run: probe.run,
            every,
            wheel,
            #[cfg(feature = "tokio")]
            handle,
            stats: self.stats.clone(),
            flight: Mutex::default(),
        });
        if episode.arm(now.saturating_add(every)) {
            *lock(&self.episode) = Some(episode);
        } else {
            retired.keep(episode);
        }
    }
}

/// What a transition's probing hook leaves to do after the transition lock: drop the stopped
/// episodes (they hold the user's function) and log (a `tracing` subscriber is user code).
#[derive(Default)]
pub(crate) struct Retired {
    episodes: [Option<Arc<Episode>>; 2],
    /// An async probe that cannot run this opening (no tokio runtime): its name.
    no_runtime: Option<&'static str>,
}

impl Retired {
    fn keep(&mut self, episode: Arc<Episode>) {
        // At most one per change (stop, then a start that finds none); two slots so that
        // nothing is ever dropped under the lock.
        match self.episodes.iter_mut().find(|e| e.is_none()) {
            Some(slot) => *slot = Some(episode),
            None => core::mem::forget(episode),
        }
    }
}

impl Drop for Retired {
    fn drop(&mut self) {
        if let Some(probe) = self.no_runtime {
            tracing::warn!(
                target: "breakerbox",
                probe,
                "an async health probe needs a tokio runtime, and the breaker opened outside \
                 one: no probe runs this opening (it half-opens when its open time ends)"
            );
        }
    }
}

/// The breaker's contents are dropped (its last handle went): its ticks start nothing more,
/// and stop re-arming at the next one.
impl Drop for ProbeSlot {
    fn drop(&mut self) {
        self.stop(&mut Retired::default());
    }
}

/// The breaker an episode probes for, as the episode sees it: a weak handle, named through
/// this trait so that this file (which the breaker's extras hold) does not name the handle
/// (which names the breaker).
pub(crate) trait Probed: Send + Sync + 'static {
    /// A probe of the opening `generation` passed: whether the breaker moved to half-open (it
    /// may be gone, or have left that opening).
    fn passed(&self, generation: u32) -> bool;
}

/// What [`ProbeSlot::start`] needs from the breaker.
pub(crate) struct Start {
    pub(crate) breaker: Box<dyn Probed>,
    pub(crate) generation: u32,
    pub(crate) probe: Probe,
    pub(crate) every: Duration,
    pub(crate) now: u64,
    pub(crate) wheel: Wheel,
}

/// The timers that tick an episode: the breaker's clock's.
pub(crate) enum Wheel {
    #[cfg(not(loom))]
    System,
    /// Weak: the timers hold the episode's armed tick, so a strong handle here would keep
    /// both alive for ever once the clock that owns the timers is dropped with a tick armed.
    Custom(Weak<Timers>),
}

/// The probing of one opening.
pub(crate) struct Episode {
    breaker: Box<dyn Probed>,
    generation: u32,
    run: Run,
    every: u64,
    wheel: Wheel,
    #[cfg(feature = "tokio")]
    handle: Option<tokio::runtime::Handle>,
    stats: Arc<Stats>,
    flight: Mutex<Flight>,
}

#[derive(Default)]
struct Flight {
    stopped: bool,
    seq: u64,
    /// The probe running, if any.
    attempt: Option<Attempt>,
}

struct Attempt {
    seq: u64,
    /// Outlived its time: already counted as failed, its result will be ignored.
    timed_out: bool,
    #[cfg(feature = "tokio")]
    abort: Option<tokio::task::AbortHandle>,
}

/// How a probe ended.
enum Done {
    Healthy,
    Unhealthy,
    Panicked,
    /// An async probe's task was aborted (timed out or stopped: counted then).
    #[cfg(feature = "tokio")]
    Aborted,
}

/// Reports an async probe's end when dropped: after its task, or unrun if the runtime shuts
/// down first (then as aborted).
#[cfg(feature = "tokio")]
struct Watch {
    episode: Arc<Episode>,
    seq: u64,
    done: Option<Done>,
}

#[cfg(feature = "tokio")]
impl Watch {
    fn set(&mut self, done: Done) {
        self.done = Some(done);
    }
}

#[cfg(feature = "tokio")]
impl Drop for Watch {
    fn drop(&mut self) {
        let done = self.done.take().unwrap_or(Done::Aborted);
        self.episode.end(self.seq, done);
    }
}

/// A tick armed on the timers.
struct Tick(Arc<Episode>);

impl Target for Tick {
    fn wake(self: Box<Self>, _generation: u32, at: u64, _defer: bool) {
        self.0.tick(at);
        release(self);
    }

    fn disarm(self: Box<Self>, _generation: u32, _defer: bool) {
        // The timers shut down: nothing will tick this opening again.
        self.0.stop();
        release(self);
    }
}

/// Drops a fired tick. Once its breaker is gone it may hold the last handle to the user's
/// probe function, whose captures' `Drop` is user code: its panic is caught, so that it never
/// ends the thread that fires the timers (the system timer thread) nor reaches the caller of
/// `ManualClock::advance`, and the other wake-ups due still fire.
fn release(tick: Box<Tick>) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(tick)))
    {
        crate::event::discard(payload);
    }
}

impl Episode {
    /// Arms the next tick; `false` if the timers are shut down.
    fn arm(self: &Arc<Self>, at: u64) -> bool {
        let tick: Box<dyn Target> = Box::new(Tick(self.clone()));
        match &self.wheel {
            #[cfg(not(loom))]
            Wheel::System => crate::clock::timer_thread::timers().arm(at, self.generation, tick),
            // Timers already dropped: no tick will ever come, as if they had shut down. The
            // handle upgraded here is never the last one (the breaker holds one while it
            // opens; whoever fires a tick holds one), so the timers are not dropped here,
            // under the flight lock.
            Wheel::Custom(t) => t
                .upgrade()
                .is_some_and(|t| t.arm(at, self.generation, tick).is_some()),
        }
    }

    /// No probe starts any more; a running async one is aborted; a result is ignored.
    fn stop(&self) {
        let mut flight = lock(&self.flight);
        flight.stopped = true;
        #[cfg(feature = "tokio")]
        if let Some(abort) = flight.attempt.as_mut().and_then(|a| a.abort.take()) {
            abort.abort();
        }
    }

    /// A tick at `at`: judges the probe still running, starts one if none is, arms the next.
    fn tick(self: &Arc<Self>, at: u64) {
        let seq = {
            let mut flight = lock(&self.flight);
            if flight.stopped {
                return;
            }
            // The probe started at the last tick has outlived its time.
            if let Some(attempt) = flight.attempt.as_mut().filter(|a| !a.timed_out) {
                attempt.timed_out = true;
                Stats::add(&self.stats.timed_out);
                Stats::add(&self.stats.failed);
            }
            #[cfg(feature = "tokio")]
            if let Some(abort) = flight.attempt.as_mut().and_then(|a| a.abort.take()) {
                // Dropped: an async probe is not waited for.
                abort.abort();
                flight.attempt = None;
            }
            // A blocking probe of an earlier opening of this breaker may still run (it cannot
            // be stopped): no second one starts until it returns, as within one opening.
            let busy = matches!(self.run, Run::Blocking(_))
                && self.stats.running.load(Ordering::Relaxed) > 0;
            let seq = (flight.attempt.is_none() && !busy).then(|| {
                flight.seq += 1;
                let seq = flight.seq;
                flight.attempt = Some(Attempt {
                    seq,
                    timed_out: false,
                    #[cfg(feature = "tokio")]
                    abort: None,
                });
                seq
            });
            if !self.arm(at.saturating_add(self.every)) {
                flight.stopped = true;
            }
            seq
        };
        if let Some(seq) = seq {
            Stats::add(&self.stats.running);
            Stats::add(&self.stats.started);
            self.launch(seq);
        }
    }

    /// Runs attempt `seq` where it runs. No lock held.
    fn launch(self: &Arc<Self>, seq: u64) {
        match &self.run {
            Run::Blocking(f) => {
                let f = f.clone();
                let me = self.clone();
                let spawned = std::thread::Builder::new()
                    .name("breakerbox-probe".into())
                    .spawn(move || {
                        let done =
                            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f())) {
                                Ok(true) => Done::Healthy,
                                Ok(false) => Done::Unhealthy,
                                Err(payload) => {
                                    crate::event::discard(payload);
                                    Done::Panicked
                                }
                            };
                        drop(f);
                        me.end(seq, done);
                    });
                if spawned.is_err() {
                    self.end(seq, Done::Unhealthy);
                }
            }
            #[cfg(feature = "tokio")]
            Run::Async(f) => {
                let Some(handle) = &self.handle else {
                    self.end(seq, Done::Unhealthy);
                    return;
                };
                let f = f.clone();
                // The user's function is called in the task, not here (the thread that fires
                // the timers runs no user code).
                let task = handle.spawn(async move { f().await });
                let abort = task.abort_handle();
                let mut watch = Watch {
                    episode: self.clone(),
                    seq,
                    done: None,
                };
                // Dropped unrun (the runtime shut down) or run: either way `Watch` reports.
                handle.spawn(async move {
                    watch.set(match task.await {
                        Ok(true) => Done::Healthy,
                        Ok(false) => Done::Unhealthy,
                        Err(e) if e.is_panic() => {
                            crate::event::discard(e.into_panic());
                            Done::Panicked
                        }
                        Err(_) => Done::Aborted,
                    });
                });
                let mut flight = lock(&self.flight);
                let stopped = flight.stopped;
                match flight.attempt.as_mut() {
                    Some(a) if a.seq == seq && !stopped => a.abort = Some(abort),
                    // Stopped (or judged) before the task could be recorded.
                    _ => abort.abort(),
                }
            }
        }
    }

    /// Counts attempt `seq`'s end, then that it runs no more. A panic while its end is counted
    /// (a passed probe moves the breaker, which reads the user's clock) is caught: the count of
    /// running probes must come down, or no blocking probe of this breaker would start again.
    fn end(&self, seq: u64, done: Done) {
        let counted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.finish(seq, done);
        }));
        if let Err(payload) = counted {
            crate::event::discard(payload);
        }
        self.stats.running.fetch_sub(1, Ordering::SeqCst);
    }

    /// Attempt `seq` ended with `done`: counted, and on a success the breaker moves on.
    fn finish(&self, seq: u64, done: Done) {
        {
            let mut flight = lock(&self.flight);
            let current = flight.attempt.as_ref().is_some_and(|a| a.seq == seq);
            if current {
                let attempt = flight.attempt.take().expect("just seen");
                if attempt.timed_out {
                    // Counted when it outlived its time.
                    return;
                }
            } else {
                // An async probe dropped at a tick: counted then.
                return;
            }
            if flight.stopped {
                Stats::add(&self.stats.abandoned);
                return;
            }
        }
        match done {
            Done::Healthy => {
                let moved = self.breaker.passed(self.generation);
                Stats::add(if moved {
                    &self.stats.passed
                } else {
                    &self.stats.abandoned
                });
            }
            Done::Unhealthy => Stats::add(&self.stats.failed),
            Done::Panicked => {
                Stats::add(&self.stats.panicked);
                Stats::add(&self.stats.failed);
            }
            #[cfg(feature = "tokio")]
            Done::Aborted => Stats::add(&self.stats.abandoned),
        }
    }
}

impl fmt::Debug for ProbeSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbeSlot")
            .field("stats", &self.snapshot())
            .finish()
    }
}
