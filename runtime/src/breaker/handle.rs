//! [`Breaker`] and its methods, and the other handles to a breaker: [`WeakBreaker`] and
//! [`OwnedPermit`]; how a breaker is made (on its own, keyed, or for the registry) and how
//! long it lives; and `call_async`'s future.
//!
//! A breaker is two `std::sync::Arc`s deep. The handle is an `Arc<Handle>`, whose count is
//! the handles' alone: a [`WeakBreaker`] is a `Weak<Handle>`, and upgrades while any handle
//! (or [`OwnedPermit`]) is left. The handle holds the breaker's state, an `Arc<Inner>`, which
//! also the tower layer's [`Lease`] holds: a lease keeps the breaker alive to
//! record into it without being a handle. A [`Rejected`] holds neither: it keeps only what it
//! reports (`Report`).
//!
//! A registry breaker lives for the process: the registry keeps a handle to it for ever, and
//! its `Inner` and `Report` are reachable as `&'static` references, so that its rejections and
//! leases count no references at all.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::{Arc, Weak};

use super::inner::{self, Handle, Inner};
use super::permit::{Armed, Kind, Lease, Permit, Ticket};
use super::rejected::{Error, Rejected, Report, ReportRef};
use crate::config::Config;
use crate::counters::Count;
use crate::error::Timeout;
use crate::event::{Event, Reason};
use crate::explain::Explanation;
use crate::identity::Identity;
use crate::metrics::Metrics;
use crate::outcome::Outcome;
use crate::reconfigure::ReconfigureError;
use crate::state::{SharedState, State};
use crate::sync::{Ordering, lock};

/// A circuit breaker. Cheap to clone: clones are handles to one breaker.
///
/// Most users meet breakers through `#[circuit_breaker]` and the [`registry`](crate::registry());
/// this is the API underneath, for code that wants to drive one by hand.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, Error, ManualClock, State};
///
/// let clock = ManualClock::new(); // time stands still unless the test moves it
/// let breaker = Breaker::new("payments", Config::builder().failures(2).clock(clock).build()?);
/// for _ in 0..2 {
///     let r: Result<(), _> = breaker.call(|| Err("connection refused"));
///     assert!(matches!(r, Err(Error::Inner(_))));
/// }
/// assert_eq!(breaker.state(), State::Open);
/// let r: Result<(), Error<&str>> = breaker.call(|| Ok(()));
/// let rejected = r.unwrap_err();
/// assert!(rejected.to_string().starts_with("circuit breaker 'payments' is open; retry in 60.0s"));
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Breaker(Arc<Handle>);

/// A registry breaker no handle points to yet: see [`Breaker::unpublished`].
pub(crate) struct Unpublished(Inner);

impl Unpublished {
    /// Makes it live for the process and hands out the first handle: the registry's handle
    /// is kept for ever (leaked), and the breaker knows itself as `&'static` from then on.
    pub(crate) fn publish(self) -> Breaker {
        let handle = Breaker::handle(self.0, |inner| {
            let kept: &'static Arc<Inner> = Box::leak(Box::new(Arc::clone(inner)));
            Some(&**kept)
        });
        // Kept for ever: its weak handles always upgrade.
        core::mem::forget(handle.clone());
        handle
    }
}

impl Breaker {
    /// A breaker of its own, outside the registry.
    ///
    /// Its name and last-failure message are its own and are freed with it: dropping the last
    /// handle (and the last [`Rejected`] from it) returns all its memory, whatever its name.
    ///
    /// [`Rejected`]: crate::Rejected
    pub fn new(name: impl Into<String>, config: Config) -> Breaker {
        Breaker::named(Identity::new(name.into()), config)
    }

    /// A `Breaker::new` breaker that shares its name's allocation with others (a keyed family's).
    pub(crate) fn named(identity: Identity, config: Config) -> Breaker {
        let report = Report::new(identity, None, &config);
        Breaker::handle(Inner::new(report, config), |_| None)
    }

