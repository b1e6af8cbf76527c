//! The breaker: admission, recording, and the state machine.
//!
//! # The protocol
//!
//! The words below are named types, each laid out in `state.rs` (`Word`, `Streak`, `Round`,
//! `Places`) or `window.rs` (`Gate`), with the generation in their high 32 bits.
//!
//! * `state` (a `Word`) packs the generation and the state tag. Every call reads it once
//!   (Acquire). Every transition happens under `transition` (a mutex taken only on
//!   transitions, never on the call path), prepares the new state's data first, then publishes
//!   the new word with a Release store, bumping the generation.
//! * A permit remembers the generation it was admitted in. Its result is counted in the totals
//!   but not fed to the policy if the generation moved on meanwhile (seed 004's generation).
//! * Closed, consecutive policy: `streak` (a `Streak`) packs the generation and the failures in
//!   a row. A success only reads it, and writes only if there was a streak to break; a failure
//!   bumps it with a CAS that fails for a stale generation. The thread whose failure reaches
//!   the threshold trips; the transition lock and generation check make it happen once. Under
//!   `failures_within`, a streak's start is stored before the CAS that publishes the streak,
//!   which carries a tag (`Inner::record_within_failure`).
//! * Half-open: `probe` (a `Round`) packs the generation, the probes admitted, and the
//!   successes. Admission is a CAS that never exceeds `half_open_calls`.
//! * Closed, rate policies: a failure or slow call enters the window through a gate that packs
//!   the generation with the records in flight (a `Gate`; one CAS); every transition seals the
//!   gate and waits for those inside before it clears the window or publishes, so a stale
//!   failure never lands in a new window (`RateWindow::enter`).
//! * Bulkhead: admission is a CAS below `max_concurrent`, never an increment undone on refusal.
//!   The count is packed with the generation it counts for (`Places`); the first admission of a
//!   generation starts it over, and a permit of an older generation gives nothing back. So a
//!   transition frees every place, even that of a permit that never records.
//!
//! `tests/loom/breaker.rs` model-checks each of these; `tests/model/` checks the whole state
//! machine against a plain reference model.
//!
//! # Where each part is
//!
//! This file holds the handle, [`Breaker`], and its public API. Below it: `inner` (the shared
//! state and its cache-line layout), `admit` (admission), `record` (recording), `transition`
//! (the state machine), `events` (telling listeners), `cause` (failure messages), `permit`
//! ([`Permit`], [`OwnedPermit`]), `weak` ([`WeakBreaker`]) and `rejected` ([`Rejected`],
//! [`Error`]). The vocabulary they share sits one floor down, in `state`, `identity`, `error`
//! and `event`; none of those, and nothing here, names the registry.
//!
//! # Comments that speed depends on
//!
//! A comment that starts `PERF(case)` explains a layout or inlining choice that the bench case
//! `case` of `benches/compare.rs` measures (`cargo bench -p breakerbox-benches --bench compare
//! -- case`). Change what it guards only with that case run before and after.

mod admit;
mod cause;
mod config_change;
pub(crate) use cause::displayed;
mod events;
mod extras;
mod guarded;
mod inner;
mod open_timer;
mod orphans;
mod permit;
mod probing;
mod record;
mod rejected;
#[cfg(all(test, not(loom)))]
mod tests;
mod transition;
mod weak;

use core::fmt;
use core::ptr::NonNull;
use core::time::Duration;
use std::sync::Arc;

pub use self::guarded::Guarded;
use self::inner::Inner;
use self::weak::release_weak;
use crate::config::Config;
use crate::counters::Count;
use crate::event::{Event, Reason};
use crate::identity::Identity;
use crate::metrics::Metrics;
use crate::outcome::Outcome;
use crate::state::{SharedState, State};
use crate::sync::{Ordering, fence};

pub use self::permit::{OwnedPermit, Permit};
pub use self::rejected::{Error, Rejected};
pub use self::weak::WeakBreaker;

