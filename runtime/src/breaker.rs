//! The breaker: admission, recording, and the state machine.
//!
//! # The protocol
//!
//! * `state` packs the generation (high 32 bits) and the state tag (low bits). Every call reads
//!   it once (Acquire). Every transition happens under `transition` (a mutex taken only on
//!   transitions, never on the call path), prepares the new state's data first, then publishes
//!   the new word with a Release store, bumping the generation.
//! * A permit remembers the generation it was admitted in. Its result is counted in the totals
//!   but not fed to the policy if the generation moved on meanwhile (seed 004's generation).
//! * Closed, consecutive policy: `streak` packs the generation and the failures in a row. A
//!   success only reads it, and writes only if there was a streak to break; a failure bumps it
//!   with a CAS that fails for a stale generation. The thread whose failure reaches the
//!   threshold trips; the transition lock and generation check make it happen once. Under
//!   `failures_within`, a streak's start is stored before the CAS that publishes the streak,
//!   which carries a tag (`Inner::record_within_failure`).
//! * Half-open: `probe` packs the generation, the probes admitted, and the successes. Admission
//!   is a CAS that never exceeds `half_open_calls`.
//! * Closed, rate policies: a failure or slow call enters the window through a gate that packs
//!   the generation with the records in flight (one CAS); every transition seals the gate and
//!   waits for those inside before it clears the window or publishes, so a stale failure never
//!   lands in a new window (`RateWindow::enter`).
//! * Bulkhead: admission is a CAS below `max_concurrent`, never an increment undone on refusal.
//!   The count is packed with the generation it counts for; the first admission of a
//!   generation starts it over, and a permit of an older generation gives nothing back. So a
//!   transition frees every place, even that of a permit that never records.
//!
//! `tests/loom.rs` model-checks each of these; `tests/model.rs` checks the whole state machine
//! against a plain reference model.

use core::fmt;
use core::ptr::NonNull;
use core::time::Duration;
use std::collections::VecDeque;
use std::sync::Arc;

use once_cell::race::OnceBox;

use crate::clock::{ClockRef, nanos};
use crate::config::Config;
use crate::counters::{Count, Counts, Slot, Spill};
use crate::error::{Error, RejectReason, Rejected};
use crate::event::{Event, Listener, Reason};
use crate::metrics::Metrics;
use crate::outcome::Outcome;
use crate::sync::{
    AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering, RwLock, fence, lock, read, write,
};
use crate::window::RateWindow;

/// Where a breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Calls run and their outcomes are counted.
    Closed,
    /// Calls are rejected until `open_for` has passed.
    Open,
    /// A limited number of probe calls decide between closing and opening again.
    HalfOpen,
    /// Forced open by hand: every call is rejected until [`Breaker::reset`].
    ForcedOpen,
    /// Switched off by hand: every call runs, and its outcome is counted in the
    /// [`metrics`](Breaker::metrics) totals but judged by no policy, until [`Breaker::reset`].
    Disabled,
}

impl State {
    const ALL: [State; 5] = [
        State::Closed,
        State::Open,
        State::HalfOpen,
        State::ForcedOpen,
        State::Disabled,
    ];

    fn tag(self) -> u64 {
        self as u64
    }

    #[inline]
    fn from_word(word: u64) -> State {
        match word & 0xff {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            3 => State::ForcedOpen,
            _ => State::Disabled,
        }
    }

    /// The state's name: `closed`, `open`, `half-open`, `forced-open`, `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open => "open",
            State::HalfOpen => "half-open",
            State::ForcedOpen => "forced-open",
            State::Disabled => "disabled",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[inline]
fn generation(word: u64) -> u32 {
    (word >> 32) as u32
}

#[inline]
fn pack(generation: u32, low: u64) -> u64 {
    (u64::from(generation) << 32) | low
}

/// Why admission failed (a `RejectReason` code), and in how many nanoseconds to retry
/// (`NO_RETRY`: unknown). Two words, like a permit's fields (see `Ticket`); raw nanoseconds
/// because building a `Duration` costs a division the rejection path can skip.
type Refusal = (u64, u64);
pub(crate) const NO_RETRY: u64 = u64::MAX;

/// Under `failures_within`, the streak word's low half: a tag in its top 8 bits (see
/// `Inner::record_within_failure`) and the count below, which saturates at 16 777 215.
const WITHIN_TAG: u32 = 24;
const WITHIN_COUNT: u64 = (1 << WITHIN_TAG) - 1;

const PROBE_BITS: u32 = 16;
const PROBE_MASK: u64 = (1 << PROBE_BITS) - 1;

/// The breaker's shared state. `Breaker` is a handle to it.
///
/// Three cache lines, laid out by hand (`repr(C)`; the offsets are checked below):
/// - the first holds what every call reads and only transitions and streak changes write,
///   including the open deadline, so a rejection reads this line and nothing else shared;
/// - the second is the first thread's counter stripe, written by that thread alone on every
///   call, with fields beside it that only transitions touch;
/// - the third is written on the slower paths: probes, bulkhead, `failures_within`, handle
///   clones.
///
/// 192 bytes in all (a test holds it there): per-key breakers are made by the thousand.
#[repr(C, align(64))]
pub(crate) struct Inner {
    // Line 0. Read on every call; written only on transitions and streak changes.
    state: AtomicU64,
    streak: AtomicU64,
    /// Shared by every breaker with an equal config (see `intern`): per-key breakers made by
    /// the thousand from one config pay for it once.
    config: Arc<Config>,
    window: Option<Box<RateWindow>>,
    /// The name: one word, shared by the breakers of a keyed family. Freed with the breaker.
    pub(crate) identity: Identity,
    /// Whether a closed-state admission is just a state load: no bulkhead, no clock.
    plain_acquire: bool,
    /// Whether a closed-state success needs nothing but a count and a streak check: no slow
    /// threshold to measure, no window to fill, no bulkhead to release.
    plain_success: bool,
    /// Whether a closed-state success only fills the rate window: a failure-rate policy with
    /// no slow threshold and no bulkhead. Taken inline, like `plain_success`.
    window_success: bool,
    /// A registry breaker: leaked, lives for the process; its handles count no references.
    pub(crate) registered: bool,
    /// The thread that owns `counts`: written once, read by every call.
    owner: AtomicU64,
    /// While open: when it may probe. Written with the transition to `Open`.
    open_until: AtomicU64,

    // Line 1. The first thread to record writes its counts here alone; see counters.rs.
    counts: Counts,
    /// When the state last changed. Written on transitions, read by `metrics`.
    state_since: AtomicU64,
    times_opened: AtomicU64,
    transition: Mutex<()>,

    // Line 2. Written on the slower paths.
    spill: Spill,
    /// What few breakers use, allocated on first use.
    cold: OnceBox<Cold>,
    /// When the current `failures_within` streak started; see `record_within_failure`.
    mark: AtomicU64,
    probe: AtomicU64,
    /// Handles to a `Breaker::new` breaker; unused for a registry one.
    refs: AtomicUsize,
    reopens: AtomicU32,
    /// Numbers `failures_within` streaks, to tag them (see `record_within_failure`).
    starts: AtomicU32,
    /// Bulkhead places: the generation they were taken in (high 32 bits) and how many are
    /// taken (low 32). The first admission of a generation starts the count over, so a place
    /// whose permit never records (forgotten, or parked for ever) is freed by the next
    /// transition; see `acquire_other`.
    active: AtomicU64,
    /// Weak handles to a `Breaker::new` breaker, plus one for all its handles together (as in
    /// `Arc`): the last handle drops the breaker's contents, the last of these frees its
    /// memory. Unused for a registry one. 32 bits to keep the line: see `Breaker::downgrade`.
    weak: AtomicU32,
}

// The layout the comments above describe. Not under loom, whose atomics are larger.
#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::offset_of!(Inner, open_until) < 64);
    assert!(core::mem::offset_of!(Inner, counts) == 64);
    assert!(core::mem::offset_of!(Inner, spill) == 128);
};

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
    #[inline]
    fn drop(&mut self) {
        let inner = self.inner();
        // Release: this handle's uses happen before the last handle frees the breaker,
        // which acquires them all with the fence below.
        if inner.registered || inner.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let ptr = self.0.as_ptr();
        // SAFETY: this was the last handle to a `Breaker::new` breaker; no other handle or
        // borrow of it remains (permits borrow a handle, owned permits hold one), and a weak
        // handle can no longer make one (`refs` is 0 for good). `Inner` has no `Drop` of its
        // own, so this drops its fields one by one through `ptr` and never makes a reference
        // to the whole: a weak handle may read `refs` (never dropped, an atomic) meanwhile.
        // Its listeners, and what they hold, go now, whatever weak handles remain.
        unsafe { core::ptr::drop_in_place(ptr) };
        // SAFETY: the handles' share of the weak count, given back once, by this last handle.
        unsafe { release_weak(self.0) };
    }
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