    /// A keyed family's breaker (`identity` names the family and the key). One of a registry
    /// family tells the registry-wide listeners its changes, as a registry breaker does.
    /// Its key's text (`key`, cut at [`MAX_KEY`](inner::MAX_KEY) bytes) is kept with what its
    /// rejections report.
    pub(crate) fn keyed(
        identity: Identity,
        config: Config,
        tells_registry: bool,
        key: &str,
    ) -> Breaker {
        let mut end = key.len().min(inner::MAX_KEY);
        while !key.is_char_boundary(end) {
            end -= 1;
        }
        let report = Report::new(identity, Some(&key[..end]), &config);
        let mut value = Inner::new(report, config);
        value.tells_registry = tells_registry;
        Breaker::handle(value, |_| None)
    }

    /// A registry breaker, not yet published: the registry builds it outside its locks, then
    /// publishes it, or drops it if another thread's breaker of that name got in first.
    pub(crate) fn unpublished(name: String, config: Config) -> Unpublished {
        let report = Report::new(Identity::new(name), None, &config);
        let mut inner = Inner::new(report, config);
        inner.tells_registry = true;
        Unpublished(inner)
    }

    /// The first handle to `inner`; `forever` says whether it lives for the process.
    fn handle(
        inner: Inner,
        forever: impl FnOnce(&Arc<Inner>) -> Option<&'static Inner>,
    ) -> Breaker {
        Breaker(Arc::new_cyclic(|me| {
            let mut inner = inner;
            inner.handle = me.clone();
            let inner = Arc::new(inner);
            Handle {
                forever: forever(&inner),
                inner,
            }
        }))
    }

    /// The breaker's state as `'static`, for a registry breaker (which lives for the process).
    #[inline(always)]
    pub(super) fn forever(&self) -> Option<&'static Inner> {
        self.0.forever
    }

    #[inline(always)]
    pub(super) fn inner(&self) -> &Inner {
        &self.0.inner
    }

    /// The breaker's state itself, shared: what a lease of a `Breaker::new` breaker holds.
    pub(super) fn shared(&self) -> &Arc<Inner> {
        &self.0.inner
    }

    /// What a rejection by this breaker reports: a reference for a registry breaker, a
    /// reference count on its report for any other.
    #[inline(always)]
    pub(super) fn report(&self) -> ReportRef {
        match self.0.forever {
            Some(inner) => ReportRef::Forever(&inner.report),
            None => ReportRef::Shared(Arc::clone(&self.0.inner.report)),
        }
    }

    /// A [`WeakBreaker`]: a handle that does not keep the breaker alive.
    pub fn downgrade(&self) -> WeakBreaker {
        WeakBreaker(Arc::downgrade(&self.0))
    }
}

impl Inner {
    /// A weak handle made from the breaker itself, while a handle keeps it alive: what an
    /// armed timer holds.
    pub(super) fn weak_handle(&self) -> WeakBreaker {
        WeakBreaker(self.handle.clone())
    }
}

/// A handle that does not keep its breaker alive, from [`Breaker::downgrade`]: what a listener
/// that acts on its own breaker should hold, since a [`Breaker`] captured by the breaker's own
/// listener keeps it alive for ever.
///
/// [`upgrade`](WeakBreaker::upgrade) gives a [`Breaker`] while any handle to it (or an
/// [`OwnedPermit`]) remains. A registry breaker lives for the process, so its
/// weak handles always upgrade.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, State};
///
/// let breaker = Breaker::new("search", Config::builder().failures(1).build()?);
/// let weak = breaker.downgrade();
/// // Close again at once whenever it opens: the listener acts on its own breaker.
/// breaker.on_state_change(move |e| {
///     if let (State::Open, Some(b)) = (e.to, weak.upgrade()) {
///         b.reset();
///     }
/// });
/// breaker.call(|| Err::<(), _>("timeout")).unwrap_err();
/// assert_eq!(breaker.state(), State::Closed);
/// let weak = breaker.downgrade();
/// drop(breaker); // the last handle: the breaker and its listener are freed
/// assert!(weak.upgrade().is_none());
/// # Ok::<(), breakerbox_runtime::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct WeakBreaker(Weak<Handle>);