/// A circuit breaker. Cheap to clone: clones are handles to one breaker.
///
/// Most users meet breakers through `#[circuit_breaker]` and the [`registry`](crate::registry);
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
pub struct Breaker(NonNull<Inner>);

// SAFETY: a `Breaker` is a shared reference to an `Inner` (which is `Send + Sync`, checked
// below) plus, for a `Breaker::new` breaker, a share of its reference count, which is atomic.
unsafe impl Send for Breaker {}
// SAFETY: as above; `&Breaker` only ever hands out `&Inner`.
unsafe impl Sync for Breaker {}

const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Inner>();
};

impl Clone for Breaker {
    /// Another handle to the same breaker: a reference-count increment for a
    /// [`Breaker::new`] breaker, nothing at all for a registry one.
    #[inline]
    fn clone(&self) -> Breaker {
        let inner = self.inner();
        if !inner.registered {
            // Relaxed, as `Arc` does: a new handle is made from an existing one, which keeps
            // the breaker alive meanwhile; no data is published by the increment.
            let old = inner.refs.fetch_add(1, Ordering::Relaxed);
            if old > isize::MAX as usize {
                // Only a leak of 2^63 handles gets here; wrapping would free a live breaker.
                std::process::abort();
            }
        }
        Breaker(self.0)
    }
}

impl Drop for Breaker {
    /// PERF(`open_1t/bb_call_static`): a test and a decrement inline; freeing the breaker is a
    /// call. With the freeing inlined, dropping a `Rejected` was itself a call, on every
    /// rejection.
    #[inline(always)]
    fn drop(&mut self) {
        let inner = self.inner();
        // Release: this handle's uses happen before the last handle frees the breaker,
        // which acquires them all with the fence below.
        if inner.registered || inner.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // SAFETY: this was the last handle, just given up.
        unsafe { free(self.0) };
    }
}

/// Frees a `Breaker::new` breaker whose last handle has just dropped its reference.
///
/// # Safety
/// `ptr` is that breaker, `refs` reached 0 by that handle's decrement, and nothing uses it
/// through a handle any more.
#[cold]
#[inline(never)]
unsafe fn free(ptr: NonNull<Inner>) {
    fence(Ordering::Acquire);
    // SAFETY: the last handle, after its Acquire fence.
    if unsafe { orphans::adopt(ptr) } {
        return; // the last of its rejections frees it
    }
    // SAFETY: no rejection of it is left, and the last handle is gone.
    unsafe { destroy(ptr) };
}

/// Drops a `Breaker::new` breaker's contents and gives back its handles' weak share.
///
/// # Safety
/// No handle to `ptr` is left, nor any rejection of it, and what they did happens before.
unsafe fn destroy(ptr: NonNull<Inner>) {
    // SAFETY: the last handle to a `Breaker::new` breaker is gone, and so is every rejection
    // of it; no other handle or borrow of it remains (permits borrow a handle, owned permits
    // hold one), and a weak
    // handle can no longer make one (`refs` is 0 for good). `Inner` has no `Drop` of its
    // own, so this drops its fields one by one through `ptr` and never makes a reference
    // to the whole: a weak handle may read `refs` (never dropped, an atomic) meanwhile.
    // Its listeners, and what they hold, go now, whatever weak handles remain.
    unsafe { core::ptr::drop_in_place(ptr.as_ptr()) };
    // SAFETY: the handles' share of the weak count, given back once, by this last handle.
    unsafe { release_weak(ptr) };
}

// `Breaker::drop` relies on `Inner` having no `Drop` impl of its own (which would make a
// `&mut Inner` while weak handles read `refs`): adding one fails to compile here.
const _: () = {
    #[allow(dead_code)]
    trait NoDropImpl {}
    #[allow(drop_bounds)]
    impl<T: Drop> NoDropImpl for T {}
    impl NoDropImpl for Inner {}
};

impl fmt::Debug for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breaker")
            .field("name", &self.name())
            .field("state", &self.state())
            .finish()
    }
}

/// A registry breaker no handle points to yet: see [`Breaker::unpublished`].
pub(crate) struct Unpublished(Box<Inner>);