/// Gives back one share of `weak`; the last one frees the breaker's memory, whose contents
/// were dropped with its last handle.
///
/// # Safety
///
/// `ptr` is a `Breaker::new` breaker and the caller owns one share of its weak count, which
/// it gives up.
unsafe fn release_weak(ptr: NonNull<Inner>) {
    // SAFETY: the caller's share keeps the memory allocated; `weak` is an atomic, never
    // dropped with the contents, so it may be read through a reference to the field alone.
    let weak = unsafe { &*core::ptr::addr_of!((*ptr.as_ptr()).weak) };
    // Release and the fence: as for `refs` in `Breaker::drop`.
    if weak.fetch_sub(1, Ordering::Release) != 1 {
        return;
    }
    fence(Ordering::Acquire);
    // SAFETY: no handle and no weak handle remains; `Breaker::new` allocated this with
    // `Box::new`, that is with `Layout::new::<Inner>()`, and its contents were dropped.
    unsafe { std::alloc::dealloc(ptr.as_ptr().cast(), std::alloc::Layout::new::<Inner>()) };
}

/// A handle that does not keep its breaker alive, from [`Breaker::downgrade`]: what a listener
/// that acts on its own breaker should hold, since a [`Breaker`] captured by the breaker's own
/// listener keeps it alive for ever.
///
/// [`upgrade`](WeakBreaker::upgrade) gives a [`Breaker`] while any handle to it (or an
/// [`OwnedPermit`]) remains. A registry breaker lives for the process, so its weak handles
/// always upgrade.
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
pub struct WeakBreaker(NonNull<Inner>);

// SAFETY: a weak handle only reads `refs`, `weak` and `registered` (atomics and a constant) and
// upgrades to a `Breaker`, which is `Send + Sync`.
unsafe impl Send for WeakBreaker {}
// SAFETY: as above.
unsafe impl Sync for WeakBreaker {}

impl Breaker {
    /// A [`WeakBreaker`]: a handle that does not keep the breaker alive.
    ///
    /// Costs a reference-count increment for a [`Breaker::new`] breaker, nothing for a registry
    /// one. Aborts the process if more than 2^31 weak handles to one breaker are alive (only
    /// a leak of them gets there: wrapping would free a live breaker).
    pub fn downgrade(&self) -> WeakBreaker {
        let inner = self.inner();
        if !inner.registered {
            add_weak(&inner.weak);
        }
        WeakBreaker(self.0)
    }
}

fn add_weak(weak: &AtomicU32) {
    // Relaxed, as for `refs` in `Breaker::clone`: made from a live handle or weak handle.
    if weak.fetch_add(1, Ordering::Relaxed) > i32::MAX as u32 {
        // Only a leak of 2^31 weak handles gets here; wrapping would free a live breaker.
        std::process::abort();
    }
}

impl WeakBreaker {
    /// A [`Breaker`] handle, if the breaker is still alive: `None` once its last handle (and
    /// last [`OwnedPermit`]) was dropped.
    pub fn upgrade(&self) -> Option<Breaker> {
        let ptr = self.0.as_ptr();
        // SAFETY: this weak handle keeps the memory allocated; `registered` is a plain `bool`
        // set at creation and `refs` an atomic, neither dropped with the contents, read
        // through references to the fields alone.
        let (registered, refs) = unsafe {
            (
                *core::ptr::addr_of!((*ptr).registered),
                &*core::ptr::addr_of!((*ptr).refs),
            )
        };
        if registered {
            return Some(Breaker(self.0));
        }
        let mut n = refs.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                // The last handle is gone (or going): it stays gone.
                return None;
            }
            if n > isize::MAX as usize {
                std::process::abort(); // as in `Breaker::clone`
            }
            // Acquire: the new handle sees what the handles before it did. Never from 0, so
            // a breaker whose contents are dropped is never revived.
            match refs.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Some(Breaker(self.0)),
                Err(actual) => n = actual,
            }
        }
    }

    fn registered(&self) -> bool {
        // SAFETY: as in `upgrade`.
        unsafe { *core::ptr::addr_of!((*self.0.as_ptr()).registered) }
    }
}

impl Clone for WeakBreaker {
    /// Another weak handle to the same breaker.
    fn clone(&self) -> WeakBreaker {
        if !self.registered() {
            // SAFETY: as in `upgrade`; `weak` is an atomic that outlives the contents.
            add_weak(unsafe { &*core::ptr::addr_of!((*self.0.as_ptr()).weak) });
        }
        WeakBreaker(self.0)
    }
}

impl Drop for WeakBreaker {
    fn drop(&mut self) {
        if !self.registered() {
            // SAFETY: a `Breaker::new` breaker, and this handle's share of `weak`.
            unsafe { release_weak(self.0) };
        }
    }
}

impl fmt::Debug for WeakBreaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(WeakBreaker)")
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

/// A breaker's state as plain data: what processes sharing one breaker exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedState {
    /// The state.
    pub state: State,
    /// While open: how long until it probes.
    pub open_remaining: Option<Duration>,
    /// Re-opens since the last close: 0 while closed and during the first opening, 1 during
    /// the second. Under `backoff` they set the next open time: from open or half-open, the
    /// next opening lasts `open_for × backoff^(reopens + 1)`.
    pub reopens: u32,
}

impl SharedState {
    /// A shared state.
    pub fn new(state: State, open_remaining: Option<Duration>, reopens: u32) -> Self {
        SharedState {
            state,
            open_remaining,
            reopens,
        }
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

/// What a permit was admitted as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Closed = 0,
    Probe = 1,
    Disabled = 2,
}

/// What a permit carries: its generation and kind in one word, and its start time. Two plain
/// words, so that `Result<Permit, _>` moves through registers: a `u32` and two one-byte
/// fields made the compiler repack the permit through the stack with mixed-width loads and
/// stores, and the store-forwarding stall cost more than the rest of a closed call.
#[derive(Clone, Copy)]
struct Ticket {
    tag: u64,
    /// When the call started, if a `slow` threshold needs it measured.
    started: u64,
}

impl Ticket {
    #[inline(always)]
    fn new(generation: u32, kind: Kind, started: u64) -> Ticket {
        Ticket {
            tag: pack(generation, kind as u64),
            started,
        }
    }

    #[inline(always)]
    fn generation(self) -> u32 {
        generation(self.tag)
    }

    #[inline(always)]
    fn kind(self) -> Kind {
        match self.tag as u8 {
            0 => Kind::Closed,
            1 => Kind::Probe,
            _ => Kind::Disabled,
        }
    }
}

/// Leave to make one call; record its outcome with it.
///
/// From [`Breaker::try_acquire`]. A permit dropped without a verdict records what is right: a
/// [`Failure`](Outcome::Failure) while the thread is panicking (the panic goes on), otherwise
/// [`Ignored`](Outcome::Ignored) — a cancelled future says nothing about the service.
///
/// ```
/// use breakerbox_runtime::{Breaker, Config, Outcome};
///
/// let breaker = Breaker::new("cache", Config::default());
/// let permit = breaker.try_acquire()?;
/// // ... make the call ...
/// permit.record(Outcome::Success);
/// assert_eq!(breaker.metrics().successes, 1);
/// # Ok::<(), breakerbox_runtime::Rejected>(())
/// ```
#[must_use = "a permit records a cancelled call when dropped; record the outcome instead"]
pub struct Permit<'a> {
    inner: &'a Inner,
    ticket: Ticket,
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

    /// A registry breaker, not yet published: the registry builds it outside its locks, then
    /// publishes it, or drops it if another thread's breaker of that name got in first.
    pub(crate) fn unpublished(name: String, config: Config) -> Unpublished {
        Unpublished(Box::new(Inner::new(Identity::new(name), config, true)))
    }

    #[inline]
    pub(crate) fn inner(&self) -> &Inner {
        // SAFETY: the breaker lives while any handle does (see `Drop`), and is only ever
        // shared, never mutated through the pointer.
        unsafe { self.0.as_ref() }
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.inner().identity.name
    }