impl WeakBreaker {
    /// A [`Breaker`] handle, if the breaker is still alive: `None` once its last handle (and
    /// last [`OwnedPermit`]) was dropped.
    pub fn upgrade(&self) -> Option<Breaker> {
        self.0.upgrade().map(Breaker)
    }
}

impl fmt::Debug for WeakBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(WeakBreaker)")
    }
}

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

    /// [`try_acquire`](Self::try_acquire) as `#[circuit_breaker]` asks: a closed breaker with a
    /// plain config admits inline (one load, two compares), a timed open one rejects inline
    /// with its count by one call, every other answer is one call. An annotated function then
    /// carries no counting code of its own (see docs/ARCHITECTURE.md, "The attribute is a thin
    /// shim").
    #[inline(always)]
    pub(crate) fn try_acquire_lean(&self) -> Result<Permit<'_>, Rejected> {
        let inner = self.inner();
        let word = inner.state.load(Ordering::Acquire);
        if let Some(permit) = inner.admit_closed(word) {
            return Ok(permit);
        }
        let refusal = if word.is_timed() {
            Err(inner.reject_timed_lean())
        } else {
            inner.acquire_word(word)
        };
        refusal.map_err(|(reason, retry_after_ns)| Rejected {
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

    /// Awaits `fut` through the breaker, counting as [`call`](Breaker::call) does. If the
    /// returned future is dropped before it finishes, the call counts as
    /// [`Ignored`](crate::Outcome::Ignored), also when it is dropped because another future of its
    /// task panicked; a panic out of `fut` counts as a failure, also when a catcher around
    /// this future stops it. Needs no particular async runtime.
    #[inline]
    pub fn call_async<T, E: fmt::Display>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
    ) -> impl Future<Output = Result<T, Error<E>>> {
        CallFuture::new(self, fut)
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

    /// The message of the failure that last tripped the breaker: its error's `Display`, at
    /// most its first 1 024 bytes (a longer one is cut at a character boundary and ends with
    /// `… (cut)`, and its `Display` is stopped there).
    ///
    /// A failure-rate trip caused by a success (the window reaching `min_calls`) names the
    /// last failure with a message recorded while the window had fewer than `min_calls` calls;
    /// one caused by calls leaving a time window names none.
    pub fn last_failure(&self) -> Option<Arc<str>> {
        self.inner().last_failure()
    }

    /// Why the breaker is in its state, as data and (through `Display`) as a sentence; see
    /// [`Explanation`]. For a keyed family's entry, ask its breaker
    /// ([`BreakerMap::get`](crate::BreakerMap::get)).
    ///
    /// Reads the clock, and allocates: meant for dashboards, logs and admin endpoints, not
    /// for the call path.
    pub fn explain(&self) -> Explanation {
        self.inner().explain()
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

    /// The health probes run so far, over every opening (all zero without a
    /// [`probe`](crate::ConfigBuilder::probe)).
    ///
    /// ```
    /// use breakerbox_runtime::{Breaker, Config};
    ///
    /// let breaker = Breaker::new("db", Config::default());
    /// assert_eq!(breaker.health_probes().started, 0);
    /// ```
    pub fn health_probes(&self) -> crate::probe::HealthProbes {
        match self.inner().extras.get() {
            Some(extras) => extras.probing.snapshot(),
            None => Default::default(),
        }
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
    /// `told`, if given, is who changed it and why, as the store tells it: what `explain`
    /// gives as the cause, and the event's [`origin`](crate::Event::origin).
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
            told,
        );
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

    /// Applies `config` to this live breaker without losing its state, counts, window or open
    /// time: the new thresholds judge the calls already in the window from the next failed
    /// (or slow) call on, a new `open_for` (or backoff, jitter, cap) applies from the next
    /// opening (an open breaker keeps its deadline), and a new `half_open_calls` or
    /// `successes` applies to the round under way. The breaker's clock stays its own (`config`'s is not used), and
    /// so does its health probe if `config` has none (a new `probe_every` applies from the
    /// next opening).
    ///
    /// Refused, with nothing changed, for a config that changes what shapes the breaker's
    /// window or call path: the window's kind or size, adding or removing `failure_rate`,
    /// `slow_rate`, `slow`, `max_concurrent` or `failures_within`. Those apply only to a new
    /// breaker. Returns whether the config differed.
    ///
    /// A call under way while the config changes may read some values from the old config
    /// and some from the new. Each config it replaced is kept (a couple of hundred bytes,
    /// once however often it comes back: equal configs are one) until the breaker is
    /// dropped, since such a call may still read it; a registry breaker keeps them for the
    /// process. An equal config changes nothing and keeps nothing.
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
        crate::reconfigure::compatible(&inner.config, &config)?;
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
        // No config is dropped under this lock but one `retired` still holds.
        let mut retired = inner
            .extras()
            .retired
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        crate::reconfigure::retire(&mut retired, old);
        Ok(true)
    }

    /// Whether `config` can be applied by [`reconfigure`](Breaker::reconfigure). For the
    /// TOML loader's all-or-nothing reload.
    #[cfg(feature = "serde")]
    pub(crate) fn can_reconfigure(&self, config: &Config) -> Result<(), ReconfigureError> {
        crate::reconfigure::compatible(&self.inner().config, config)
    }

    /// Whether two handles are the same breaker (as [`Arc::ptr_eq`] says of two `Arc`s).
    pub fn ptr_eq(&self, other: &Breaker) -> bool {
        core::ptr::eq(self.inner(), other.inner())
    }
}

impl Breaker {
    /// Asks to make one call, as [`try_acquire_owned`](Breaker::try_acquire_owned) does, with
    /// a [`Lease`] in place of the owned permit.
    #[inline]
    pub(crate) fn try_lease(&self) -> Result<Lease, Rejected> {
        // The lease takes over the verdict; the borrowed permit must not record on drop.
        let permit = core::mem::ManuallyDrop::new(self.try_acquire()?);
        Ok(match self.forever() {
            Some(inner) => Lease::forever(inner, permit.ticket),
            None => Lease::shared(self.shared().clone(), permit.ticket),
        })
    }

    /// Whether this is the last handle to a `Breaker::new` breaker (owned permits are
    /// handles) and no [`Lease`] holds its state: nothing else can record into it. A keyed
    /// family folds an evicted breaker into its totals only then. A lease is taken through a
    /// handle, so the handles are read first: one taken after that read came from a handle
    /// that was counted. Acquire (the fence): what the dropped handles and leases recorded
    /// happens before.
    pub(crate) fn alone(&self) -> bool {
        let alone = Arc::strong_count(&self.0) == 1 && Arc::strong_count(&self.0.inner) == 1;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        alone
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

/// A [`Permit`] that owns a handle to its breaker, from [`Breaker::try_acquire_owned`].
///
/// Records like a [`Permit`], including on drop: `Ignored` for a cancelled call, `Failure`
/// while panicking.
#[must_use = "a permit records a cancelled call when dropped; record the outcome instead"]
pub struct OwnedPermit {
    pub(super) breaker: Breaker,
    pub(super) ticket: Ticket,
}

impl OwnedPermit {
    /// The breaker handle and the ticket, without this permit's drop: the caller records
    /// through a borrowed [`Permit`] made of them, then drops the handle.
    ///
    /// PERF(`closed_ok/bb_tower`): the permit holds no "recorded" flag beside its ticket. A
    /// byte written into a permit that is then moved whole, as a tower response future moves
    /// it, makes the next wide load of it wait for a store-forwarding stall, on every call.
    #[inline]
    fn into_parts(self) -> (Breaker, Ticket) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, and its handle is read out once: the handle moves to
        // the caller, which drops it.
        let breaker = unsafe { core::ptr::read(&this.breaker) };
        (breaker, this.ticket)
    }

    /// Records the call's outcome.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        let (breaker, ticket) = self.into_parts();
        borrowed(&breaker, ticket).record(outcome);
    }

    /// Records the call's outcome with the failure's message; see [`Permit::record_with`].
    #[inline]
    pub fn record_with(self, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        let (breaker, ticket) = self.into_parts();
        borrowed(&breaker, ticket).record_with(outcome, cause);
    }

    /// Records a success.
    #[inline]
    pub fn success(self) {
        self.record(Outcome::Success);
    }

    /// Records a failure.
    pub fn failure(self) {
        self.record(Outcome::Failure);
    }

    /// Records a failure with its message.
    pub fn failure_with(self, cause: &dyn fmt::Display) {
        self.record_with(Outcome::Failure, Some(cause));
    }

    /// Records a call that says nothing about the service's health.
    pub fn ignore(self) {
        self.record(Outcome::Ignored);
    }

    /// Records a call that ran past its timeout; see [`Permit::timed_out`].
    pub fn timed_out(self, timeout: &Timeout) {
        let (breaker, ticket) = self.into_parts();
        borrowed(&breaker, ticket).timed_out(timeout);
    }

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.kind() == Kind::Probe
    }

    /// The breaker this permit is from.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}

/// The borrowed permit an owned one stands for.
#[inline]
fn borrowed(breaker: &Breaker, ticket: Ticket) -> Permit<'_> {
    Permit {
        inner: breaker.inner(),
        ticket,
    }
}

