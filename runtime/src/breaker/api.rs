//! [`Breaker`]'s methods: calls, permits, manual control, listeners, latency, metrics, and
//! the state a fleet shares.

use core::fmt;
use core::time::Duration;
use std::sync::Arc;

use super::handle::Breaker;
use super::permit::{OwnedPermit, Permit};
use super::rejected::{Error, Rejected};
use crate::config::Config;
use crate::counters::Count;
use crate::event::{Event, Reason};
use crate::metrics::Metrics;
use crate::outcome::Outcome;
use crate::state::{SharedState, State};
use crate::sync::Ordering;

impl Breaker {
    /// The breaker's name.
    pub fn name(&self) -> &str {
        self.inner().name()
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.inner().config
    }

    /// Its state now.
    ///
    /// An open breaker turns half-open when its open time ends, whether or not a call arrives
    /// (with its event), when its clock has timers: the system clock (a process-wide thread,
    /// started at the first opening; see [`Timers`](crate::Timers)) and
    /// [`ManualClock`](crate::ManualClock) (as [`advance`](crate::ManualClock::advance) moves
    /// time past it). On a user [`Clock`](crate::Clock) without
    /// [`timers`](crate::Clock::timers), an open breaker whose `open_for` has passed reads
    /// `Open` until a call
    /// arrives to probe.
    pub fn state(&self) -> State {
        self.inner().state.load(Ordering::Acquire).state()
    }