    /// Its configuration.
    pub fn config(&self) -> &Config {
        &self.inner().config
    }

    /// Its state now. An open breaker whose `open_for` has passed reads `Open` until a call
    /// arrives to probe.
    pub fn state(&self) -> State {
        State::from_word(self.inner().state.load(Ordering::Acquire))
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
            done: false,
        })
    }

    /// Asks to make one call. Record the outcome with the permit.
    #[inline]
    pub fn try_acquire(&self) -> Result<Permit<'_>, Rejected> {
        self.inner()
            .acquire()
            .map_err(|(reason, retry_after_ns)| Rejected {
                breaker: self.clone(),
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
    /// [`Ignored`](Outcome::Ignored). Needs no particular async runtime.
    pub async fn call_async<T, E: fmt::Display>(
        &self,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Error<E>> {
        let permit = self.try_acquire()?;
        let result = fut.await;
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
        write(&self.inner().cold().listeners).push(Arc::new(listener));
    }

    /// The message of the failure that last tripped the breaker.
    ///
    /// A failure-rate trip caused by a success (the window reaching `min_calls`) names the
    /// last failure with a message recorded while the window had fewer than `min_calls` calls;
    /// one caused by calls leaving a time window names none.
    pub fn last_failure(&self) -> Option<Arc<str>> {
        self.inner().last_failure()
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

    /// Whether two handles are the same breaker.
    pub fn same(&self, other: &Breaker) -> bool {
        core::ptr::eq(self.inner(), other.inner())
    }
}

/// A breaker's name. One word (the first cache line has no room for two), shared by the
/// breakers of a keyed family, and freed with the last breaker that holds it: names are no
/// longer interned for the process (D10). The last failure's message lives in [`Cold`], per
/// breaker. A [`Rejected`] names its breaker by holding a handle to it.
pub(crate) struct Identity {
    pub(crate) name: Arc<Box<str>>,
}

/// Breakers alive now (each holds one `Identity`): what the memory tests count.
static LIVE_IDENTITIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Identity {
    pub(crate) fn new(name: String) -> Identity {
        Identity::shared(Arc::new(name.into_boxed_str()))
    }

    pub(crate) fn shared(name: Arc<Box<str>>) -> Identity {
        LIVE_IDENTITIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Identity { name }
    }
}

impl Drop for Identity {
    fn drop(&mut self) {
        LIVE_IDENTITIES.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Breaker {
    /// Handles to a `Breaker::new` breaker now. Acquire: what the dropped handles did happens
    /// before. A keyed family folds an evicted breaker into its totals once only its own handle
    /// is left, when nothing can record into it any more.
    pub(crate) fn handles(&self) -> usize {
        self.inner().refs.load(Ordering::Acquire)
    }

    /// Successes, failures, ignored, rejected and slow calls, without reading the clock.
    pub(crate) fn counts(&self) -> [u64; 5] {
        let inner = self.inner();
        [
            Count::Success,
            Count::Failure,
            Count::Ignored,
            Count::Rejected,
            Count::Slow,
        ]
        .map(|kind| inner.counts.total(&inner.spill, kind))
    }
}

impl Breaker {
    /// Names the key of a keyed family's breaker, once: `key` (user code, a key's `Display`)
    /// runs under no lock, and its panic leaves a placeholder.
    pub(crate) fn name_key(&self, key: impl FnOnce() -> String) {
        let cold = self.inner().cold();
        if cold.key.get().is_none() {
            let text = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(key)) {
                Ok(text) => text,
                Err(payload) => {
                    crate::event::discard(payload);
                    DISPLAY_PANICKED.to_owned()
                }
            };
            let _ = cold.key.set(text.into_boxed_str());
        }
    }

    /// The key named by [`name_key`](Breaker::name_key), if any.
    pub(crate) fn key(&self) -> Option<&str> {
        self.inner().cold.get()?.key.get().map(|k| &**k)
    }
}

/// How many breakers (registry, `Breaker::new` and keyed ones) are alive in the process. For
/// tests of memory: it falls when a breaker's last handle is dropped.
#[doc(hidden)]
pub fn live_breakers() -> usize {
    LIVE_IDENTITIES.load(std::sync::atomic::Ordering::Relaxed)
}

/// The parts of a breaker that few breakers use.
#[derive(Default)]
struct Cold {
    listeners: RwLock<Vec<Listener>>,
    /// The message of the failure that last tripped the breaker. std, not loom: no protocol
    /// runs through it.
    last_failure: std::sync::Mutex<Option<Arc<str>>>,
    /// Events not yet told, in the order of their transitions (queued under the transition
    /// lock), and whether a thread is telling them. One thread at a time delivers, so
    /// listeners see transitions in order even when two threads cause them at once, and a
    /// listener that changes the state itself queues its event instead of deadlocking. The
    /// flag lives under the queue's lock: the deliverer finds the queue empty and stops
    /// delivering in one step, so no event is left behind.
    pending: Mutex<Pending>,
    /// The message of the last failure a rate window judged too soon (fewer than `min_calls`
    /// calls), with its generation: a success that brings the window to `min_calls` may trip
    /// it, and its rejections name this failure. std, not loom: a plain slot.
    behind: std::sync::Mutex<Option<(u32, Arc<str>)>>,
    /// A keyed family's breaker: its key as it displays, set by the family when it first
    /// rejects a call of the key (see `keyed`), for [`Rejected::key`](crate::Rejected::key).
    key: std::sync::OnceLock<Box<str>>,
}

#[derive(Default)]
struct Pending {
    events: VecDeque<Event>,
    delivering: bool,
}

/// Clears `delivering` if telling an event unwinds, so that a later transition delivers what is
/// left. Listeners' panics are caught (`event::tell`); a `tracing` subscriber's are not.
struct Delivering<'a>(&'a Mutex<Pending>);

impl Drop for Delivering<'_> {
    fn drop(&mut self) {
        lock(self.0).delivering = false;
    }
}

/// One shared `Arc` per distinct config, so that per-key breakers made by the thousand from
/// one config pay for it once. Runs only when a breaker is created, in O(1) amortized however
/// many breakers are alive: configs are found by hash (a config with a clock of its own hashes
/// by the clock's address, so a config is shared only by its clones, as equality says), and
/// entries of configs no breaker uses any more are swept when the pool has doubled since the
/// last sweep. Until then a dead entry keeps its config's allocation (not the clock), so the
/// pool holds at most about twice the configs that were alive at once.
fn intern(config: Config) -> Arc<Config> {
    static POOL: std::sync::LazyLock<std::sync::Mutex<Pool>> =
        std::sync::LazyLock::new(Default::default);
    let hash = config_hash(&config);
    // Dropped after the lock: a config's last reference may be one of these, and dropping it
    // drops the user's clock, whose `Drop` is user code.
    let mut spare = Vec::new();
    let (shared, unused) = POOL
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .intern(config, hash, &mut spare);
    drop((spare, unused));
    shared
}

/// The weak references behind `intern`, by the config's hash.
#[derive(Default)]
struct Pool {
    by_hash: std::collections::HashMap<u64, Vec<std::sync::Weak<Config>>>,
    /// Entries in `by_hash`, dead or alive.
    entries: usize,
    /// Sweep the dead entries when `entries` reaches this.
    sweep_at: usize,
}

impl Pool {
    /// The pooled config equal to `config` (and `config`, unused), or `config` pooled. What
    /// the caller drops after the lock is returned or put in `spare`.
    fn intern(
        &mut self,
        config: Config,
        hash: u64,
        spare: &mut Vec<Arc<Config>>,
    ) -> (Arc<Config>, Option<Config>) {
        let bucket = self.by_hash.entry(hash).or_default();
        let before = bucket.len();
        bucket.retain(|w| w.strong_count() > 0);
        self.entries -= before - bucket.len();
        for weak in bucket.iter() {
            work(1);
            if let Some(same) = weak.upgrade() {
                if *same == config {
                    return (same, Some(config));
                }
                spare.push(same);
            }
        }
        let config = Arc::new(config);
        bucket.push(Arc::downgrade(&config));
        self.entries += 1;
        if self.entries >= self.sweep_at {
            self.sweep();
        }
        (config, None)
    }

    fn sweep(&mut self) {
        work(self.entries as u64);
        self.by_hash.retain(|_, bucket| {
            bucket.retain(|w| w.strong_count() > 0);
            !bucket.is_empty()
        });
        self.entries = self.by_hash.values().map(Vec::len).sum();
        self.sweep_at = (2 * self.entries).max(64);
    }
}

// Counts the pool's work (comparisons and entries swept) on this thread, for the test that
// holds creation to O(1) amortized.
#[cfg(all(test, not(loom)))]
thread_local!(static POOL_WORK: core::cell::Cell<u64> = const { core::cell::Cell::new(0) });

#[inline]
fn work(_n: u64) {
    #[cfg(all(test, not(loom)))]
    POOL_WORK.with(|w| w.set(w.get() + _n));
}

/// A hash that agrees with `Config`'s `==`: equal configs hash alike.
fn config_hash(config: &Config) -> u64 {
    use std::hash::{Hash, Hasher};
    // Every field, by name: a new field fails to compile here until it is hashed (or left
    // out on purpose, which only makes more configs share a hash).
    let Config {
        failures,
        failures_within,
        failure_rate,
        window,
        min_calls,
        slow,
        slow_rate,
        open_for,
        max_open_for,
        backoff,
        jitter,
        half_open_calls,
        successes,
        probe_timeout,
        max_concurrent,
        max_keys,
        idle_for,
        clock,
    } = config;
    let mut h = std::hash::DefaultHasher::new();
    (failures, failures_within, failure_rate, window, min_calls).hash(&mut h);
    (slow, slow_rate, open_for, max_open_for).hash(&mut h);
    (half_open_calls, successes, probe_timeout, max_concurrent).hash(&mut h);
    (max_keys, idle_for).hash(&mut h);
    // `+ 0.0` makes -0.0 (equal to 0.0) hash as 0.0.
    ((backoff + 0.0).to_bits(), (jitter + 0.0).to_bits()).hash(&mut h);
    match clock {
        ClockRef::System => 0usize.hash(&mut h),
        // The address alone, as `Arc::ptr_eq` compares it.
        ClockRef::Custom(c) => (Arc::as_ptr(c) as *const () as usize).hash(&mut h),
    }
    h.finish()
}

impl Inner {
    /// Counts one `kind`; returns the calling thread's counter slot.
    #[inline]
    fn count(&self, kind: Count) -> Slot {
        self.counts.add(&self.owner, &self.spill, kind)
    }

    fn cold(&self) -> &Cold {
        self.cold.get_or_init(Box::default)
    }

    /// The message of the failure that last tripped the breaker.
    pub(crate) fn last_failure(&self) -> Option<Arc<str>> {
        let cold = self.cold.get()?;
        cold.last_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps `failure` as the last one, allocating the cold part only to store one.
    fn set_last_failure(&self, failure: Option<Arc<str>>) {
        let cold = match (&failure, self.cold.get()) {
            (None, None) => return,
            (_, Some(cold)) => cold,
            (Some(_), None) => self.cold(),
        };
        *cold.last_failure.lock().unwrap_or_else(|e| e.into_inner()) = failure;
    }

    fn new(identity: Identity, config: Config, registered: bool) -> Inner {
        let now = config.clock.coarse();
        let window = config
            .uses_window()
            .then(|| Box::new(RateWindow::new(config.window)));
        Inner {
            state: AtomicU64::new(pack(0, State::Closed.tag())),
            streak: AtomicU64::new(pack(0, 0)),
            window,
            identity,
            open_until: AtomicU64::new(0),
            state_since: AtomicU64::new(now),
            mark: AtomicU64::new(now),
            probe: AtomicU64::new(0),
            reopens: AtomicU32::new(0),
            starts: AtomicU32::new(0),
            active: AtomicU64::new(pack(0, 0)),
            times_opened: AtomicU64::new(0),
            transition: Mutex::new(()),
            cold: OnceBox::new(),
            refs: AtomicUsize::new(1),
            weak: AtomicU32::new(1),
            registered,
            plain_acquire: config.slow.is_none() && config.max_concurrent.is_none(),
            plain_success: config.slow.is_none()
                && !config.uses_window()
                && config.max_concurrent.is_none(),
            window_success: config.slow.is_none()
                && config.failure_rate.is_some()
                && config.max_concurrent.is_none(),
            owner: AtomicU64::new(0),
            counts: Counts::default(),
            spill: Spill::default(),
            config: intern(config),
        }
    }

    /// `SharedState::reopens`: the re-opens since the last close. `reopens` counts openings
    /// (the first is not a re-open), and is the backoff level of the next one.
    fn reopens_since_close(&self) -> u32 {
        self.reopens.load(Ordering::Relaxed).saturating_sub(1)
    }

    fn clock(&self) -> &ClockRef {
        &self.config.clock
    }

    #[inline]
    fn permit(&self, generation: u32, kind: Kind) -> Permit<'_> {
        let started = match self.config.slow {
            Some(_) if kind != Kind::Disabled => self.clock().precise(),
            _ => 0,
        };
        Permit {
            inner: self,
            ticket: Ticket::new(generation, kind, started),
        }
    }

    /// Admission. The path that matters most — a closed breaker with a plain config — is
    /// inlined into the caller (one load, two compares); everything else is out of line.
    #[inline(always)]
    fn acquire(&self) -> Result<Permit<'_>, Refusal> {
        // Acquire pairs with the Release store of a transition: whoever sees a state also sees
        // the data prepared for it (deadline, probe word, cleared window).
        let word = self.state.load(Ordering::Acquire);
        match State::from_word(word) {
            // The state word is the ticket: a closed state's tag is 0, as is a closed kind's.
            State::Closed if self.plain_acquire => Ok(Permit {
                inner: self,
                ticket: Ticket {
                    tag: word,
                    started: 0,
                },
            }),
            _ => self.acquire_word(word),
        }
    }

    /// Admission by the state in `word`, when it is not the plain closed one; re-entered
    /// after a transition. An open breaker's rejection is answered here, in a frame of its
    /// own: inlining the other states' paths made every rejection pay for saving the
    /// registers they use, and for a jump table (~2 ns of a ~10 ns rejection).
    #[inline(never)]
    fn acquire_word(&self, word: u64) -> Result<Permit<'_>, Refusal> {
        if State::from_word(word) == State::Open {
            return self.acquire_open(generation(word));
        }
        self.acquire_other(word)
    }

    #[inline(never)]
    fn acquire_other(&self, word: u64) -> Result<Permit<'_>, Refusal> {
        let generation = generation(word);
        match State::from_word(word) {
            State::Closed => {
                if let Some(max) = self.config.max_concurrent {
                    // Each admission is one compare-and-swap below the limit. Not an increment
                    // undone on refusal: a refused call's passing increment would refuse
                    // another call while a place is free.
                    //
                    // The count is of this generation's places. The first admission of a
                    // generation finds an older one's count and starts it over: every place
                    // taken before the last transition is free, even that of a permit that
                    // will never record. Release/Acquire: a count is stamped with a generation
                    // only by a thread that saw that generation's state word, so a thread that
                    // sees the stamp and admits again by the state sees that state too.
                    let mut cur = self.active.load(Ordering::Acquire);
                    loop {
                        let stamped = crate::breaker::generation(cur);
                        let taken = if stamped == generation {
                            cur as u32
                        } else if (generation.wrapping_sub(stamped) as i32) > 0 {
                            0 // an older generation's places: all free now
                        } else {
                            // A transition came between: admit by the state now.
                            return self.acquire_word(self.state.load(Ordering::Acquire));
                        };
                        if taken >= max {
                            return Err(self.reject(RejectReason::BulkheadFull, NO_RETRY));
                        }
                        match self.active.compare_exchange_weak(
                            cur,
                            pack(generation, u64::from(taken) + 1),
                            Ordering::Release,
                            Ordering::Acquire,
                        ) {
                            Ok(_) => break,
                            Err(actual) => cur = actual,
                        }
                    }
                }
                Ok(self.permit(generation, Kind::Closed))
            }
            State::Disabled => Ok(self.permit(generation, Kind::Disabled)),
            State::ForcedOpen => Err(self.reject(RejectReason::ForcedOpen, NO_RETRY)),
            State::Open => self.acquire_open(generation),
            State::HalfOpen => self.acquire_probe(generation, self.clock().coarse()),
        }
    }

    #[inline]
    fn reject(&self, reason: RejectReason, retry_after_ns: u64) -> Refusal {
        let reason = reason.code();
        self.count(Count::Rejected);
        (reason, retry_after_ns)
    }

    #[inline]
    fn acquire_open(&self, generation: u32) -> Result<Permit<'_>, Refusal> {
        let now = self.clock().coarse();
        let until = self.open_until.load(Ordering::Relaxed);
        if now < until {
            return Err(self.reject(RejectReason::Open, until - now));
        }
        self.open_elapsed(generation, now)
    }

    #[cold]
    fn open_elapsed(&self, generation: u32, now: u64) -> Result<Permit<'_>, Refusal> {
        self.transition(
            generation,
            &[State::Open],
            State::HalfOpen,
            Reason::OpenElapsed,
            None,
            now,
        );
        // Whoever won the transition, the breaker is now past `Open` (or changed by hand):
        // admit by what it is now.
        let word = self.state.load(Ordering::Acquire);
        match State::from_word(word) {
            State::HalfOpen => self.acquire_probe(crate::breaker::generation(word), now),
            _ => self.acquire_word(word),
        }
    }

    fn acquire_probe(&self, generation: u32, now: u64) -> Result<Permit<'_>, Refusal> {
        let limit = u64::from(self.config.half_open_calls);
        let mut cur = self.probe.load(Ordering::Acquire);
        loop {
            if crate::breaker::generation(cur) != generation {
                // The round ended while we looked; admit by the state now.
                return self.acquire_word(self.state.load(Ordering::Acquire));
            }
            let admitted = (cur >> PROBE_BITS) & PROBE_MASK;
            if admitted >= limit {
                // The round's time runs from entering half-open, not from the last admission:
                // a second probe admitted late must not give a hung first one more time.
                // Relaxed: the state word's Acquire load showed this generation, so this reads
                // the time its transition stored, or a later one's (and then the transition
                // below finds the generation gone).
                let entered = self.state_since.load(Ordering::Relaxed);
                if now.saturating_sub(entered) >= nanos(self.config.probe_timeout) {
                    self.transition(
                        generation,
                        &[State::HalfOpen],
                        State::Open,
                        Reason::ProbeTimeout,
                        None,
                        now,
                    );
                    // The round is over, whoever ended it: answer as the breaker is now,
                    // which for an open one says when to retry.
                    return self.acquire_word(self.state.load(Ordering::Acquire));
                }
                return Err(self.reject(RejectReason::HalfOpenFull, NO_RETRY));
            }
            match self.probe.compare_exchange_weak(
                cur,
                cur + (1 << PROBE_BITS),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(self.permit(generation, Kind::Probe)),
                Err(actual) => cur = actual,
            }
        }
    }

    /// Records a finished call. The closed-state success is inlined into the caller: one
    /// counter stripe write and one load of the streak, nothing shared written.
    ///
    /// Takes the ticket's words as two scalars, not the permit by reference: a permit spilled
    /// across the user's call as two 8-byte stores and read back as one 16-byte copy stalls
    /// store forwarding (~7 ns, the bulk of a closed call before this).
    #[inline(always)]
    fn record(&self, ticket: Ticket, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        // Only the plain closed success is forced inline; anything larger here grew past the
        // inliner's budget once and cost a call on every success (+1.5 ns).
        if self.plain_success
            && ticket.kind() == Kind::Closed
            && matches!(outcome, Outcome::Success)
        {
            self.count(Count::Success);
            let cur = self.streak.load(Ordering::Relaxed);
            if cur as u32 != 0 {
                self.break_streak(ticket.generation(), cur);
            }
            return;
        }
        self.record_other(ticket, outcome, cause);
    }

    /// Everything but the plain closed success: a window success is still taken without the
    /// generic path.
    #[inline(never)]
    fn record_other(&self, ticket: Ticket, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        if self.window_success
            && ticket.kind() == Kind::Closed
            && matches!(outcome, Outcome::Success)
            && let Some(window) = &self.window
        {
            let slot = self.count(Count::Success);
            self.record_window_success(window, ticket.generation(), slot);
            return;
        }
        self.record_any(ticket, outcome, cause);
    }

    /// A closed-state success into a rate window: what `record_closed` does for it, inline.
    #[inline]
    fn record_window_success(&self, window: &RateWindow, generation: u32, slot: Slot) {
        if generation != crate::breaker::generation(self.state.load(Ordering::Relaxed)) {
            return; // stale
        }
        let now = if window.needs_clock() {
            self.clock().coarse()
        } else {
            0
        };
        if window.record(false, false, now, self.config.min_calls, slot) {
            self.judge_rates(window, generation, now, None);
        }
    }

    /// Gives back the bulkhead place of a permit admitted in `generation`, if that generation's
    /// places are still counted: a transition since has freed them all.
    fn release_place(&self, generation: u32) {
        let mut cur = self.active.load(Ordering::Relaxed);
        while crate::breaker::generation(cur) == generation && cur as u32 != 0 {
            match self.active.compare_exchange_weak(
                cur,
                cur - 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    #[cold]
    fn break_streak(&self, generation: u32, mut cur: u64) {
        // A failed CAS means a failure slipped in meanwhile: retry, so this success counts as
        // after it. Giving up would keep a streak that includes failures from before this
        // success, which no order of the calls gives (F, F ∥ S must leave 0 or 1, never 2).
        while crate::breaker::generation(cur) == generation && cur as u32 != 0 {
            match self.streak.compare_exchange_weak(
                cur,
                pack(generation, 0),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    fn record_any(&self, ticket: Ticket, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        if ticket.kind() == Kind::Disabled {
            // Counted in the totals, judged by nothing: a disabled breaker records no verdict.
            self.count(match outcome {
                Outcome::Success => Count::Success,
                Outcome::Ignored => Count::Ignored,
                Outcome::Failure | Outcome::TripFor(_) => Count::Failure,
            });
            return;
        }
        if ticket.kind() == Kind::Closed && self.config.max_concurrent.is_some() {
            self.release_place(ticket.generation());
        }
        let slow = match self.config.slow {
            Some(threshold) if outcome != Outcome::Ignored => {
                let took = self.clock().precise().saturating_sub(ticket.started);
                took >= nanos(threshold)
            }
            _ => false,
        };
        if slow {
            self.count(Count::Slow);
        }
        let slot = match outcome {
            Outcome::Success => self.count(Count::Success),
            Outcome::Failure | Outcome::TripFor(_) => {
                // Counted first: the log formats the user's `Display`, which may panic (caught
                // by `Guarded`, but counting must not depend on that).
                let slot = self.count(Count::Failure);
                tracing::debug!(target: "breakerbox", name = %self.identity.name, cause = cause.map(|c| tracing::field::display(Guarded(c))), "call failed");
                slot
            }
            Outcome::Ignored => self.count(Count::Ignored),
        };
        if let Outcome::TripFor(d) = outcome {
            // The service said how long to stay away: honour it whatever the generation.
            let now = self.clock().coarse();
            let from = [State::Closed, State::Open, State::HalfOpen];
            self.transition_any(&from, State::Open, Reason::TripFor(d), cause, now, Some(d));
            return;
        }
        // A slow call counts as a failure unless slow calls trip by their own rate.
        let failed = outcome == Outcome::Failure || (slow && self.config.slow_rate.is_none());
        match ticket.kind() {
            Kind::Closed => {
                self.record_closed(ticket.generation(), outcome, failed, slow, cause, slot);
            }
            Kind::Probe => self.record_probe(ticket.generation(), outcome, failed || slow, cause),
            Kind::Disabled => {}
        }
    }

    fn record_closed(
        &self,
        generation: u32,
        outcome: Outcome,
        failed: bool,
        slow: bool,
        cause: Option<&dyn fmt::Display>,
        slot: Slot,
    ) {
        if outcome == Outcome::Ignored {
            return;
        }
        if let Some(window) = &self.window {
            let now = if window.needs_clock() {
                self.clock().coarse()
            } else {
                0
            };
            // A failure or slow call goes through the window's gate, which a close cannot clear
            // under it; a success is only checked (see `RateWindow::enter`).
            let against = failed || slow;
            if against {
                if !window.enter(generation) {
                    return; // stale: admitted before the last transition
                }
            } else if generation != crate::breaker::generation(self.state.load(Ordering::Relaxed)) {
                return; // stale
            }
            let judge = window.record(failed, slow, now, self.config.min_calls, slot);
            if against {
                // Left before judging: a trip takes the transition lock, under which a seal
                // waits for this record.
                window.leave();
            }
            if judge {
                self.judge_rates(window, generation, now, cause);
            }
            if self.config.failure_rate.is_some() {
                return;
            }
        }
        // Consecutive failures.
        let cur = self.streak.load(Ordering::Relaxed);
        if !failed {
            // Reads and goes: no write unless a streak is to be broken.
            if cur as u32 != 0 {
                self.break_streak(generation, cur);
            }
            return;
        }
        self.record_streak_failure(generation, cur, cause);
    }

    #[cold]
    fn record_streak_failure(
        &self,
        generation: u32,
        mut cur: u64,
        cause: Option<&dyn fmt::Display>,
    ) {
        if let Some(within) = self.config.failures_within {
            return self.record_within_failure(generation, nanos(within), cause);
        }
        loop {
            if crate::breaker::generation(cur) != generation {
                return; // stale
            }
            let n = (cur as u32).saturating_add(1);
            match self.streak.compare_exchange_weak(
                cur,
                pack(generation, u64::from(n)),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if n >= self.config.failures {
                        self.trip_streak(generation, n, cause);
                    }
                    return;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// A failure under `failures_within`: the streak counts only failures within `within` of
    /// its first, so a streak and its start must be seen together.
    ///
    /// The streak word's low half is then a tag (`WITHIN_TAG`) and the count. A failure that
    /// finds no streak stores the start in `mark` first (a compare-and-swap, so a failure that
    /// looked before another started one does not overwrite its start), then publishes the
    /// streak with a fresh tag (Release); a failure that sees the streak (Acquire) so sees its
    /// start, or one stored a moment later by a failure whose start lost the race. An expired
    /// streak is ended first, then started again as from none; the tag makes that end fail
    /// against a streak started meanwhile (`(g, 1)` again, but not the same streak), which a
    /// failure that read the old start would otherwise end.
    ///
    /// Before, the start was stored after the streak: a second failure at the same moment
    /// could read the previous streak's start, find it expired, and start over, so two
    /// failures in a row did not trip `failures = 2`.
    #[cold]
    fn record_within_failure(
        &self,
        generation: u32,
        within: u64,
        cause: Option<&dyn fmt::Display>,
    ) {
        let now = self.clock().coarse();
        let limit = self.config.failures.min(WITHIN_COUNT as u32);
        let mut cur = self.streak.load(Ordering::Acquire);
        loop {
            if crate::breaker::generation(cur) != generation {
                return; // stale
            }
            let n = cur & WITHIN_COUNT;
            if n != 0 {
                let start = self.mark.load(Ordering::Relaxed);
                if now.saturating_sub(start) <= within {
                    let next = if n == WITHIN_COUNT { cur } else { cur + 1 };
                    match self.streak.compare_exchange(
                        cur,
                        next,
                        Ordering::Relaxed,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            let n = (next & WITHIN_COUNT) as u32;
                            if n >= limit {
                                self.trip_streak(generation, n, cause);
                            }
                            return;
                        }
                        Err(actual) => {
                            cur = actual;
                            continue;
                        }
                    }
                }
                // Too old: this failure starts a new streak, once the old one is ended.
                let none = pack(generation, 0);
                match self
                    .streak
                    .compare_exchange(cur, none, Ordering::Relaxed, Ordering::Acquire)
                {
                    Ok(_) => cur = none,
                    Err(actual) => {
                        cur = actual;
                        continue;
                    }
                }
            }
            // No streak: its start first, then the streak.
            let mark = self.mark.load(Ordering::Relaxed);
            if self
                .mark
                .compare_exchange(mark, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                // Another failure is starting one: count by what it made.
                cur = self.streak.load(Ordering::Acquire);
                continue;
            }
            let tag = u64::from(self.starts.fetch_add(1, Ordering::Relaxed) as u8) << WITHIN_TAG;
            match self.streak.compare_exchange(
                cur,
                pack(generation, tag | 1),
                Ordering::Release,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if limit <= 1 {
                        self.trip_streak(generation, 1, cause);
                    }
                    return;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    fn trip_streak(&self, generation: u32, n: u32, cause: Option<&dyn fmt::Display>) {
        let now = self.clock().coarse();
        self.transition(
            generation,
            &[State::Closed],
            State::Open,
            Reason::Failures(n),
            cause,
            now,
        );
    }

    #[cold]
    fn judge_rates(
        &self,
        window: &RateWindow,
        generation: u32,
        now: u64,
        cause: Option<&dyn fmt::Display>,
    ) {
        // A count window records without the time; a transition needs it.
        let now = if window.needs_clock() {
            now
        } else {
            self.clock().coarse()
        };
        let t = window.tally(now);
        let short = t.calls < u64::from(self.config.min_calls);
        window.judged(short);
        if short || t.calls == 0 {
            if let Some(cause) = cause {
                // A success may trip the window later, when it reaches `min_calls`: keep what
                // to name then. Formatted only while the window is short, so at most
                // `min_calls` times per count window.
                let text = message(cause);
                *self.cold().behind.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((generation, text));
            }
            return;
        }
        // At most 100: a tally read while calls expire may hold a failure whose call it missed.
        let pct = |n: u64| (n.min(t.calls) * 100 / t.calls) as u8;
        let reason = match (self.config.failure_rate, self.config.slow_rate) {
            (Some(limit), _) if pct(t.failures) >= limit => Reason::FailureRate(pct(t.failures)),
            (_, Some(limit)) if pct(t.slow) >= limit => Reason::SlowRate(pct(t.slow)),
            _ => return,
        };
        self.transition(
            generation,
            &[State::Closed],
            State::Open,
            reason,
            cause,
            now,
        );
    }

    fn record_probe(
        &self,
        generation: u32,
        outcome: Outcome,
        failed: bool,
        cause: Option<&dyn fmt::Display>,
    ) {
        let now = self.clock().coarse();
        if failed {
            self.transition(
                generation,
                &[State::HalfOpen],
                State::Open,
                Reason::ProbeFailed,
                cause,
                now,
            );
            return;
        }
        let mut cur = self.probe.load(Ordering::Acquire);
        loop {
            if crate::breaker::generation(cur) != generation {
                return; // the round is over
            }
            let next = match outcome {
                Outcome::Ignored => cur - (1 << PROBE_BITS), // frees the slot
                _ => cur + 1,
            };
            match self
                .probe
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        let successes = (cur & PROBE_MASK) + 1;
        if outcome == Outcome::Success && successes >= u64::from(self.config.successes) {
            self.transition(
                generation,
                &[State::HalfOpen],
                State::Closed,
                Reason::ProbesSucceeded,
                None,
                now,
            );
        }
    }

    fn manual(&self, to: State, open_for: Option<Duration>) {
        let now = self.clock().coarse();
        let reason = match (to, open_for) {
            (State::Open, Some(d)) => Reason::TripFor(d),
            (State::ForcedOpen, _) => Reason::ForcedOpen,
            (State::Disabled, _) => Reason::Disabled,
            _ => Reason::Reset,
        };
        self.transition_any(&State::ALL, to, reason, None, now, open_for);
    }

    /// Moves from one of `from` in `generation` to `to`. Returns whether it did.
    fn transition(
        &self,
        generation: u32,
        from: &[State],
        to: State,
        reason: Reason,
        cause: Option<&dyn fmt::Display>,
        now: u64,
    ) -> bool {
        self.change(Some(generation), from, to, reason, cause, now, None)
    }

    fn transition_any(
        &self,
        from: &[State],
        to: State,
        reason: Reason,
        cause: Option<&dyn fmt::Display>,
        now: u64,
        open_for: Option<Duration>,
    ) -> bool {
        self.change(None, from, to, reason, cause, now, open_for)
    }

    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn change(
        &self,
        expect: Option<u32>,
        from: &[State],
        to: State,
        reason: Reason,
        cause: Option<&dyn fmt::Display>,
        now: u64,
        open_for: Option<Duration>,
    ) -> bool {
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
        let guard = lock(&self.transition);
        let word = self.state.load(Ordering::Acquire);
        let was = State::from_word(word);
        if expect.is_some_and(|g| g != generation(word)) || !from.contains(&was) {
            return false;
        }
        let next = generation(word).wrapping_add(1);
        if let Some(w) = &self.window {
            // Records of the generation that ends here are finished, and later ones refused,
            // before the window is cleared or the new state published.
            w.seal(next);
        }
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
                if was != State::Open {
                    // A re-trip of an open breaker (a `TripFor` while open) moves its deadline
                    // but opens nothing: like the event, it is not counted.
                    self.times_opened.fetch_add(1, Ordering::Relaxed);
                }
                // The message of the failure that tripped it this time; none if it had none,
                // rather than an earlier trip's (allocating the cold part only to store one).
                self.set_last_failure(message);
            }
            State::HalfOpen => self.probe.store(pack(next, 0), Ordering::Relaxed),
            State::Closed => {
                self.streak.store(pack(next, 0), Ordering::Relaxed);
                if let Some(w) = &self.window {
                    w.clear();
                }
                self.reopens.store(0, Ordering::Relaxed);
            }
            State::ForcedOpen | State::Disabled => {}
        }
        if matches!(to, State::Closed | State::ForcedOpen | State::Disabled) {
            // Whatever happened before a close or a manual state, the next trip starts over.
            self.streak.store(pack(next, 0), Ordering::Relaxed);
        }
        self.state_since.store(now, Ordering::Relaxed);
        self.state.store(pack(next, to.tag()), Ordering::Release);
        // A reset of a closed breaker, say, clears counts but has no state change to tell.
        let changed = was != to;
        if changed {
            lock(&self.cold().pending).events.push_back(Event {
                name: self.identity.name.to_string(),
                from: was,
                to,
                reason,
                at: Duration::from_nanos(now),
                wall: std::time::SystemTime::now(),
            });
        }
        drop(guard);
        if changed {
            self.deliver();
        }
        true
    }

    /// For a failure-rate trip by a success: the last failure of generation `expect` kept by
    /// `judge_rates`.
    fn failure_behind(&self, expect: Option<u32>) -> Option<Arc<str>> {
        let cold = self.cold.get()?;
        let behind = cold.behind.lock().unwrap_or_else(|e| e.into_inner());
        match (&*behind, expect) {
            (Some((generation, text)), Some(expect)) if *generation == expect => Some(text.clone()),
            _ => None,
        }
    }

    /// The open time for this opening: `open_for × backoff^reopens`, capped, with jitter.
    fn next_open_for(&self) -> Duration {
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

    /// Tells queued events, unless another thread is at it: that one will tell ours too.
    fn deliver(&self) {
        let pending = &self.cold().pending;
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
        if level_warn {
            tracing::warn!(target: "breakerbox", name = %event.name, from = %event.from, to = %event.to, reason = %event.reason, "circuit breaker state changed");
        } else {
            tracing::info!(target: "breakerbox", name = %event.name, from = %event.from, to = %event.to, reason = %event.reason, "circuit breaker state changed");
        }
        let listeners: Vec<Listener> = match self.cold.get() {
            Some(cold) => read(&cold.listeners).clone(),
            None => Vec::new(),
        };
        // Each listener's panic is caught (see `tell`): one that panics while this thread is
        // unwinding (a permit recording a panicking call's failure) would otherwise abort.
        crate::event::tell(&listeners, event, "listener");
        if self.registered {
            crate::registry::registry().notify(event);
        }
    }

    fn metrics(&self) -> Metrics {
        let word = self.state.load(Ordering::Acquire);
        let state = State::from_word(word);
        let now = self.clock().coarse();
        let c = |kind| self.counts.total(&self.spill, kind);
        let (successes, failures, ignored, rejected, slow) = (
            c(Count::Success),
            c(Count::Failure),
            c(Count::Ignored),
            c(Count::Rejected),
            c(Count::Slow),
        );
        let streak = self.streak.load(Ordering::Relaxed);
        let count = if self.config.failures_within.is_some() {
            streak & WITHIN_COUNT
        } else {
            u64::from(streak as u32)
        };
        let consecutive_failures =
            if state == State::Closed && generation(streak) == generation(word) {
                count
            } else {
                0
            };
        let probe = self.probe.load(Ordering::Relaxed);
        let consecutive_successes =
            if state == State::HalfOpen && generation(probe) == generation(word) {
                probe & PROBE_MASK
            } else {
                0
            };
        let tally = self.window.as_ref().map(|w| w.tally(now));
        let rate = |n: u64, calls: u64| (calls > 0).then(|| n as f64 * 100.0 / calls as f64);
        Metrics {
            name: self.identity.name.to_string(),
            state,
            time_in_state: Duration::from_nanos(
                now.saturating_sub(self.state_since.load(Ordering::Relaxed)),
            ),
            calls: successes + failures + ignored + rejected,
            successes,
            failures,
            ignored,
            rejected,
            slow,
            window_calls: tally.map_or(0, |t| t.calls),
            failure_rate: tally.and_then(|t| rate(t.failures, t.calls)),
            slow_rate: tally.and_then(|t| rate(t.slow, t.calls)),
            consecutive_failures,
            consecutive_successes,
            times_opened: self.times_opened.load(Ordering::Relaxed),
            retry_after: (state == State::Open).then(|| {
                Duration::from_nanos(self.open_until.load(Ordering::Relaxed).saturating_sub(now))
            }),
        }
    }
}

/// What a panicking `Display` leaves in a message.
pub(crate) const DISPLAY_PANICKED: &str = "<Display panicked>";

/// A user's `Display`, whose panic is caught: it ends what was written with
/// [`DISPLAY_PANICKED`] instead of unwinding through the breaker.
struct Guarded<'a>(&'a dyn fmt::Display);

impl fmt::Display for Guarded<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.fmt(f))) {
            Ok(result) => result,
            Err(payload) => {
                // Its `Drop` is user code too, and may panic.
                crate::event::discard(payload);
                f.write_str(DISPLAY_PANICKED)
            }
        }
    }
}

/// A failure's message, formatted by the user's `Display`; [`DISPLAY_PANICKED`] if it panics.
fn message(cause: &dyn fmt::Display) -> Arc<str> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cause.to_string())) {
        Ok(text) => text.into(),
        Err(payload) => {
            // Dropped panic-safely: a payload whose `Drop` panics would otherwise unwind out
            // of the transition before it is made, and the failure that trips would open nothing.
            crate::event::discard(payload);
            DISPLAY_PANICKED.into()
        }
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Permit<'_> {
    /// Records the call's outcome.
    #[inline]
    pub fn record(self, outcome: Outcome) {
        self.record_with(outcome, None);
    }

    /// Records the call's outcome with the failure's message, which is kept (and shown by
    /// [`Rejected`]) if this failure trips the breaker. The message is formatted only then,
    /// under a failure rate also while the window holds fewer than `min_calls` calls (a
    /// success may trip it later; see [`Breaker::last_failure`]), and by a `debug` log if a
    /// subscriber wants it. A `Display` that panics gives the message `<Display panicked>`:
    /// its panic is caught and never reaches the caller, and the outcome is recorded in full.
    #[inline]
    pub fn record_with(self, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        // Recorded here, so the drop that records a cancelled call must not run. The words are
        // read one by one (see `Inner::record`), and the permit is forgotten before recording,
        // so that a panicking listener cannot make it record twice.
        let (inner, tag, started) = (self.inner, self.ticket.tag, self.ticket.started);
        core::mem::forget(self);
        inner.record(Ticket { tag, started }, outcome, cause);
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

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.kind() == Kind::Probe
    }
}

/// Runs only for a permit dropped without a verdict: recording forgets the permit.
impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            record_unwinding(self.inner, self.ticket);
        } else {
            self.inner.record(self.ticket, Outcome::Ignored, None);
        }
    }
}