impl Drop for OwnedPermit {
    /// Records as a dropped [`Permit`] does: `Ignored` for a cancelled call, `Failure` while
    /// panicking.
    #[inline]
    fn drop(&mut self) {
        drop(borrowed(&self.breaker, self.ticket));
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("breaker", &self.breaker.inner().name())
            .field("probe", &self.is_probe())
            .finish()
    }
}

pin_project_lite::pin_project! {
    /// `future`, run through `breaker`. Until its first poll it holds the breaker; then the
    /// permit, which it records as [`Guarded`](super::Guarded) does: a panic out of
    /// `future`'s `poll` is a failure, a drop before the end a cancelled call.
    ///
    /// PERF(`async/bb_call_async`): the caller's future is polled in place. An `async fn`
    /// around [`Guarded`](super::Guarded) moves it twice (into its own state, then into the
    /// guard), and those copies cost more than the rest of the call.
    pub(super) struct CallFuture<'a, F> {
        breaker: Option<&'a Breaker>,
        permit: Option<Permit<'a>>,
        #[pin]
        future: F,
    }

    impl<'a, F> PinnedDrop for CallFuture<'a, F> {
        fn drop(this: Pin<&mut Self>) {
            if let Some(permit) = this.project().permit.take() {
                permit.cancel();
            }
        }
    }
}