impl Unpublished {
    /// Leaks it for the process and hands out the first handle, which counts no references.
    pub(crate) fn publish(self) -> Breaker {
        Breaker(NonNull::from(Box::leak(self.0)))
    }
}

impl Breaker {
    /// A breaker of its own, outside the registry.
    ///
    /// Its name and last-failure message are its own and are freed with it: dropping the last
    /// handle (a [`Rejected`] from it is one) returns all its memory, whatever its name.
    pub fn new(name: impl Into<String>, config: Config) -> Breaker {
        Breaker::named(Identity::new(name.into()), config)
    }

    /// A `Breaker::new` breaker that shares its name's allocation with others (a keyed family's).
    pub(crate) fn named(identity: Identity, config: Config) -> Breaker {
        Breaker(NonNull::from(Box::leak(Box::new(Inner::new(
            identity, config, false,
        )))))
    }

    /// A keyed family's breaker (`identity` names the family and the key). One of a registry
    /// family tells the registry-wide listeners its changes, as a registry breaker does.
    /// Its key's text (`key`, cut at [`MAX_KEY`](inner::MAX_KEY) bytes) is kept right after
    /// the breaker, in its allocation: a key costs its text's bytes and no more.
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
        let key = &key[..end];
        let mut value = Inner::new(identity, config, false);
        value.tells_registry = tells_registry;
        value.key_len = key.len() as u16;
        let layout = Inner::layout(value.key_len);
        // SAFETY: `layout` is `Inner`'s size and alignment plus the key's bytes: not zero-sized.
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<Inner>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        // SAFETY: the allocation holds an `Inner` at its start, aligned, and `key.len()` bytes
        // after it; `release_weak` frees it with the same layout (read from `key_len`).
        unsafe {
            ptr.as_ptr().write(value);
            core::ptr::copy_nonoverlapping(
                key.as_ptr(),
                ptr.as_ptr().add(1).cast::<u8>(),
                key.len(),
            );
        }
        Breaker(ptr)
    }

    /// A registry breaker, not yet published: the registry builds it outside its locks, then
    /// publishes it, or drops it if another thread's breaker of that name got in first.
    pub(crate) fn unpublished(name: String, config: Config) -> Unpublished {
        Unpublished(Box::new(Inner::new(Identity::new(name), config, true)))
    }

    #[inline]
    fn inner(&self) -> &Inner {
        // SAFETY: the breaker lives while any handle does (see `Drop`), and is only ever
        // shared, never mutated through the pointer.
        unsafe { self.0.as_ref() }
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        self.inner().identity.name()
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
    /// breaker instead of borrowing it, so it can live in a `'static` future (the `tower`
    /// layer's). Costs what `try_acquire` does plus a handle clone: a reference-count increment
    /// for a [`Breaker::new`] breaker, nothing for a registry one; no allocation.
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
                // No reference count: the rejection was counted, which keeps the breaker
                // alive until it is dropped (see `orphans`).
                inner: self.0,
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

    /// Awaits `fut` through the breaker, counting as [`call`](Breaker::call) does. If the
    /// returned future is dropped before it finishes, the call counts as
    /// [`Ignored`](Outcome::Ignored), also when it is dropped because another future of its
    /// task panicked; a panic out of `fut` counts as a failure, also when a catcher around
    /// this future stops it. Needs no particular async runtime.
    pub async fn call_async<T, E: fmt::Display>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Error<E>> {
        let permit = self.try_acquire()?;
        let (result, permit) = Guarded::new(permit, fut).await;
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
        let inner = self.inner();
        let state = self.state();
        let now = inner.clock().coarse();
        SharedState {
            state,
            open_remaining: (state == State::Open).then(|| {
                Duration::from_nanos(inner.open_until.load(Ordering::Relaxed).saturating_sub(now))
            }),
            reopens: inner.reopens_since_close(),
        }
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
            None,
            now,
            open_for,
        );
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
        self.inner().refs.load(Ordering::Acquire)
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