    /// Like [`try_acquire`](Breaker::try_acquire), but the permit holds a handle to the
    /// breaker instead of borrowing it, so it can live in a `'static` future or move to
    /// another thread. Costs what `try_acquire` does plus a handle clone: a reference-count
    /// increment (and its decrement when the permit ends); no allocation. (The `tower`
    /// layer's response future holds no handle: for a registry breaker it holds no count at
    /// all.)
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, Outcome};
    ///
    /// let breaker = Breaker::new("cache", Config::default());
    /// let permit = breaker.try_acquire_owned()?;
    /// std::thread::spawn(move || permit.record(Outcome::Success)).join().unwrap();
    /// assert_eq!(breaker.metrics().successes, 1);
    /// drop(breaker.try_acquire_owned()?); // no verdict: a cancelled call, ignored
    /// assert_eq!(breaker.metrics().ignored, 1);
    /// # Ok::<(), breakerbox_runtime::Rejected>(())
    /// ```
    #[inline]
    pub fn try_acquire_owned(&self) -> Result<OwnedPermit, Rejected> {
        // The owned permit takes over the verdict; the borrowed one must not record on drop.
        let permit = core::mem::ManuallyDrop::new(self.try_acquire()?);
        Ok(OwnedPermit {
            breaker: self.clone(),
            ticket: permit.ticket,
        })
    }

    /// Asks to make one call. Record the outcome with the permit.
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        self.inner()
            .acquire()
            .map_err(|(reason, retry_after_ns)| Rejected {
                report: self.report(),
                reason,
                retry_after_ns,
            })
    }

    /// Runs `f` through the breaker: `Ok` is a success, `Err` a failure, whose message is kept
    /// if it trips the breaker. A panic in `f` counts as a failure and resumes.
    #[inline]
    pub fn call<T, E: fmt::Display>(
        &self,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, Error<E>> {
        let permit = self.try_acquire()?;
        let result = f();
        match &result {
            Ok(_) => permit.success(),
            Err(e) => permit.failure_with(e),
        }
        result.map_err(Error::Inner)
    }

    /// Runs `f` through the breaker and lets `classify` say what its result means.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, Outcome};
    /// use std::time::Duration;
    ///
    /// let breaker = Breaker::new("api", Config::default());
    /// // A 503 with Retry-After: 30 opens the breaker for 30 seconds at once.
    /// let status = breaker.call_with(|| 503, |s| match s {
    ///     200..=499 => Outcome::Success,
    ///     503 => Outcome::TripFor(Duration::from_secs(30)),
    ///     _ => Outcome::Failure,
    /// });
    /// assert_eq!(status.unwrap(), 503);
    /// assert_eq!(breaker.state(), breakerbox_runtime::State::Open);
    /// ```
    pub fn call_with<R>(
        &self,
        f: impl FnOnce() -> R,
        classify: impl FnOnce(&R) -> Outcome,
    ) -> Result<R, Rejected> {
        let permit = self.try_acquire()?;
        let result = f();
        permit.record(classify(&result));
        Ok(result)
    }

    /// Forces the breaker open: every call is rejected until [`reset`](Breaker::reset).
    pub fn force_open(&self) {
        self.inner().manual(State::ForcedOpen, None);
    }

    /// Switches the breaker off: every call runs until [`reset`](Breaker::reset). Outcomes are
    /// counted in the [`metrics`](Breaker::metrics) totals (`calls`, `successes`, `failures`,
    /// `ignored`; not `slow`: disabled calls are not timed) but trip nothing.
    pub fn disable(&self) {
        self.inner().manual(State::Disabled, None);
    }

    /// Back to normal: closed, with empty counts and the base open time. Totals in
    /// [`metrics`](Breaker::metrics) keep counting. Like every state change, it frees every
    /// `max_concurrent` place, including those of permits that will never record.
    pub fn reset(&self) {
        self.inner().manual(State::Closed, None);
    }

    /// Opens the breaker now for `duration`; then it probes as usual.
    pub fn trip_for(&self, duration: Duration) {
        self.inner().manual(State::Open, Some(duration));
    }

    /// Calls `listener` on every state change of this breaker, in the order the changes
    /// happened. It runs on the thread that caused the change — or, if another thread is
    /// telling this breaker's earlier changes at that moment, on that one, right after them —
    /// after the change is made, and under no lock of the breaker's.
    ///
    /// A listener may act on the breaker itself: its own change is told after the one it is
    /// being told. To do so it should hold a [`WeakBreaker`] ([`downgrade`](Breaker::downgrade)),
    /// not a [`Breaker`]: a handle held by the breaker's own listener keeps a [`Breaker::new`]
    /// breaker alive for ever.
    ///
    /// A listener that panics does not disturb the breaker or the caller: the panic is caught
    /// and logged at `error` (target `breakerbox`, with the breaker's name and the panic's
    /// message), later listeners are told the event, and later events are told as usual. The
    /// process's panic hook still prints the panic as it happens.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, State};
    /// use std::sync::{Arc, Mutex};
    ///
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let breaker = Breaker::new("search", Config::default());
    /// let log = seen.clone();
    /// breaker.on_state_change(move |e| log.lock().unwrap().push((e.from, e.to)));
    /// breaker.force_open();
    /// assert_eq!(*seen.lock().unwrap(), [(State::Closed, State::ForcedOpen)]);
    /// ```
    ///
    /// [`WeakBreaker`]: crate::WeakBreaker
    pub fn on_state_change(&self, listener: impl Fn(&Event) + Send + Sync + 'static) {
        self.inner().extras().listeners.add(Arc::new(listener));
    }

    /// The message of the failure that last tripped the breaker.
    ///
    /// A failure-rate trip caused by a success (the window reaching `min_calls`) names the
    /// last failure with a message recorded while the window had fewer than `min_calls` calls;
    /// one caused by calls leaving a time window names none.
    pub fn last_failure(&self) -> Option<Arc<str>> {
        self.inner().last_failure()
    }

    /// The latency of its calls: p50, p90 and p99 of the last minute, and the histogram since
    /// the breaker was made. `None` for a breaker that does not time its calls: one with
    /// neither a [`slow`](crate::ConfigBuilder::slow) threshold nor
    /// [`latency`](crate::ConfigBuilder::latency) on, whose calls read no clock for it.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, ManualClock};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new();
    /// let breaker = Breaker::new("db", Config::builder().latency(true).clock(clock.clone()).build()?);
    /// for ms in [2, 4, 40] {
    ///     let _ = breaker.call(|| {
    ///         clock.advance(Duration::from_millis(ms)); // the call takes `ms`
    ///         Ok::<_, &str>(())
    ///     });
    /// }
    /// let latency = breaker.latency().unwrap();
    /// assert_eq!(latency.recent_calls, 3);
    /// // Each percentile is its bucket's midpoint, within 6.25% of the true value.
    /// let p50 = latency.p50.unwrap().as_secs_f64();
    /// assert!((p50 - 0.004).abs() <= 0.004 / 16.0, "{p50}");
    /// let p99 = latency.p99.unwrap().as_secs_f64();
    /// assert!((p99 - 0.040).abs() <= 0.040 / 16.0, "{p99}");
    ///
    /// assert_eq!(Breaker::new("plain", Config::default()).latency(), None);
    /// # Ok::<(), breakerbox_runtime::ConfigError>(())
    /// ```
    pub fn latency(&self) -> Option<crate::latency::LatencySnapshot> {
        let inner = self.inner();
        if !inner.config.timed() {
            return None;
        }
        let now = inner.clock().precise();
        Some(match inner.extras.get().and_then(|c| c.latency.get()) {
            Some(latency) => latency.snapshot(now),
            None => crate::latency::LatencySnapshot::empty(),
        })
    }

    /// Whether it times its calls (`latency`, or a `slow` threshold): [`latency`](Self::latency)
    /// is `Some`.
    pub(crate) fn times_calls(&self) -> bool {
        self.inner().config.timed()
    }

    /// Adds its latency histogram, if it has one, to `merged`: a keyed family's latency.
    /// `now` is the time on the breaker's clock, read once for the family.
    pub(crate) fn merge_latency(&self, merged: &mut crate::latency::Merged, now: u64) {
        if let Some(latency) = self.inner().extras.get().and_then(|c| c.latency.get()) {
            merged.add(latency, now);
        }
    }

    /// The counts and sum of its latency histogram since it was made, if it has one: what a
    /// keyed family keeps of an evicted key's.
    pub(crate) fn latency_total(&self) -> Option<(Box<[u64]>, u64)> {
        let latency = self.inner().extras.get().and_then(|c| c.latency.get())?;
        Some(latency.total())
    }

    /// A snapshot of the breaker's state and counts.
    pub fn metrics(&self) -> Metrics {
        self.inner().metrics()
    }

    /// The breaker's state as plain data, to share it with other processes through a store.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, State};
    /// use std::time::Duration;
    ///
    /// let here = Breaker::new("users", Config::default());
    /// here.trip_for(Duration::from_secs(5));
    /// let there = Breaker::new("users", Config::default());
    /// there.import_state(&here.export_state());
    /// assert_eq!(there.state(), State::Open);
    /// ```
    pub fn export_state(&self) -> SharedState {
        self.state_as(true)
    }

    /// The state, its open time as reported (`shown`) or as held.
    fn state_as(&self, shown: bool) -> SharedState {
        let inner = self.inner();
        let state = self.state();
        let now = inner.clock().coarse();
        SharedState {
            state,
            open_remaining: (state == State::Open).then(|| {
                let mut until = inner.open_until.load(Ordering::Relaxed);
                if shown {
                    until = inner.report.shown(until);
                }
                Duration::from_nanos(until.saturating_sub(now))
            }),
            reopens: inner.reopens_since_close(),
        }
    }

    /// As `export_state`, with the open time the breaker is held to rather than the one it
    /// reports (fleet mode: its own schedule).
    pub(crate) fn held_state(&self) -> SharedState {
        self.state_as(false)
    }

    /// Limits the probes of this breaker's half-open rounds to `budget` (or
    /// `half_open_calls`, if that is fewer), until set again; `None`, the default, lifts the
    /// limit. Fleet mode sets it to the probe leases an instance holds, so that exactly
    /// `half_open_calls` probes run fleet-wide; a store of your own can do the same.
    ///
    /// - A budget of 0 keeps an open breaker open once its open time has run out: calls are
    ///   rejected ([`RejectReason::Open`](crate::RejectReason::Open), no retry time) and it
    ///   does not go half-open. A breaker already half-open admits no more probes.
    /// - A round closes after `successes` successful probes, as always: a budget below
    ///   `successes` leaves a round that cannot close, ended (re-opened) by `probe_timeout`
    ///   like a round whose probes hang.
    /// - It changes no state and tells no listener; the closed path does not read it.
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config, State};
    /// use std::time::Duration;
    ///
    /// let config = Config::builder().half_open_calls(3).build()?;
    /// let breaker = Breaker::new("users", config);
    /// breaker.set_probe_budget(Some(1));
    /// breaker.trip_for(Duration::ZERO);
    /// let probe = breaker.try_acquire()?; // the one probe of the round
    /// assert_eq!(breaker.state(), State::HalfOpen);
    /// assert!(breaker.try_acquire().is_err()); // half_open_calls is 3, the budget 1
    /// # drop(probe);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_probe_budget(&self, budget: Option<u32>) {
        let stored = budget.map_or(0, |b| b.min(u32::MAX - 1) + 1);
        self.inner()
            .extras()
            .probe_budget
            .store(stored, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many times `force_open`, `disable`, `reset` or `trip_for` were called on it, whether
    /// or not they changed its state (fleet mode: a hand on a breaker it holds).
    pub(crate) fn manual_changes(&self) -> u32 {
        self.inner().manual_changes()
    }

    /// The generation of its state: it moves with every transition (fleet mode: whether the
    /// breaker changed while a store operation about it was in flight).
    pub(crate) fn generation(&self) -> u32 {
        self.inner().state.load(Ordering::Acquire).generation()
    }

    /// The current half-open round's probes: how many were admitted, and how many of those
    /// succeeded; `None` unless half-open. Fleet mode reads it to know whether its probe leases
    /// still cover probes in flight.
    pub(crate) fn probe_round(&self) -> Option<(u32, u32)> {
        let inner = self.inner();
        let word = inner.state.load(Ordering::Acquire);
        let round = inner.probe.load(Ordering::Acquire);
        (word.state() == State::HalfOpen && round.generation() == word.generation())
            .then(|| (round.admitted(), round.successes()))
    }

    /// Takes on a state exported by [`export_state`](Breaker::export_state), typically by
    /// another process. Counts are local and start over.
    pub fn import_state(&self, shared: &SharedState) {
        self.import_reporting(shared, None, None, None);
    }

    /// As `import_state`; an open state is reported (by `export_state`, `metrics`,
    /// `explain`, a rejection's `retry_after`) as open for `shown` (if shorter than it is
    /// held) rather than for its whole open time (fleet mode: the fleet's next probe, while
    /// the breaker is held open longer for the fleet's probe leases).
    ///
    /// `told`, if given, is why, as the store tells it: what `explain` gives as the cause.
    /// `failure`, if given, is the failure behind an open state: the breaker's
    /// `last_failure`, and its event's message.
    pub(crate) fn import_reporting(
        &self,
        shared: &SharedState,
        shown: Option<Duration>,
        told: Option<&str>,
        failure: Option<&str>,
    ) {
        let inner = self.inner();
        let now = inner.clock().coarse();
        let open_for = (shared.state == State::Open).then(|| {
            shared
                .open_remaining
                .unwrap_or_default()
                .max(Duration::from_nanos(1))
        });
        inner.transition_any(
            &State::ALL,
            shared.state,
            Reason::Imported,
            failure.as_ref().map(|f| f as &dyn fmt::Display),
            now,
            open_for,
        );
        if let Some(told) = told {
            let mut why = inner.extras().why.lock().unwrap_or_else(|e| e.into_inner());
            if why.reason == Some(Reason::Imported) {
                why.told = Some(told.into());
            }
        }
        if let (Some(shown), State::Open) = (shown, shared.state) {
            let until = inner.open_until.load(Ordering::Relaxed);
            let shown = now.saturating_add(u64::try_from(shown.as_nanos()).unwrap_or(u64::MAX));
            inner.report.set_shown(until, shown);
        }
        // Kept as openings since the last close (the backoff level of the next opening): the
        // opening under way counts as one, its re-opens as the rest.
        let opened = matches!(shared.state, State::Open | State::HalfOpen);
        let openings = if opened || shared.reopens > 0 {
            shared.reopens.saturating_add(1)
        } else {
            0
        };
        inner.reopens.store(openings, Ordering::Relaxed);
    }

    /// Whether two handles are the same breaker (as [`Arc::ptr_eq`] says of two `Arc`s).
    pub fn ptr_eq(&self, other: &Breaker) -> bool {
        core::ptr::eq(self.inner(), other.inner())
    }
}

impl Breaker {
    /// Handles to a `Breaker::new` breaker now. Acquire: what the dropped handles did happens
    /// before. A keyed family folds an evicted breaker into its totals once only its own handle
    /// is left, when nothing can record into it any more.
    pub(crate) fn handles(&self) -> usize {
        self.handle_count()
    }

    /// A keyed family's breaker's key, as it displayed when the family made the breaker.
    pub(crate) fn key(&self) -> Option<&str> {
        self.inner().key()
    }

    /// Successes, failures, ignored, rejected and slow calls, and timeouts (among the
    /// failures), without reading the clock.
    pub(crate) fn counts(&self) -> [u64; 6] {
        let inner = self.inner();
        let timeouts = inner.timeouts();
        let [s, f, i, r, slow] = [
            Count::Success,
            Count::Failure,
            Count::Ignored,
            Count::Rejected,
            Count::Slow,
        ]
        .map(|kind| inner.counts.total(&inner.spill, kind));
        [s, f, i, r, slow, timeouts]
    }
}

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("name", &self.name())
            .field("state", &self.state())
            .finish()
    }
}