impl<'a, F> CallFuture<'a, F> {
    /// `future`, to be run through `breaker` when first polled.
    #[inline]
    pub(super) fn new(breaker: &'a Breaker, future: F) -> Self {
        CallFuture {
            breaker: Some(breaker),
            permit: None,
            future,
        }
    }
}

impl<T, E: fmt::Display, F: Future<Output = Result<T, E>>> Future for CallFuture<'_, F> {
    type Output = Result<T, Error<E>>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(breaker) = this.breaker.take() {
            match breaker.try_acquire() {
                Ok(permit) => *this.permit = Some(permit),
                Err(rejected) => return Poll::Ready(Err(Error::Rejected(rejected))),
            }
        } else if this.permit.is_none() {
            panic!("`Breaker::call_async`'s future polled after it completed");
        }
        let mut guard = Armed {
            permit: this.permit,
            armed: true,
        };
        let poll = this.future.poll(cx);
        guard.armed = false;
        let Poll::Ready(result) = poll else {
            return Poll::Pending;
        };
        // Present: checked above, and only a panic out of `poll` takes it.
        if let Some(permit) = guard.permit.take() {
            match &result {
                Ok(_) => permit.success(),
                Err(e) => permit.failure_with(e),
            }
        }
        Poll::Ready(result.map_err(Error::Inner))
    }
}