/// Records the failure of a call whose thread is unwinding. Recording may run user code — the
/// clock, read to time the call, date a streak or a window bucket, or end a probe round — and a
/// second panic escaping a `Drop` during an unwind aborts the process: it is caught and logged
/// at `error`, and the call's own panic goes on. The failure is then counted as far as the
/// clock let it be (a probe whose failure could not be dated holds its slot until
/// `probe_timeout`, as a hung one does).
#[cold]
fn record_unwinding(inner: &Inner, ticket: Ticket) {
    let recorded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        inner.record(ticket, Outcome::Failure, None)
    }));
    if let Err(payload) = recorded {
        tracing::error!(
            target: "breakerbox",
            name = %inner.identity.name,
            panic = crate::event::panic_message(&*payload),
            "recording the failure of a panicking call of circuit breaker '{}' panicked (caught)",
            inner.identity.name
        );
        crate::event::discard(payload);
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("breaker", &self.inner.identity.name)
            .field("probe", &self.is_probe())
            .finish()
    }
}

/// A [`Permit`] that owns a handle to its breaker, from [`Breaker::try_acquire_owned`].
///
/// Records like a [`Permit`], including on drop: `Ignored` for a cancelled call, `Failure`
/// while panicking.
#[must_use = "a permit records a cancelled call when dropped; record the outcome instead"]
pub struct OwnedPermit {
    breaker: Breaker,
    ticket: Ticket,
    done: bool,
}

impl OwnedPermit {
    /// The borrowed permit this one stands for; from then on, that one records.
    #[inline]
    fn take(&mut self) -> Permit<'_> {
        self.done = true;
        Permit {
            inner: self.breaker.inner(),
            ticket: self.ticket,
        }
    }

    /// Records the call's outcome.
    #[inline]
    pub fn record(mut self, outcome: Outcome) {
        self.take().record(outcome);
    }

    /// Records the call's outcome with the failure's message; see [`Permit::record_with`].
    #[inline]
    pub fn record_with(mut self, outcome: Outcome, cause: Option<&dyn fmt::Display>) {
        self.take().record_with(outcome, cause);
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

    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.kind() == Kind::Probe
    }

    /// The breaker this permit is from.
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if !self.done {
            drop(self.take());
        }
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("breaker", &self.breaker.name())
            .field("probe", &self.is_probe())
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Per-key breakers are made by the thousand: a breaker (its shared config aside) fits in
    /// three cache lines, one of them the owning thread's counter stripe, and its handle is a
    /// pointer (`Option<Breaker>` too).
    #[test]
    fn a_breaker_fits_in_three_cache_lines() {
        assert_eq!(size_of::<Inner>(), 192);
        assert_eq!(size_of::<Breaker>(), 8);
        assert_eq!(size_of::<Option<Breaker>>(), 8);
    }

    /// A `Breaker::new` breaker lives until its last handle (or owned permit) is dropped, and
    /// is freed then: its listeners, and what they hold, with it.
    #[test]
    fn the_last_handle_frees_the_breaker() {
        let alive = Arc::new(());
        let b = Breaker::new("freed", Config::default());
        let held = alive.clone();
        b.on_state_change(move |_| {
            let _ = &held;
        });
        let handles: Vec<Breaker> = (0..3).map(|_| b.clone()).collect();
        let permit = b.try_acquire_owned().unwrap();
        drop(b);
        std::thread::scope(|s| {
            for h in handles {
                s.spawn(move || h.force_open());
            }
        });
        assert_eq!(Arc::strong_count(&alive), 2, "freed while a permit held it");
        assert_eq!(permit.breaker().state(), State::ForcedOpen);
        permit.record(Outcome::Success);
        assert_eq!(
            Arc::strong_count(&alive),
            1,
            "not freed with its last handle"
        );
    }

    /// Registry breakers live for the process: their handles count nothing, and dropping
    /// every one of them leaves the breaker in place.
    #[test]
    fn registry_handles_count_no_references() {
        let b = Breaker::unpublished("leaked".into(), Config::default()).publish();
        let c = b.clone();
        assert_eq!(b.inner().refs.load(Ordering::Relaxed), 1);
        drop(b);
        assert_eq!(c.inner().refs.load(Ordering::Relaxed), 1);
        assert_eq!(c.state(), State::Closed);
    }

    /// A listener that acts on its own breaker through a weak handle keeps it alive no
    /// longer than its users do: the last user handle frees the breaker, its listener and
    /// what that holds, and the weak handles left then upgrade to nothing.
    #[test]
    fn a_listener_acting_on_its_own_breaker_does_not_keep_it_alive() {
        let alive = Arc::new(());
        let clock = crate::ManualClock::new();
        let config = Config::builder().failures(1).clock(clock.clone()).build();
        let b = Breaker::new("self-acting", config.unwrap());
        let weak = b.downgrade();
        let held = alive.clone();
        b.on_state_change(move |e| {
            let _ = &held;
            let Some(b) = weak.upgrade() else { return };
            match e.to {
                // Trips are answered by forcing it open; a reset closes it for good.
                State::Open => b.force_open(),
                State::ForcedOpen => assert_eq!(b.state(), State::ForcedOpen),
                _ => {}
            }
        });
        b.call(|| Err::<(), _>("down")).unwrap_err();
        assert_eq!(b.state(), State::ForcedOpen, "the listener acted on it");
        b.reset();
        assert_eq!(b.state(), State::Closed);
        let outside = b.downgrade();
        let other = outside.clone();
        assert!(outside.upgrade().unwrap().same(&b));
        assert_eq!(Arc::strong_count(&alive), 2);
        drop(b);
        assert_eq!(
            Arc::strong_count(&alive),
            1,
            "the breaker outlived its last handle"
        );
        assert!(outside.upgrade().is_none());
        drop(outside);
        assert!(other.upgrade().is_none());
    }

    /// An owned permit is a handle: a weak handle upgrades while it lives.
    #[test]
    fn a_weak_handle_upgrades_while_an_owned_permit_lives() {
        let b = Breaker::new("weak-permit", Config::default());
        let weak = b.downgrade();
        let permit = b.try_acquire_owned().unwrap();
        drop(b);
        let again = weak.upgrade().expect("the permit keeps it alive");
        permit.record(Outcome::Success);
        assert_eq!(again.metrics().successes, 1);
        drop(again);
        assert!(weak.upgrade().is_none());
    }

    /// Registry breakers live for the process: their weak handles always upgrade.
    #[test]
    fn a_registry_breakers_weak_handle_always_upgrades() {
        let b = Breaker::unpublished("weak-registered".into(), Config::default()).publish();
        let weak = b.downgrade();
        drop(b);
        assert_eq!(weak.clone().upgrade().unwrap().name(), "weak-registered");
    }

    /// Weak handles dropped on other threads while the last handle goes: the memory is freed
    /// once, by whichever is last (the loom model checks the orderings; this, the counts).
    #[test]
    fn weak_and_strong_handles_dropped_across_threads() {
        for _ in 0..100 {
            let b = Breaker::new("weak-threads", Config::default());
            let weaks: Vec<WeakBreaker> = (0..4).map(|_| b.downgrade()).collect();
            std::thread::scope(|s| {
                for w in weaks {
                    s.spawn(move || {
                        if let Some(b) = w.upgrade() {
                            b.force_open();
                        }
                    });
                }
                s.spawn(move || drop(b));
            });
        }
    }

    /// Creating a breaker costs O(1) amortized whatever the number of live breakers (D08):
    /// 100 000 live breakers, each with a clock of its own (so no two configs are equal), and
    /// 100 000 with distinct plain configs, are created with a bounded number of pool
    /// comparisons and sweep steps per creation. The scan this replaces made ~N²/2.
    #[test]
    fn creation_is_constant_work_at_any_number_of_live_breakers() {
        const N: u64 = 100_000;
        let work = || POOL_WORK.with(core::cell::Cell::get);
        let start = work();
        let own_clocks: Vec<Breaker> = (0..N)
            .map(|_| {
                let c = Config::builder().clock(crate::ManualClock::new()).build();
                Breaker::new("per-key", c.unwrap())
            })
            .collect();
        let spent = work() - start;
        assert!(spent <= 4 * N, "{spent} pool steps for {N} creations");
        let start = work();
        let distinct: Vec<Breaker> = (0..N)
            .map(|i| {
                let c = Config::builder().open_for(Duration::from_millis(i + 1));
                Breaker::new("per-key", c.build().unwrap())
            })
            .collect();
        let spent = work() - start;
        assert!(spent <= 4 * N, "{spent} pool steps for {N} creations");
        // Equal configs still share one allocation, found by hash.
        let again = Breaker::new("per-key", distinct[7].config().clone());
        assert!(Arc::ptr_eq(
            &again.inner().config,
            &distinct[7].inner().config
        ));
        let twin = Breaker::new("per-key", own_clocks[9].config().clone());
        assert!(Arc::ptr_eq(
            &twin.inner().config,
            &own_clocks[9].inner().config
        ));
        assert!(!Arc::ptr_eq(
            &own_clocks[0].inner().config,
            &own_clocks[1].inner().config
        ));
    }

    #[test]
    fn equal_configs_share_one_allocation() {
        let a = Breaker::new("a", Config::default());
        let b = Breaker::new("b", Config::default());
        assert!(Arc::ptr_eq(&a.inner().config, &b.inner().config));
        let c = Breaker::new("c", Config::builder().failures(9).build().unwrap());
        assert!(!Arc::ptr_eq(&a.inner().config, &c.inner().config));
    }
}
